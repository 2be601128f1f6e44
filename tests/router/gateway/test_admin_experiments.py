"""Starting and stopping experiments through the admin API, on the real app with the
session's trained model: a refused start (contract, a variant that does not load, one
already running, a key without the admin role) writes nothing and changes no decision;
a start and a stop are recorded under the key's name and reach a second app on the same
database (another worker, another host) within the poll interval."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from router.access import ApiKey, hash_key, new_key
from router.app.training import TrainResult
from router.contracts import ExperimentConfig
from router.gateway.app import create_app
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.experiment_db import experiments

POLL_S = 0.2
BOUND_S = POLL_S + 2.0
ADMIN, DESK = new_key(), new_key()
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}
AS_DESK = {"Authorization": f"Bearer {DESK}"}
MESSAGE = {"text": "my kettle arrived broken, please refund order O-1001", "customer": "c-1"}


def _experiment(name: str = "exp-1", **changes: Any) -> dict[str, Any]:
    return {"name": name, "salt": "s", "planned_requests": 100,
            "variants": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}], **changes}


@pytest.fixture
def keyed_settings(settings: Settings) -> Settings:
    keys = [ApiKey(name="ops-admin", sha256=hash_key(ADMIN), roles=("admin",)),
            ApiKey(name="desk", sha256=hash_key(DESK), roles=("gateway",))]
    return settings.model_copy(update={"api_keys": keys, "rate_limit_per_s": 0,
                                       "policy_poll_s": POLL_S})


@pytest.fixture
def client(keyed_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(keyed_settings)) as test_client:
        yield test_client


def _stored(settings: Settings) -> list[tuple[Any, ...]]:
    engine = make_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(experiments).order_by(experiments.c.id))]
    finally:
        engine.dispose()


def _route(client: TestClient) -> dict[str, Any]:
    answer = client.post("/v1/route", json=MESSAGE, headers=AS_DESK)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _logged(client: TestClient, request_id: str) -> dict[str, Any]:
    rows = DecisionLog(client.app.state.services.engine).rows()  # type: ignore[attr-defined]
    return next(r for r in rows if r["request_id"] == request_id)


def test_start_and_stop_are_recorded_under_the_key_name(client: TestClient) -> None:
    started = client.post("/v1/admin/experiments", json=_experiment(), headers=AS_ADMIN)
    assert started.status_code == 201, started.text
    assert (started.json()["name"], started.json()["status"],
            started.json()["started_by"]) == ("exp-1", "running", "ops-admin")

    decided = _route(client)  # this worker runs it at once
    assert decided["experiment"] == "exp-1" and decided["variant"] in ("a", "b")
    row = _logged(client, decided["request_id"])
    assert (row["experiment"], row["variant"]) == ("exp-1", decided["variant"])

    listed = client.get("/v1/admin/experiments", headers=AS_ADMIN).json()
    assert listed["running"]["name"] == "exp-1" and len(listed["history"]) == 1

    stopped = client.post("/v1/admin/experiments/exp-1/stop", headers=AS_ADMIN)
    assert stopped.status_code == 200, stopped.text
    assert (stopped.json()["status"], stopped.json()["stopped_by"]) == ("stopped", "ops-admin")
    after = _route(client)
    assert (after["experiment"], after["variant"]) == (None, None)
    assert _logged(client, after["request_id"])["experiment"] is None
    listed = client.get("/v1/admin/experiments", headers=AS_ADMIN).json()
    assert listed["running"] is None and listed["history"][0]["stopped_by"] == "ops-admin"


def _foreign_policy(trained: TrainResult, tmp_path: Path) -> str:
    policy = json.loads(trained.policy_path.read_text())
    policy["model"]["name"] = "local-tfidf-lr@someotherartifact"
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(policy))
    return str(path)


REFUSALS = [
    ("no-variants", lambda t, p: _experiment(variants=[]), "invalid_experiment",
     "field 'variants'"),
    ("zero-weights", lambda t, p: _experiment(variants=[{"name": "a", "weight": 0}]),
     "invalid_experiment", "weights sum to 0"),
    ("bad-backend", lambda t, p: _experiment(variants=[{"name": "a", "backend": "gpt"}]),
     "invalid_experiment", "field 'variants.0.backend'"),
    ("missing-model", lambda t, p: _experiment(variants=[
        {"name": "a"}, {"name": "b", "model": str(p / "nope.json")}]),
     "invalid_variant", "variant 'b' does not load"),
    ("foreign-policy", lambda t, p: _experiment(variants=[
        {"name": "a"}, {"name": "b", "model": str(t.model_path),
                        "policy": _foreign_policy(t, p)}]),
     "invalid_variant", "variant 'b' does not load"),
    ("missing-shadow-policy", lambda t, p: _experiment(shadows=[
        {"name": "s", "model": str(t.model_path), "policy": str(p / "nope.json")}]),
     "invalid_variant", "variant 's' does not load"),
]


@pytest.mark.parametrize(("make", "code", "says"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_a_start_that_does_not_validate_or_load_is_refused_and_writes_nothing(
    client: TestClient, keyed_settings: Settings, trained: TrainResult, tmp_path: Path,
    make: Any, code: str, says: str
) -> None:
    refused = client.post("/v1/admin/experiments", json=make(trained, tmp_path),
                          headers=AS_ADMIN)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == code
    assert says in refused.json()["error"]["message"]
    assert _stored(keyed_settings) == []
    assert _route(client)["experiment"] is None


def test_a_start_while_one_runs_is_refused_with_409(client: TestClient,
                                                    keyed_settings: Settings) -> None:
    assert client.post("/v1/admin/experiments", json=_experiment(),
                       headers=AS_ADMIN).status_code == 201
    before = _stored(keyed_settings)
    refused = client.post("/v1/admin/experiments", json=_experiment("exp-2"), headers=AS_ADMIN)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "experiment_running"
    assert _stored(keyed_settings) == before
    assert _route(client)["experiment"] == "exp-1"

    unknown = client.post("/v1/admin/experiments/exp-9/stop", headers=AS_ADMIN)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_experiment")
    assert client.post("/v1/admin/experiments/exp-1/stop", headers=AS_ADMIN).status_code == 200
    again = client.post("/v1/admin/experiments/exp-1/stop", headers=AS_ADMIN)
    assert (again.status_code, again.json()["error"]["code"]) == (409, "experiment_not_running")
    renamed = client.post("/v1/admin/experiments", headers=AS_ADMIN,
                          json=_experiment(salt="other"))
    assert (renamed.status_code, renamed.json()["error"]["code"]) == (
        409, "experiment_name_taken")


def test_a_key_without_the_admin_role_is_refused_and_writes_nothing(
    client: TestClient, keyed_settings: Settings
) -> None:
    for method, path, body in (("post", "/v1/admin/experiments", _experiment()),
                               ("get", "/v1/admin/experiments", None),
                               ("post", "/v1/admin/experiments/exp-1/stop", None)):
        refused = client.request(method, path, json=body, headers=AS_DESK)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
    assert _stored(keyed_settings) == []


def test_the_seed_is_adopted_by_an_empty_table_and_ignored_after(
    keyed_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    seed = ExperimentConfig.model_validate(_experiment("seeded"))
    caplog.set_level(logging.INFO, logger="router.app.experiment_sync")
    with TestClient(create_app(keyed_settings.model_copy(update={"experiment": seed}))) as one:
        assert _route(one)["experiment"] == "seeded"
        assert one.post("/v1/admin/experiments/seeded/stop", headers=AS_ADMIN).status_code == 200
    assert "adopted seeded from SUPPORT_ROUTER_EXPERIMENT" in caplog.text
    caplog.clear()
    with TestClient(create_app(keyed_settings.model_copy(update={"experiment": seed}))) as two:
        assert _route(two)["experiment"] is None  # the database (stopped) wins
    assert "SUPPORT_ROUTER_EXPERIMENT (seeded) is ignored" in caplog.text
    runs = _stored(keyed_settings)
    assert len(runs) == 1 and runs[0][4] == "SUPPORT_ROUTER_EXPERIMENT"  # started_by


def _runs(client: TestClient, experiment: str | None) -> float:
    start = time.monotonic()
    while (seen := _route(client)["experiment"]) != experiment:
        assert time.monotonic() - start < BOUND_S, f"still {seen}, not {experiment}"
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_second_app_on_the_same_database_follows_within_the_poll_interval(
    keyed_settings: Settings
) -> None:
    with TestClient(create_app(keyed_settings)) as one, \
            TestClient(create_app(keyed_settings)) as two:
        assert one.post("/v1/admin/experiments", json=_experiment(),
                        headers=AS_ADMIN).status_code == 201
        _runs(two, "exp-1")
        assert two.post("/v1/admin/experiments/exp-1/stop", headers=AS_ADMIN).status_code == 200
        _runs(one, None)


def test_a_running_experiment_that_does_not_load_here_is_logged_once_and_skipped(
    client: TestClient, keyed_settings: Settings, tmp_path: Path,
    caplog: pytest.LogCaptureFixture
) -> None:
    """Started behind this worker's back (another host, whose files differ): the worker
    runs no experiment, says why once, and follows the next change as usual."""
    from router.storage.experiment_db import ExperimentDB

    broken = ExperimentConfig.model_validate(_experiment("elsewhere", variants=[
        {"name": "a"}, {"name": "b", "model": str(tmp_path / "only-on-host-b.json")}]))
    db = ExperimentDB(client.app.state.services.engine)  # type: ignore[attr-defined]
    caplog.set_level(logging.INFO, logger="router.app.experiment_sync")
    db.start(broken, by="host-b")
    time.sleep(5 * POLL_S)
    assert _route(client)["experiment"] is None
    skipped = [r for r in caplog.records if "is not run by this worker" in r.getMessage()]
    assert len(skipped) == 1 and "variant 'b' does not load" in skipped[0].getMessage()
    db.stop("elsewhere", by="host-b")
    db.start(ExperimentConfig.model_validate(_experiment("exp-2")), by="host-b")
    _runs(client, "exp-2")

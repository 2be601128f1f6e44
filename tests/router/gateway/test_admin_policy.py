"""Publishing, rolling back and reloading refuse policies that would break routing.

Each attack a reviewer made on `POST /v1/admin/policy` is replayed on the real app with
the session's trained model: refused with 422 `invalid_policy` naming the field, and
the active file, the stored versions, the history and the decisions are as before.

The versions live in the database the app runs on, so a second app on the same database
(another worker, another host) serves what the first published within the poll interval.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from router.access import ApiKey, hash_key, new_key
from router.app.training import TrainResult
from router.contracts import ROUTES
from router.errors import InvalidPolicy
from router.gateway.app import create_app
from router.gateway.server import preflight
from router.settings import Settings
from router.storage.db import make_engine, migrate
from router.storage.policy_db import PolicyDB, policy_active, policy_history, policy_versions
from router.storage.policy_store import load_policy, save_policy

MESSAGE = {"text": "my kettle arrived broken, please refund order O-1001"}
POLL_S = 0.2
BOUND_S = POLL_S + 2.0
"""The poll interval these apps run with, and how long a change may take to arrive."""


@pytest.fixture
def own_settings(tmp_path: Path, trained: TrainResult) -> Settings:
    """A private copy of the trained model and policy: publishing rewrites the policy file."""
    model_dir = tmp_path / "models"
    model_dir.mkdir()
    shutil.copy(trained.model_path, model_dir / trained.model_path.name)
    shutil.copy(trained.policy_path, model_dir / "policy.json")
    return Settings(var_dir=tmp_path / "var", model_dir=model_dir,
                    policy_path=model_dir / "policy.json", policy_poll_s=POLL_S)


@pytest.fixture
def client(own_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(own_settings)) as test_client:
        yield test_client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _stored(settings: Settings) -> dict[str, object]:
    """Everything the policies are kept in: the database's rows and the active file."""
    engine = make_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            rows = {table.name: [tuple(row) for row in conn.execute(select(table))]
                    for table in (policy_versions, policy_active, policy_history)}
    finally:
        engine.dispose()
    return {**rows, "file": settings.policy_path.read_bytes()}


def _break_stored(settings: Settings, version: str, **changes: Any) -> None:
    """A hand edit of a stored version in the database."""
    engine = make_engine(settings.resolved_database_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(policy_versions).where(policy_versions.c.version == version)
                         .values(body=json.dumps(_active_json(settings, version=version,
                                                              **changes))))
    finally:
        engine.dispose()


def _serves(client: TestClient, version: str, within_s: float = BOUND_S) -> float:
    """Seconds until `client` decides under `version`; fails after `within_s`."""
    start = time.monotonic()
    while True:
        decided = client.post("/v1/route", json=MESSAGE).json()["policy_version"]
        if decided == version:
            return time.monotonic() - start
        assert time.monotonic() - start < within_s, f"still {decided}, not {version}"
        time.sleep(0.02)


def _active_json(settings: Settings, **changes: Any) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(settings.policy_path.read_text())
    return {**policy, **changes}


def _broken_file(settings: Settings) -> None:
    settings.policy_path.write_text(json.dumps(_active_json(
        settings, calibrator={"kind": "temperature", "params": {}})))


ATTACKS = [
    ({"calibrator": {"kind": "temperature", "params": {}}}, "field 'calibrator.params'",
     "temperature: Field required"),
    ({"calibrator": {"kind": "temperature", "params": {"temperature": 0}}},
     "field 'calibrator.params'", "greater than 0"),
    ({"per_route_thresholds": {"refund": -5, "account": 7}},
     "field 'per_route_thresholds.refund'", "must be in [0, 1]"),
    ({"calibrator": {"kind": "isotonic", "params": {}}}, "field 'calibrator.params'",
     "a step function for every route"),
    ({"version": "v" * 300}, "field 'version'", "should match pattern"),
]


@pytest.mark.parametrize(("changes", "field", "says"), ATTACKS,
                         ids=["temperature-without-params", "temperature-zero",
                              "thresholds-out-of-range", "isotonic-empty", "version-300"])
def test_a_policy_that_would_break_routing_is_refused_and_changes_nothing(
    client: TestClient, own_settings: Settings, changes: dict[str, Any], field: str, says: str
) -> None:
    before = _stored(own_settings)
    original = load_policy(own_settings.policy_path).version
    body = _active_json(own_settings, **{"version": "attack", **changes})
    refused = client.post("/v1/admin/policy", json=body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_policy"
    assert field in error["message"] and says in error["message"]
    assert _stored(own_settings) == before
    decided = client.post("/v1/route", json=MESSAGE)
    assert decided.status_code == 200, decided.text
    assert decided.json()["policy_version"] == original
    assert client.get("/readyz").status_code == 200


def test_a_sound_calibrated_policy_is_still_published(client: TestClient,
                                                      own_settings: Settings) -> None:
    """The checks refuse what breaks routing, not calibrators as such."""
    knots = {"x": [0.0, 0.5, 1.0], "y": [0.0, 0.45, 1.0]}
    for version, calibrator in (
        ("temperature-1", {"kind": "temperature", "params": {"temperature": 1.5}}),
        ("isotonic-1", {"kind": "isotonic", "params": {r: knots for r in ROUTES}}),
    ):
        body = _active_json(own_settings, version=version, calibrator=calibrator,
                            per_route_thresholds={"refund": 0.4, "account": 1.01})
        published = client.post("/v1/admin/policy", json=body)
        assert published.status_code == 200, published.text
        decided = client.post("/v1/route", json=MESSAGE).json()
        assert decided["policy_version"] == version
        assert abs(sum(decided["scores"]["probabilities"].values()) - 1.0) < 1e-9


def test_a_body_that_is_not_json_is_still_invalid_json(client: TestClient) -> None:
    answer = client.post("/v1/admin/policy", content=b"{not json",
                         headers={"content-type": "application/json"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_json")


def test_a_broken_active_version_is_replaced_through_the_api(client: TestClient,
                                                             own_settings: Settings) -> None:
    original = load_policy(own_settings.policy_path).version
    _break_stored(own_settings, original, calibrator={"kind": "temperature", "params": {}})
    reloaded = client.post("/v1/admin/policy/reload")
    assert reloaded.status_code == 422, reloaded.text
    assert reloaded.json()["error"]["code"] == "invalid_policy"
    assert "field 'calibrator.params'" in reloaded.json()["error"]["message"]
    assert client.post("/v1/route", json=MESSAGE).status_code == 200

    published = client.post("/v1/admin/policy", json=_active_json(own_settings,
                                                                 version="fixed-1",
                                                                 calibrator={"kind": "none"}))
    assert published.status_code == 200, published.text
    assert published.json()["previous_version"] == original
    assert load_policy(own_settings.policy_path).version == "fixed-1"
    assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == "fixed-1"


def test_a_gateway_does_not_start_on_a_broken_policy_file(own_settings: Settings) -> None:
    """Not a gateway that says it is ready and answers 500 on every request."""
    _broken_file(own_settings)
    with pytest.raises(InvalidPolicy, match=r"field 'calibrator\.params'.*support-router "
                       r"policy publish FILE --policy-path"):
        with TestClient(create_app(own_settings)):
            pass
    with pytest.raises(InvalidPolicy, match=r"policy\.json is not a valid policy"):
        preflight(own_settings, "127.0.0.1", 0)


def test_the_gateway_starts_again_once_a_valid_policy_is_published(
    own_settings: Settings, tmp_path: Path
) -> None:
    good = _active_json(own_settings, version="fixed-2")
    _broken_file(own_settings)
    artifact = tmp_path / "fixed.json"
    artifact.write_text(json.dumps(good))
    engine = make_engine(own_settings.resolved_database_url)
    try:  # what `support-router policy publish` does
        migrate(engine)
        save_policy(PolicyDB(engine).publish(load_policy(artifact)).policy,
                    own_settings.policy_path)
    finally:
        engine.dispose()
    preflight(own_settings, "127.0.0.1", 0)
    with TestClient(create_app(own_settings)) as client:
        assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == "fixed-2"


def test_a_rollback_to_a_version_that_would_break_routing_is_refused(
    client: TestClient, own_settings: Settings
) -> None:
    original = load_policy(own_settings.policy_path).version
    published = client.post("/v1/admin/policy", json=_active_json(own_settings, version="v2"))
    assert published.status_code == 200, published.text
    _break_stored(own_settings, original, per_route_thresholds={"account": 7})
    before = _stored(own_settings)
    refused = client.post("/v1/admin/policy/rollback")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_policy"
    assert "field 'per_route_thresholds.account'" in refused.json()["error"]["message"]
    assert _stored(own_settings) == before
    assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == "v2"


def test_a_publish_on_one_app_reaches_another_on_the_same_database(
    client: TestClient, own_settings: Settings
) -> None:
    original = load_policy(own_settings.policy_path).version
    with TestClient(create_app(own_settings)) as other:
        assert other.post("/v1/route", json=MESSAGE).json()["policy_version"] == original
        published = client.post("/v1/admin/policy", json=_active_json(own_settings,
                                                                     version="v2"))
        assert published.status_code == 200, published.text
        assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == "v2"
        _serves(other, "v2")
        rolled_back = other.post("/v1/admin/policy/rollback")
        assert rolled_back.json() == {"action": "rollback", "version": original,
                                      "previous_version": "v2",
                                      "threshold": load_policy(own_settings.policy_path)
                                      .threshold}
        _serves(client, original)


def test_the_database_wins_over_the_file_at_start(own_settings: Settings) -> None:
    with TestClient(create_app(own_settings)) as client:
        assert client.post("/v1/admin/policy", json=_active_json(
            own_settings, version="v2")).status_code == 200
    save_policy(load_policy(own_settings.policy_path).model_copy(update={"version": "v3"}),
                own_settings.policy_path)  # a file edited, or another host's
    with TestClient(create_app(own_settings)) as client:
        assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == "v2"
    assert load_policy(own_settings.policy_path).version == "v2"


def test_a_stored_policy_for_another_model_is_skipped_not_served(
    client: TestClient, own_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    original = load_policy(own_settings.policy_path)
    elsewhere = original.model_copy(update={
        "version": "other-model", "model": original.model.model_copy(
            update={"artifact_sha": "0" * 64})})
    engine = make_engine(own_settings.resolved_database_url)
    try:  # published from a host that runs another model, without this one's checks
        with caplog.at_level(logging.ERROR, logger="router.app.policy_sync"):
            PolicyDB(engine).publish(elsewhere)
            time.sleep(BOUND_S)
    finally:
        engine.dispose()
    assert client.post("/v1/route", json=MESSAGE).json()["policy_version"] == original.version
    skipped = [r.getMessage() for r in caplog.records if "other-model" in r.getMessage()]
    assert len(skipped) == 1 and "policy_model_mismatch" in skipped[0], skipped


def test_the_versions_list_says_who_published_and_rolled_back(own_settings: Settings) -> None:
    """`GET /v1/admin/policy` reads the database: each version with its guarantee and who
    made it active, recorded under the calling key's name."""
    keys = {name: new_key() for name in ("alice", "bob")}
    keyed = own_settings.model_copy(update={"rate_limit_per_s": 0, "api_keys": [
        ApiKey(name=name, sha256=hash_key(key), roles=("admin",)) for name, key in keys.items()]})
    with TestClient(create_app(keyed)) as client:
        original = load_policy(keyed.policy_path)
        body = _active_json(keyed, version="alice-1", threshold=0.8)
        answer = client.post("/v1/admin/policy", json=body, headers=_bearer(keys["alice"]))
        assert answer.status_code == 200, answer.text
        listed = client.get("/v1/admin/policy", headers=_bearer(keys["bob"])).json()
        assert (listed["active_version"], listed["rollback_to"]) == ("alice-1", original.version)
        newest = listed["versions"][0]
        assert (newest["version"], newest["active"], newest["published_by"],
                newest["threshold"]) == ("alice-1", True, "alice", 0.8)
        assert newest["guarantee"] == json.loads(original.model_dump_json())["guarantee"]
        assert client.post("/v1/admin/policy/rollback",
                           headers=_bearer(keys["bob"])).status_code == 200
        listed = client.get("/v1/admin/policy", headers=_bearer(keys["alice"])).json()
    assert listed["active_version"] == listed["served_version"] == original.version
    assert [(e["action"], e["version"], e["by"]) for e in listed["history"]] == [
        ("rollback", original.version, "bob"), ("publish", "alice-1", "alice"),
        ("adopt", original.version, None)]
    assert [(v["version"], v["active"]) for v in listed["versions"]] == [
        ("alice-1", False), (original.version, True)]

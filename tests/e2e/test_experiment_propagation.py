"""Two real gateway processes on two ports over one database: an experiment started on
one is run by both within the poll interval plus slack, and a stop ends it on both.

"Run" is what the decision log says: every request after the bound, on either gateway,
is logged with the experiment and its assigned variant, and after the stop with none.
Each process has its own model folder, as two hosts would: only the database is shared.
Run over one PostgreSQL schema and over one SQLite file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from router.app.training import TrainResult
from router.contracts import ExperimentConfig
from router.routing.experiments import assign
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from tests.servers import DATABASES, GatewayProcess, gateways_on, shared_database

POLL_S = 0.5
BOUND_S = POLL_S + 1.5
"""A start or stop must be run everywhere this long after it returned."""
TEXT = "my kettle arrived broken, please refund order O-1001"
AFTER_BOUND_REQUESTS = 40


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with shared_database(request, tmp_path) as url:
        yield url


@pytest.fixture
def two_gateways(database_url: str, trained: TrainResult,
                 tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    with gateways_on(database_url, trained, tmp_path, policy_poll_s=str(POLL_S),
                     rate_limit_per_s="0") as gateways:
        yield gateways


def _route(gateway: GatewayProcess, customer: str) -> dict[str, Any]:
    answer = httpx.post(f"{gateway.url}/v1/route", timeout=30,
                        json={"text": TEXT, "customer": customer})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _reaches_both(gateways: list[GatewayProcess], experiment: str | None,
                  since: float) -> list[dict[str, Any]]:
    """Each gateway runs `experiment` within BOUND_S of `since`; the decisions of the
    requests sent to both after the bound (all under it)."""
    for gateway in gateways:
        while (seen := _route(gateway, "probe")["experiment"]) != experiment:
            assert time.monotonic() - since < BOUND_S, \
                f"{gateway.url} still runs {seen}, {BOUND_S} s after the change"
            time.sleep(0.02)
    time.sleep(max(0.0, since + BOUND_S - time.monotonic()))
    return [_route(gateways[i % 2], f"c-{i}") for i in range(AFTER_BOUND_REQUESTS)]


def _logged(database_url: str, decisions: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(experiment, variant) of each decision, as the shared decision log has it."""
    engine = make_engine(database_url)
    try:
        rows = {r["request_id"]: r for r in DecisionLog(engine).rows()}
    finally:
        engine.dispose()
    return [(rows[d["request_id"]]["experiment"], rows[d["request_id"]]["variant"])
            for d in decisions]


def test_a_start_and_a_stop_reach_both_gateways(two_gateways: list[GatewayProcess],
                                                database_url: str,
                                                trained: TrainResult) -> None:
    a, b = two_gateways
    assert _route(a, "x")["experiment"] is None and _route(b, "x")["experiment"] is None
    assert all("experiment: none running in the database" in g.output() for g in two_gateways)
    body = {"name": "propagated", "salt": "e2e",
            "variants": [{"name": "control", "weight": 1},
                         {"name": "treatment", "model": str(trained.model_path), "weight": 1}]}
    config = ExperimentConfig.model_validate(body)

    started = httpx.post(f"{a.url}/v1/admin/experiments", json=body, timeout=60)
    assert started.status_code == 201, started.text
    decisions = _reaches_both(two_gateways, "propagated", time.monotonic())
    expected = [assign(config, f"customer:c-{i}").name for i in range(AFTER_BOUND_REQUESTS)]
    assert [d["variant"] for d in decisions] == expected
    assert _logged(database_url, decisions) == [("propagated", v) for v in expected]
    assert set(expected) == {"control", "treatment"}  # both variants were exercised

    stopped = httpx.post(f"{b.url}/v1/admin/experiments/propagated/stop", timeout=60)
    assert stopped.status_code == 200, stopped.text
    decisions = _reaches_both(two_gateways, None, time.monotonic())
    assert [d["variant"] for d in decisions] == [None] * AFTER_BOUND_REQUESTS
    assert _logged(database_url, decisions) == [(None, None)] * AFTER_BOUND_REQUESTS
    assert "experiment: now running propagated" in b.output()
    assert "experiment: propagated stopped" in a.output()

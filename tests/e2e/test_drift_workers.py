"""The drift gauges of a real two-worker gateway with `PROMETHEUS_MULTIPROC_DIR`: every
scrape, whichever worker answers it, shows the verdict on the traffic both logged.

The policy carries a reference built from the model's decisions on the first half of the
test split; the traffic is the shifted sample of `tests/fixtures/shifted_traffic.jsonl`.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from router.app.training import TrainResult
from tests.servers import GatewayProcess, gateway_env
from tests.traffic import model_folder_with_reference, shifted_texts

START_TIMEOUT_S = 300
SCRAPES = 8


def overall_status(url: str) -> float:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if (sample.name == "support_router_drift_status"
                    and sample.labels.get("feature") == "overall"):
                return sample.value
    raise AssertionError("no support_router_drift_status{feature=overall} sample")


def test_every_worker_reports_the_drift_of_the_shared_log(trained: TrainResult,
                                                          tmp_path: Path) -> None:
    policy_path = model_folder_with_reference(trained, tmp_path / "models")
    env = gateway_env(policy_path.parent, policy_path, tmp_path / "var",
                      rate_limit_per_s="0", drift_refresh_s="0")
    (tmp_path / "prometheus").mkdir()  # it must exist before the processes start
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "prometheus")
    with GatewayProcess() as server:
        server.start(env, ["--workers", "2"], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        assert overall_status(server.url) == -1  # nothing logged yet
        for text in shifted_texts():
            response = httpx.post(f"{server.url}/v1/route", json={"text": text}, timeout=30)
            assert response.status_code == 200
        statuses = [overall_status(server.url) for _ in range(SCRAPES)]
    assert statuses == [2] * SCRAPES, server.output()[-4000:]

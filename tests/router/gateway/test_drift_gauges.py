"""The drift gauges of `/metrics` through the real app: traffic sent to `/v1/route` is
logged, and a scrape compares it with the policy's reference.

The policy is the session's trained one carrying a reference built from the model's
decisions on the first half of the test split (`calibration.drift.reference_for`, what
`calibrate` records). Gauges are set, not counted, so each scrape's values are its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from router.app.training import TrainResult
from router.gateway.app import create_app
from router.settings import Settings
from tests.traffic import model_folder_with_reference, shifted_texts, split_halves

STATUS = "support_router_drift_status"
PSI = "support_router_drift_psi"
RECENT = "support_router_drift_recent_decisions"


@pytest.fixture
def client(tmp_path: Path, trained: TrainResult) -> Iterator[TestClient]:
    policy_path = model_folder_with_reference(trained, tmp_path / "models",
                                              version="drift-gauges")
    settings = Settings(var_dir=tmp_path / "var", model_dir=policy_path.parent,
                        policy_path=policy_path, drift_refresh_s=0)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def scrape(client: TestClient) -> dict[tuple[str, str], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {(s.name, s.labels.get("feature", "")): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples if s.name.startswith("support_router_drift")}


def send(client: TestClient, texts: list[str]) -> None:
    for text in texts:
        assert client.post("/v1/route", json={"text": text}).status_code == 200


def test_shifted_traffic_moves_the_gauges_to_drift(client: TestClient) -> None:
    idle = scrape(client)
    assert idle[(STATUS, "overall")] == -1  # not enough traffic yet
    assert idle[(RECENT, "")] == 0
    send(client, shifted_texts())
    after = scrape(client)
    assert after[(RECENT, "")] == len(shifted_texts())
    assert after[(STATUS, "overall")] == 2
    assert after[(STATUS, "length")] == 2 and after[(PSI, "length")] > 0.25
    assert after[(STATUS, "language")] == 2


def test_traffic_like_the_reference_stays_quiet(client: TestClient) -> None:
    _, second = split_halves()
    send(client, [r.text for r in second[:400]])
    samples = scrape(client)
    assert samples[(STATUS, "overall")] == 0, samples
    assert all(samples[(PSI, f)] < 0.1 for f in
               ("confidence", "routed", "length", "language", "predicted")), samples

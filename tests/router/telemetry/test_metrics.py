"""`GET /metrics` through the real app: the series exist, carry bounded labels, and move.

The prometheus registry is process-global and shared by every test (and every app built
in this process), so each test reads the series before and after what it does and
asserts on the difference, never on absolute values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from router.contracts import RouteScores
from router.models.breaker import CircuitBreaker, GuardedRouteModel
from router.telemetry.metrics import track_breaker
from tests.messages import ANA, BEN, TEAPOT, WHEELS
from tests.paths import REPO_ROOT

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

HTTP = "support_router_http_request_duration_seconds"
DECISIONS = "support_router_decisions_total"
MODEL = "support_router_model_latency_seconds"
REFUNDS = "support_router_refunds_total"
BREAKER = "support_router_breaker_state"

VAGUE = "Hi, I need help with something."


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_metrics_endpoint_is_open_prometheus_text(client: TestClient) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    for name in (HTTP, DECISIONS, MODEL, BREAKER, REFUNDS):
        assert f"# TYPE {name} " in response.text
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_decisions_are_counted_by_route_variant_and_reason(client: TestClient) -> None:
    before = scrape(client)
    by_rule = client.post("/v1/route", json={"text": TEAPOT, "kind": "refund"}).json()
    vague = client.post("/v1/route", json={"text": VAGUE}).json()
    after = scrape(client)

    assert (by_rule["route"], by_rule["reason"]) == ("refund", "rule:form_kind")
    assert delta(before, after, DECISIONS, route="refund", variant="none",
                 reason="rule:form_kind") == 1
    # The model decides the vague one (a clarifying question today); whatever it says is
    # what must be counted.
    assert delta(before, after, DECISIONS, route=vague["route"], variant="none",
                 reason=vague["reason"]) == 1
    # One model call: the rule decided the first request without the model.
    assert delta(before, after, f"{MODEL}_count", backend="local", outcome="ok") == 1
    assert delta(before, after, f"{MODEL}_sum", backend="local", outcome="ok") > 0


def test_clarify_decisions_are_counted_for_the_clarify_rate(client: TestClient) -> None:
    before = scrape(client)
    decision = client.post("/v1/route", json={"text": VAGUE}).json()
    after = scrape(client)
    assert decision["route"] == "clarify"
    clarified = sum(
        v - before.get(k, 0.0) for k, v in after.items()
        if k[0] == DECISIONS and ("route", "clarify") in k[1])
    total = sum(v - before.get(k, 0.0) for k, v in after.items() if k[0] == DECISIONS)
    assert (clarified, total) == (1, 1)


def test_request_latency_is_labelled_by_route_template_never_the_raw_path(
    client: TestClient,
) -> None:
    case_id = f"case-{uuid.uuid4().hex[:8]}"
    before = scrape(client)
    assert client.post("/v1/route", json={"text": VAGUE}).status_code == 200
    assert client.post("/v1/route", json={"text": ""}).status_code == 422
    assert client.get(f"/v1/cases/{case_id}").status_code == 404
    assert client.get(f"/v1/no-such-page/{case_id}").status_code == 404
    after = scrape(client)

    count = f"{HTTP}_count"
    assert delta(before, after, count, endpoint="/v1/route", method="POST", status="2xx") == 1
    assert delta(before, after, count, endpoint="/v1/route", method="POST", status="4xx") == 1
    assert delta(before, after, count, endpoint="/v1/cases/{case_id}", method="GET",
                 status="4xx") == 1
    assert delta(before, after, count, endpoint="unmatched", method="GET", status="4xx") == 1
    assert delta(before, after, f"{HTTP}_sum", endpoint="/v1/route", method="POST",
                 status="2xx") > 0
    assert delta(before, after, f"{HTTP}_bucket", endpoint="/v1/route", method="POST",
                 status="2xx", le="+Inf") == 1
    assert case_id not in client.get("/metrics").text


def test_refunds_held_and_issued_are_counted_once(client: TestClient) -> None:
    before = scrape(client)
    issued = client.post("/v1/messages",
                         json={"text": TEAPOT, "kind": "refund", "customer": ANA}).json()
    held = client.post("/v1/messages",
                       json={"text": WHEELS, "kind": "refund", "customer": BEN}).json()
    middle = scrape(client)
    assert (issued["status"], held["status"]) == ("resolved", "awaiting_approval")
    assert delta(before, middle, REFUNDS, outcome="issued") == 1
    assert delta(before, middle, REFUNDS, outcome="held") == 1

    (row,) = client.get("/v1/approvals").json()
    url = f"/v1/approvals/{row['operation']}/decision"
    for _ in range(2):  # the second approval replays the first: not a second refund
        approved = client.post(url, json={"decision": "approve", "supervisor": "Maria"})
        assert approved.status_code == 200
    after = scrape(client)
    assert delta(middle, after, REFUNDS, outcome="issued") == 1
    assert delta(middle, after, REFUNDS, outcome="held") == 0


class _RemoteModel:
    """Stands in for a remote decision model: only its name is used here."""

    def __init__(self, name: str) -> None:
        self.name = name

    def score(self, text: str) -> RouteScores:  # pragma: no cover - never called
        raise NotImplementedError

    def score_batch(self, texts: list[str]) -> list[RouteScores]:  # pragma: no cover
        raise NotImplementedError


def test_breaker_state_gauge_follows_the_breaker(client: TestClient) -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=2, reset_s=10.0, clock=lambda: now[0])
    model = f"remote-{uuid.uuid4().hex[:8]}"
    guarded = GuardedRouteModel(_RemoteModel(model), breaker)
    track_breaker(guarded.name, breaker)  # as bootstrap wires it
    assert value(scrape(client), BREAKER, model=model) == 0

    def fail() -> None:
        raise ConnectionError("remote model down")

    for _ in range(2):
        try:
            guarded.breaker.call(fail)
        except ConnectionError:
            pass
    assert value(scrape(client), BREAKER, model=model) == 2
    now[0] = 11.0  # half-open by the clock alone: only a scrape-time read can show it
    assert value(scrape(client), BREAKER, model=model) == 1
    guarded.breaker.call(lambda: None)  # the probe succeeds
    assert value(scrape(client), BREAKER, model=model) == 0


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


def test_multiprocess_mode_merges_every_workers_samples(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}
    (tmp_path / "prom").mkdir()
    (tmp_path / "prom" / "counter_999.db").write_bytes(b"stale")  # from an earlier run
    _run("from router.telemetry.metrics import prepare_multiprocess_dir\n"
         "prepare_multiprocess_dir()", env)
    assert not (tmp_path / "prom" / "counter_999.db").exists()
    for _ in range(2):  # two "workers", each its own process and registry
        _run("from router.telemetry.metrics import count_refund, observe_request\n"
             "count_refund('issued'); observe_request('/v1/route', 'POST', 200, 0.003)", env)
    text = _run("from router.telemetry.metrics import render; print(render()[0].decode())", env)
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert value(samples, REFUNDS, outcome="issued") == 2
    assert value(samples, f"{HTTP}_count", endpoint="/v1/route", method="POST",
                 status="2xx") == 2

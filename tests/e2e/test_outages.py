"""Remote decision-model outages through the real gateway: nobody notices but the log.

The gateway runs with `backend="typesafe"` (the real app, real SQLite, the real TypeSafe
client and circuit breaker, the real local model as fallback). Its `typesafe_base_url`
points at a *fault switch* on loopback: a small pass-through HTTP server that forwards each
request to one of several Jev-compatible servers run from PyPI's `jevcompat`, chosen by the
fault switched on:

    ok            `jevcompat mock` (the spec-exact reference server)
    rate_limited  jevcompat's mock with `busy_every=1`: every request gets 429 (the CLI has
                  no switch for it)
    server_error  `jevcompat proxy` in front of an upstream that is not running: 502
    malformed     `jevcompat mock --fault choice-sum` (probabilities sum to 1.2) and
                  `--fault xssi-200` (a 200 whose body is not JSON), alternately
    slow          the reference mock, answered only after twice `typesafe_timeout_s`

The switch adds nothing of its own but the delay: every fault is a real jevcompat answer.
Each test walks one fault through: healthy → fault on (every request still 200; after
`breaker_failure_threshold` failures the breaker opens and the remote server stops being
called; every decision says `model_unavailable` and names the local model) → fault off
(after `breaker_reset_s` one probe goes through and decisions come from TypeSafe again).
Timeouts and the reset are a fraction of a second, so each test takes a few seconds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from router.app.training import TrainResult
from router.contracts import ExperimentConfig
from router.gateway.app import create_app
from router.settings import Settings
from tests.e2e.test_typesafe import KEY, busy_mock, jevcompat_mock, jevcompat_proxy
from tests.servers import free_port
from tests.tables import row_counts

TIMEOUT_S = 0.4
FAILURES_TO_OPEN = 3
RESET_S = 1.0
TEXTS = [
    "The knife set from order O-1002 arrived with one knife missing. Please refund $15.00.",
    "Please stop sending me newsletters.",
    "Do you ship to Malta?",
    "My teapot from order O-1001 arrived broken, I want my money back.",
]


class FaultSwitch:
    """A loopback pass-through whose upstream (and delay) is switched per fault."""

    def __init__(self, upstreams: dict[str, list[str]]) -> None:
        self.upstreams = {name: itertools.cycle(urls) for name, urls in upstreams.items()}
        self.fault = "ok"
        self.delay_s = 0.0
        self.hits: dict[str, int] = {}
        self._lock = threading.Lock()
        switch = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._forward(b"")

            def do_POST(self) -> None:  # noqa: N802
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes) -> None:
                with switch._lock:
                    fault, delay = switch.fault, switch.delay_s
                    switch.hits[fault] = switch.hits.get(fault, 0) + 1
                    upstream = next(switch.upstreams[fault])
                time.sleep(delay)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization")}
                try:
                    answer = httpx.request(self.command, upstream + self.path, content=body,
                                           headers=headers, timeout=10)
                except httpx.TransportError:
                    return  # the gateway gave up long ago (slow fault)
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() in ("content-type", "retry-after", "retry-after-ms"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                try:
                    self.wfile.write(answer.content)
                except OSError:
                    pass  # the gateway timed out and closed the connection

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def switch(self, fault: str) -> None:
        with self._lock:
            self.fault = fault
            self.delay_s = 2 * TIMEOUT_S if fault == "slow" else 0.0

    def calls(self, fault: str) -> int:
        with self._lock:
            return self.hits.get(fault, 0)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fault_switch() -> Iterator[FaultSwitch]:
    with ExitStack() as stack:
        ok = stack.enter_context(jevcompat_mock())
        dead = f"http://127.0.0.1:{free_port()}"  # nothing listens here
        switch = FaultSwitch({
            "ok": [ok],
            "slow": [ok],
            "rate_limited": [stack.enter_context(busy_mock(every=1))],
            "server_error": [stack.enter_context(jevcompat_proxy(dead))],
            "malformed": [stack.enter_context(jevcompat_mock("--fault", "choice-sum")),
                          stack.enter_context(jevcompat_mock("--fault", "xssi-200"))],
        })
        stack.callback(switch.close)
        yield switch


@pytest.fixture
def settings(settings: Settings, tmp_path: Path, fault_switch: FaultSwitch) -> Iterator[Settings]:
    """The shared test settings moved to the typesafe backend, through the fault switch and
    quick to trip; the shared `client` fixture builds the real app from them."""
    fault_switch.switch("ok")
    yield settings.model_copy(update={
        "backend": "typesafe",
        "typesafe_base_url": fault_switch.url,
        "typesafe_api_key": KEY,
        "typesafe_timeout_s": TIMEOUT_S,
        "typesafe_max_attempts": 2,
        "typesafe_policy_path": tmp_path / "no-typesafe-policy.json",  # uncalibrated default
        "breaker_failure_threshold": FAILURES_TO_OPEN,
        "breaker_reset_s": RESET_S,
        "rate_limit_per_s": 0,
    })
    fault_switch.switch("ok")


def _decide(client: TestClient, i: int) -> dict:
    """One request, alternating the two endpoints that decide; it must succeed."""
    text = TEXTS[i % len(TEXTS)]
    if i % 2 == 0:
        response = client.post("/v1/route", json={"text": text})
        assert response.status_code == 200, response.text
        return response.json()
    response = client.post("/v1/messages", json={"text": text})
    assert response.status_code == 200, response.text
    return response.json()["decision"]


def _breaker_state(client: TestClient) -> str:
    return client.app.state.services.router.primary.model.state


@pytest.mark.parametrize("fault", ["rate_limited", "server_error", "slow", "malformed"])
def test_outage_falls_back_to_the_local_model_then_recovers(
    client: TestClient, fault_switch: FaultSwitch, trained: TrainResult, fault: str
) -> None:
    local_name = trained.policy.model.name
    remote_name = client.app.state.services.router.primary.model.name
    assert remote_name.startswith("typesafe:jev-latest@")

    healthy = [_decide(client, i) for i in range(2)]
    assert {d["model"] for d in healthy} == {remote_name}
    assert all(d["reason"] != "model_unavailable" for d in healthy)

    fault_switch.switch(fault)
    during = [_decide(client, i) for i in range(FAILURES_TO_OPEN)]
    assert _breaker_state(client) == "open"
    opened = time.monotonic()
    calls_to_open = fault_switch.calls(fault)
    during += [_decide(client, i) for i in range(FAILURES_TO_OPEN, 12)]
    assert time.monotonic() - opened < RESET_S  # else a probe may have run meanwhile
    # Open: the remote server is not called at all, and nobody waits for its timeouts.
    assert fault_switch.calls(fault) == calls_to_open
    assert FAILURES_TO_OPEN <= calls_to_open <= 2 * FAILURES_TO_OPEN  # at most 2 attempts each
    for decision in during:
        assert decision["reason"] == "model_unavailable"
        assert decision["model"] == local_name
        assert decision["scores"]["model"] == local_name
        assert decision["policy_version"] == trained.policy.version
        assert decision["route"] in ("refund", "account", "other", "clarify")

    fault_switch.switch("ok")
    time.sleep(RESET_S)
    assert _breaker_state(client) == "half_open"
    after = [_decide(client, i) for i in range(4)]
    assert _breaker_state(client) == "closed"
    assert {d["model"] for d in after} == {remote_name}
    assert all(d["reason"] != "model_unavailable" for d in after)

    # Every one of those decisions was logged, with the model that answered it.
    counts = row_counts(client.app.state.services.engine)
    assert counts["decisions"] == len(healthy) + len(during) + len(after)


def test_a_failed_probe_keeps_the_breaker_open(
    client: TestClient, fault_switch: FaultSwitch, trained: TrainResult
) -> None:
    fault_switch.switch("server_error")
    for i in range(FAILURES_TO_OPEN):
        _decide(client, i)
    assert _breaker_state(client) == "open"
    time.sleep(RESET_S)
    calls = fault_switch.calls("server_error")
    probe = _decide(client, 0)  # the probe fails: answered locally, open again
    assert probe["reason"] == "model_unavailable"
    assert probe["model"] == trained.policy.model.name
    assert fault_switch.calls("server_error") > calls
    assert _breaker_state(client) == "open"


def test_a_remote_experiment_variant_falls_back_too(
    settings: Settings, fault_switch: FaultSwitch, trained: TrainResult
) -> None:
    """With the local backend configured and a live experiment variant on TypeSafe, a
    failing TypeSafe must not fail the request either: the local model answers for it."""
    experiment = {"name": "jev-trial", "salt": "s",
                  "variants": [{"name": "jev", "backend": "typesafe", "weight": 1}]}
    local_backend = settings.model_copy(update={
        "backend": "local", "experiment": ExperimentConfig.model_validate(experiment)})
    fault_switch.switch("server_error")
    with TestClient(create_app(local_backend)) as client:
        decisions = [_decide(client, i) for i in range(FAILURES_TO_OPEN + 2)]
    for decision in decisions:
        assert decision["variant"] == "jev"
        assert decision["reason"] == "model_unavailable"
        assert decision["model"] == trained.policy.model.name

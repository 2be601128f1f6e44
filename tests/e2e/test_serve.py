"""`support-router serve` as a real process: the loopback rule, keys, workers, SIGTERM.

Every test starts the installed console script in a subprocess on a free loopback port,
with the session's trained model, and talks to it over TCP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from handlers.services.cases import case_messages, cases
from router.access import hash_key, new_key
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.decision_log import decisions
from tests.servers import GatewayProcess, free_port

CLI = str(Path(sys.executable).with_name("support-router"))
START_TIMEOUT_S = 120


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    """This machine's environment without our settings, plus the test's files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update({
        "SUPPORT_ROUTER_VAR_DIR": str(settings.var_dir),
        "SUPPORT_ROUTER_MODEL_DIR": str(settings.model_dir),
        "SUPPORT_ROUTER_POLICY_PATH": str(settings.policy_path),
        "SUPPORT_ROUTER_RATE_LIMIT_PER_S": "0",  # these tests send bursts on purpose
    })
    env.update({f"SUPPORT_ROUTER_{k.upper()}": v for k, v in extra.items()})
    return env


@contextmanager
def serving(env: dict[str, str], tmp_path: Path, *args: str) -> Iterator[GatewayProcess]:
    """Start `support-router serve`, wait for /healthz, make sure it is gone at exit."""
    with GatewayProcess([CLI, "serve"], ready_path="/healthz") as server:
        server.start(env, args, tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        yield server


# ---------------------------------------------------------------- the loopback rule


def test_without_keys_a_public_bind_is_refused(settings: Settings) -> None:
    port = free_port()
    done = subprocess.run([CLI, "serve", "--host", "0.0.0.0", "--port", str(port)],
                          env=_env(settings), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to bind 0.0.0.0" in done.stderr
    assert "SUPPORT_ROUTER_API_KEYS" in done.stderr
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


def test_contradictory_keys_are_refused_before_anything_starts(settings: Settings) -> None:
    entry = {"name": "desk", "sha256": hash_key("k1"), "roles": ["gateway"]}
    keys = json.dumps([entry, {**entry, "sha256": hash_key("k2")}])
    done = subprocess.run([CLI, "serve", "--port", str(free_port())],
                          env=_env(settings, api_keys=keys), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "error (invalid_api_keys)" in done.stderr and "Traceback" not in done.stderr


def test_without_keys_it_serves_loopback_says_so_and_stops_cleanly(
    settings: Settings, tmp_path: Path
) -> None:
    with serving(_env(settings), tmp_path) as server:
        response = httpx.post(f"{server.url}/v1/route", json={"text": "hello"}, timeout=30)
        assert response.status_code == 200
        assert server.stop(timeout=60) == 0
    assert "no API keys configured" in server.output()
    assert "only answers on loopback" in server.output()
    assert "127.0.0.1" in server.output()


def test_with_keys_it_may_bind_every_interface_and_wants_a_key(
    settings: Settings, tmp_path: Path
) -> None:
    key = new_key()
    entry = {"name": "desk-1", "sha256": hash_key(key), "roles": ["gateway"]}
    env = _env(settings, api_keys=json.dumps([entry]))
    with serving(env, tmp_path, "--host", "0.0.0.0") as server:
        url = f"{server.url}/v1/route"
        assert httpx.post(url, json={"text": "hello"}, timeout=30).status_code == 401
        ok = httpx.post(url, json={"text": "hello"}, timeout=30,
                        headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200
        assert server.stop(timeout=60) == 0
    assert "1 API key(s) configured" in server.output()
    assert key not in server.output()


# ---------------------------------------------------------------- graceful shutdown

TEXTS = [
    "Hello, ana.novak@example.com here. The knife set from order O-1002 arrived with one "
    "knife missing. Please refund $15.00 for the missing knife.",
    "Where is my order O-1002? It has been a week.",
    "Please change the e-mail address on my account to ana.n@example.org",
    "hello",
]


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_lets_requests_in_flight_finish_and_leaves_no_half_written_case(
    settings: Settings, tmp_path: Path, workers: int
) -> None:
    """Keep conversations flowing from several clients and SIGTERM the server mid-stream.

    Traffic never pauses, so requests are being handled whenever the workers get the
    signal (with several workers `serve` passes it on to each). Every request either got a
    complete 200, or was never taken in: its connection was refused or closed before the
    request was read, so nothing was done and the client may retry. The database then
    holds exactly the answered requests, each case whole: a decision with an outcome, the
    customer's message and the reply.
    """
    clients, answered_before_signal = 12, 24
    results: list[tuple[str, object, float]] = []
    lock = threading.Lock()
    enough = threading.Event()
    give_up = time.monotonic() + 180

    with serving(_env(settings), tmp_path, "--workers", str(workers)) as server:
        url = f"{server.url}/v1/messages"

        def converse(worker: int) -> None:
            i = worker
            with httpx.Client(timeout=120) as client:
                while time.monotonic() < give_up:
                    try:
                        response = client.post(url, json={"text": TEXTS[i % len(TEXTS)]})
                    except httpx.TransportError as exc:
                        with lock:
                            results.append(("not_taken", exc, time.monotonic()))
                        return
                    with lock:
                        results.append(("answer", response, time.monotonic()))
                        if len(results) >= answered_before_signal:
                            enough.set()
                    i += clients

        threads = [threading.Thread(target=converse, args=(w,)) for w in range(clients)]
        for thread in threads:
            thread.start()
        assert enough.wait(120), server.output()
        signalled = time.monotonic()
        exit_code = server.stop(timeout=120)
        for thread in threads:
            thread.join(150)

    assert exit_code == 0, server.output()
    answers = [r for kind, r, _ in results if kind == "answer"]
    assert isinstance(answers[0], httpx.Response)
    failed = [(r.status_code, r.text) for r in answers if r.status_code != 200]
    assert failed == []
    bodies = [r.json() for r in answers]
    assert all(b["reply"] and b["case_id"] and b["status"] for b in bodies)
    # Requests really were in flight: some were answered after the signal was sent, and
    # the server's request log shows requests finished after it began shutting down.
    assert any(kind == "answer" and at > signalled for kind, _, at in results)
    after_shutdown = server.output().split("Shutting down", 1)[1]
    assert "/v1/messages" in after_shutdown, server.output()
    assert "died" not in server.output()  # no worker was killed along the way
    assert "Unexpected exit" not in server.output()

    engine = make_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            logged = conn.execute(select(decisions.c.case_id, decisions.c.outcome)).all()
            case_ids = set(conn.execute(select(cases.c.id)).scalars())
            messages = conn.execute(
                select(case_messages.c.case_id, case_messages.c.role,
                       case_messages.c.decision)).all()
    finally:
        engine.dispose()
    answered = {b["case_id"] for b in bodies}
    assert case_ids == answered
    assert len(logged) == len(answers)
    assert all(outcome is not None and case_id in answered for case_id, outcome in logged)
    for case_id in case_ids:
        rows = [m for m in messages if m.case_id == case_id]
        assert any(m.role == "customer" and m.decision for m in rows), case_id
        assert any(m.role != "customer" for m in rows), case_id

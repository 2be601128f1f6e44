"""One worker of two killed with SIGKILL: the other goes on serving, the dead one is replaced.

A request loop runs in a thread, each request on a new connection, one at a time. Until
the killed process is gone (it still holds its listening socket while the kernel tears
it down, and connections the kernel hands it then die with it), a request may have been
on the killed worker's connection and may fail; every request sent after it is gone must
succeed. A replacement worker process appears, and the gateway still stops cleanly.
Everything after the start is bounded: the loop by a count and a deadline, each wait by
a deadline.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx

from router.app.training import TrainResult
from tests.servers import GatewayProcess, child_pids, gateway_env

START_TIMEOUT_S = 180.0
LOOP_S = 25.0
MAX_REQUESTS = 5000
BEFORE_KILL = 20
AFTER_KILL = 40


def _wait_for(condition, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def _gone(pid: int) -> bool:
    """The process has exited, every thread of it: its sockets are closed.

    The main thread turns zombie before the others have finished exiting, and they share
    its file table, so a zombie main thread alone does not mean the listening socket is
    closed (connections the kernel still queues on it are reset when the last thread
    goes). Gone is: reaped, or a zombie whose other threads have all been released.
    """
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = {task.name for task in (proc / "task").iterdir()}
    except FileNotFoundError:
        return True
    return state in ("Z", "X") and threads <= {str(pid)}


def test_a_killed_worker_is_replaced_and_no_other_request_fails(
    trained: TrainResult, tmp_path: Path,
) -> None:
    env = gateway_env(trained.model_path.parent, trained.policy_path, tmp_path / "var",
                      rate_limit_per_s="0")
    with GatewayProcess() as server:
        server.start(env, ["--workers", "2"], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        assert server.process is not None
        assert _wait_for(lambda: all(f"Started worker-{n}" in server.output() for n in (1, 2)),
                         START_TIMEOUT_S), server.output()[-4000:]
        workers = child_pids(server.process.pid)
        assert len(workers) == 2, workers

        results: list[tuple[float, int | str]] = []  # (sent at, status or error)
        stop = threading.Event()

        def requests() -> None:
            deadline = time.monotonic() + LOOP_S
            for n in range(MAX_REQUESTS):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                sent = time.monotonic()
                try:  # a module-level call: a new connection every time
                    response = httpx.post(f"{server.url}/v1/route", timeout=10,
                                          json={"text": f"where is my order O-{1000 + n}?"})
                    results.append((sent, response.status_code))
                except httpx.TransportError as exc:
                    results.append((sent, type(exc).__name__))

        loop = threading.Thread(target=requests)
        loop.start()
        try:
            assert _wait_for(lambda: len(results) >= BEFORE_KILL, LOOP_S)
            victim = min(workers)
            killed_at = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            assert _wait_for(lambda: _gone(victim), LOOP_S)
            gone_at = time.monotonic()
            assert _wait_for(lambda: child_pids(server.process.pid) - workers, LOOP_S), \
                "no replacement worker appeared"
            assert _wait_for(lambda: sum(at > gone_at for at, _ in results) >= AFTER_KILL,
                             LOOP_S)
        finally:
            stop.set()
            loop.join(LOOP_S + 15)
        now = child_pids(server.process.pid)
        assert victim not in now and len(now) == 2, now
        assert server.stop(timeout=60) == 0, server.output()[-4000:]

    after = [outcome for at, outcome in results if at > gone_at]
    assert len(after) >= AFTER_KILL and set(after) == {200}, after
    before = [outcome for at, outcome in results if at < killed_at]
    assert set(before[:-1]) == {200}, before  # the last one may have been in flight

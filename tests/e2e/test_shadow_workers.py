"""A real gateway and real `support-router shadow-worker` processes over one Redis stream
and one decision log: every sampled request gets its shadow decision, whatever stops.

The experiment has one live variant and one shadow (the session's model under a strict
copy of its policy, so the shadow's decisions are recognisably its own). The gateway
only appends jobs; the workers score them into the live rows.

- With a worker running, every request's row gets its shadow decision.
- Requests sent while no worker runs wait in the stream, through a gateway restart,
  and are scored once a worker starts again.
- A worker SIGKILLed while it holds entries (read, not acknowledged: its database write
  is held up by a lock the test takes) leaves them pending; another worker claims them
  after the idle time and scores them.
- At a sampling rate of 0.5, exactly the requests `sampled` picks get a shadow decision.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import httpx
import pytest
import redis

from router.app.training import TrainResult
from router.routing.shadows import sampled
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.shadow_stream import GROUP, stream_key
from tests.paths import REPO_ROOT
from tests.servers import GatewayProcess, gateway_env
from tests.shadows import strict_shadow_experiment

START_TIMEOUT_S = 180.0
SCORED_TIMEOUT_S = 90.0
WORKER = (sys.executable, "-c", "from router.cli.main import app; app()", "shadow-worker")
TEXTS = ["Please refund my broken kettle, O-1001", "how do I change my email address",
         "where is my parcel", "hmm", "I want my money back for the scooter",
         "delete my account please", "asdf", "The lamp arrived cracked, refund please"]


class WorkerProcess:
    """One `shadow-worker` subprocess, output in a log file; killed at exit if running."""

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen([*WORKER, *args], cwd=REPO_ROOT, env=env,
                                            stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        """SIGTERM, as a process manager stops it; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.process.poll() is None:
            self.kill()


@pytest.fixture
def setup(trained: TrainResult, tmp_path: Path, redis_url: str,
          redis_prefix: str) -> Iterator[Callable[..., dict[str, str]]]:
    experiment = strict_shadow_experiment(trained, tmp_path)

    def env(**settings: str) -> dict[str, str]:
        return gateway_env(trained.model_path.parent, trained.policy_path, tmp_path / "var",
                           redis_url=redis_url, redis_prefix=redis_prefix,
                           database_url=f"sqlite:///{tmp_path / 'log.db'}",
                           experiment=experiment.model_dump_json(),
                           shadow_claim_idle_s="1", **settings)

    yield env


def _send(url: str, n: int) -> list[str]:
    with httpx.Client(timeout=30) as client:
        responses = [client.post(f"{url}/v1/route", json={"text": TEXTS[i % len(TEXTS)]})
                     for i in range(n)]
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    return [r.json()["request_id"] for r in responses]


def _shadows(db: Path) -> dict[str, dict | None]:
    engine = make_engine(f"sqlite:///{db}")
    try:
        return {r["request_id"]: json.loads(r["shadow"]) if r["shadow"] else None
                for r in DecisionLog(engine).rows()}
    finally:
        engine.dispose()


def _wait_scored(db: Path, ids: list[str], *workers: WorkerProcess) -> dict[str, dict]:
    deadline = time.monotonic() + SCORED_TIMEOUT_S
    while True:
        shadows = _shadows(db)
        done = {i: shadows[i] for i in ids if shadows.get(i) is not None}
        if len(done) == len(ids):
            return done  # type: ignore[return-value]
        if time.monotonic() > deadline:
            logs = "\n".join(w.output()[-2000:] for w in workers)
            pytest.fail(f"{len(ids) - len(done)} of {len(ids)} not scored:\n{logs}")
        time.sleep(0.2)


def _group(client: redis.Redis, prefix: str) -> dict:
    (group,) = [g for g in client.xinfo_groups(stream_key(prefix))
                if g["name"].decode() == GROUP]
    return group


def test_every_request_is_scored_across_worker_stops_gateway_restarts_and_kills(
        setup: Callable[..., dict[str, str]], tmp_path: Path, redis_url: str,
        redis_prefix: str) -> None:
    env, db = setup(), tmp_path / "log.db"
    client = redis.Redis.from_url(redis_url)
    with ExitStack() as stack:
        gateway = stack.enter_context(GatewayProcess())
        gateway.start(env, [], tmp_path / "serve-1.log")
        gateway.wait_ready(START_TIMEOUT_S)
        worker = stack.enter_context(WorkerProcess(env, tmp_path / "w1.log"))
        first = _send(gateway.url, 30)
        scored = _wait_scored(db, first, worker)
        assert all(s["variants"]["strict"]["policy_version"] == "strict"
                   for s in scored.values())
        assert worker.stop() == 0 and "stopped" in worker.output()

        # No worker: the jobs wait in Redis, through a gateway restart.
        waiting = _send(gateway.url, 30)
        assert gateway.stop() == 0
        assert _group(client, redis_prefix)["lag"] == len(waiting)
        gateway = stack.enter_context(GatewayProcess())
        gateway.start(env, [], tmp_path / "serve-2.log")
        gateway.wait_ready(START_TIMEOUT_S)
        waiting += _send(gateway.url, 10)
        assert all(_shadows(db)[i] is None for i in waiting)
        worker = stack.enter_context(WorkerProcess(env, tmp_path / "w2.log"))
        _wait_scored(db, waiting, worker)
        assert worker.stop() == 0

        # A worker killed while it holds entries: another one claims them.
        held = _send(gateway.url, 20)
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the worker's write waits for this lock
        doomed = stack.enter_context(WorkerProcess(env, tmp_path / "w3.log", "--batch", "100"))
        deadline = time.monotonic() + SCORED_TIMEOUT_S
        while _group(client, redis_prefix)["pending"] < len(held):
            assert time.monotonic() < deadline, doomed.output()[-2000:]
            time.sleep(0.1)
        doomed.kill()
        lock.execute("ROLLBACK")
        lock.close()
        consumers = client.xinfo_consumers(stream_key(redis_prefix), GROUP)
        holder = f":{doomed.process.pid}".encode()
        assert [c["pending"] for c in consumers if c["name"].endswith(holder)] == [len(held)]
        assert all(_shadows(db)[i] is None for i in held)
        rescuer = stack.enter_context(WorkerProcess(env, tmp_path / "w4.log"))
        _wait_scored(db, held, rescuer)
        assert rescuer.stop() == 0
        assert _group(client, redis_prefix)["pending"] == 0
        assert set(_shadows(db)) == set(first + waiting + held)


def test_half_the_requests_by_request_id_at_a_sampling_rate_of_one_half(
        setup: Callable[..., dict[str, str]], tmp_path: Path, redis_url: str,
        redis_prefix: str) -> None:
    env, db = setup(shadow_sample_rate="0.5"), tmp_path / "log.db"
    with GatewayProcess() as gateway, WorkerProcess(env, tmp_path / "w.log") as worker:
        gateway.start(env, [], tmp_path / "serve.log")
        gateway.wait_ready(START_TIMEOUT_S)
        ids = _send(gateway.url, 60)
        chosen = [i for i in ids if sampled(i, 0.5)]
        _wait_scored(db, chosen, worker)
        client = redis.Redis.from_url(redis_url)
        assert client.xlen(stream_key(redis_prefix)) == len(chosen)
        assert worker.stop() == 0
    shadows = _shadows(db)
    assert {i for i in ids if shadows[i] is not None} == set(chosen)
    assert 15 <= len(chosen) <= 45  # about half (binomial(60, 0.5) within ±4 sd)

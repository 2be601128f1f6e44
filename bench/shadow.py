"""Shadow scoring on the Redis stream: what enqueueing costs a live request, and how fast
shadow workers score.

    python bench/shadow.py [--seconds 10] [--entries 40000] [--model-dir models]
                           [--db sqlite|postgres]

One run, three parts, on a fresh decision log (a SQLite file, or a throw-away PostgreSQL
database on 127.0.0.1:5432) and a throw-away Redis key prefix (both removed at the end),
with an experiment of one live variant and one shadow (the same model under a strict
copy of its policy):

1. **Live latency**: two gateways (one worker process each) with Redis configured, one
   at `SUPPORT_ROUTER_SHADOW_SAMPLE_RATE=0` (nothing enqueued) and one at 1 (every
   request appends a job), measured in alternating slices (off, on, off, on, …) so that
   the shared machine's noise falls on both alike: `/v1/route` over one connection (a
   request's own latency) and over 16 (closed loop), `--seconds` in all per row; the
   p50/p99 are the medians of the slices'. No worker runs meanwhile, so the second
   gateway's jobs stay in the stream.
2. **Backlog**: `--entries` decision rows written straight into the log and one job per
   row appended to the stream, so the workers never wait for work.
3. **Worker throughput**: one `support-router shadow-worker`, then two, each for
   `--seconds` once scoring has begun: entries scored (acknowledged) per second, from
   the consumer group's counters.
4. **Sustained** (`--rate`, needs wrk): a gateway at sample rate 1 with `--workers`
   shadow workers running, on a fresh log and key prefix, is sent `/v1/route` at a fixed
   rate (open loop) for `--seconds`, alternating in slices with the rate-0 gateway at the
   same rate; then the workers drain the stream and every logged request is checked for
   its shadow decision.

Prints the figures and the machine (nothing asserted). Traffic goes only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load import (  # noqa: E402
    Measured,
    Server,
    _cpu_seconds,
    _machine_busy_seconds,
    ensure_wrk,
    free_port,
    postgres_database,
    route_bodies,
    run_python,
    run_wrk,
    wait_ready,
)
from bench.machine import describe_machine  # noqa: E402

CLI = (sys.executable, "-c", "from router.cli.main import app; app()")
REDIS_URL = os.environ.get("SUPPORT_ROUTER_REDIS_URL", "redis://127.0.0.1:6379/0")


def _env(args: argparse.Namespace, work: Path, prefix: str, db_url: str,
         **settings: str) -> dict[str, str]:
    from router.contracts import ExperimentConfig, VariantConfig
    from router.storage.policy_store import load_policy

    model_dir = args.model_dir.resolve()
    strict_path = work / "strict.json"
    if not strict_path.exists():
        strict = load_policy(model_dir / "policy.json").model_copy(
            update={"version": "strict", "threshold": 0.99})
        strict_path.write_text(strict.model_dump_json())
    experiment = ExperimentConfig(
        name="bench-shadow", variants=[VariantConfig(name="live")],
        shadows=[VariantConfig(name="strict", model=str(model_dir / "local-route-model.json"),
                               policy=strict_path)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update({"SUPPORT_ROUTER_MODEL_DIR": str(model_dir),
                "SUPPORT_ROUTER_VAR_DIR": str(work / "var"),
                "SUPPORT_ROUTER_DATABASE_URL": db_url,
                "SUPPORT_ROUTER_REDIS_URL": REDIS_URL,
                "SUPPORT_ROUTER_REDIS_PREFIX": prefix,
                "SUPPORT_ROUTER_EXPERIMENT": experiment.model_dump_json(),
                "SUPPORT_ROUTER_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT)})
    env.update({f"SUPPORT_ROUTER_{k.upper()}": v for k, v in settings.items()})
    return env


@contextmanager
def gateway(env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen([*CLI, "serve", "--port", str(port)], cwd=ROOT, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(Server(process, base, "shadow bench"), log)
        yield base
    finally:
        process.terminate()
        process.wait(60)


def live_latency(bases: dict[str, str], bodies_file: Path, seconds: float,
                 slices: int = 4) -> dict[str, dict[str, Measured]]:
    """`bases`: label → gateway URL. Per label and connection count, the slices merged."""
    for base in bases.values():
        run_python(base, "/v1/route", bodies_file, 4, 2.0)  # warm-up
    out: dict[str, dict[str, Measured]] = {label: {} for label in bases}
    for connections in (1, 16):
        parts: dict[str, list[Measured]] = {label: [] for label in bases}
        for _ in range(slices):
            for label, base in bases.items():
                parts[label].append(run_python(base, "/v1/route", bodies_file, connections,
                                               seconds / slices))
        for label, measured in parts.items():
            out[label][f"{connections}"] = Measured(
                sum(m.requests for m in measured), sum(m.seconds for m in measured),
                statistics.median(m.p50_ms for m in measured),
                statistics.median(m.p95_ms for m in measured),
                statistics.median(m.p99_ms for m in measured),
                sum((m.errors for m in measured), Counter()))
    return out


def fill_backlog(env: dict[str, str], prefix: str, entries: int) -> None:
    """`entries` committed decision rows and one stream entry each (the worker's input)."""
    from sqlalchemy import insert

    from router.contracts import Decision, ExperimentConfig
    from router.routing.rules import RouteRequest
    from router.routing.shadows import ShadowJob
    from router.storage.db import make_engine
    from router.storage.decision_log import DecisionLog, decisions
    from router.storage.shadow_stream import stream_key

    experiment = ExperimentConfig.model_validate_json(env["SUPPORT_ROUTER_EXPERIMENT"])
    texts = [json.loads(b)["text"] for b in route_bodies()]
    engine = make_engine(env["SUPPORT_ROUTER_DATABASE_URL"])
    client = redis.Redis.from_url(REDIS_URL)
    for start in range(0, entries, 1000):
        rows, jobs = [], []
        for n in range(start, min(entries, start + 1000)):
            request_id, text = uuid.uuid4().hex, texts[n % len(texts)]
            decision = Decision(request_id=request_id, route="other", scores=None,
                                threshold=0.5, policy_version="bench", reason="bench",
                                model="bench", variant="live")
            rows.append(DecisionLog.row(decision, text=text, experiment=experiment.name))
            jobs.append(ShadowJob(request_id=request_id, experiment=experiment.name,
                                  request=RouteRequest(text=text),
                                  shadows=experiment.shadows).to_fields())
        with engine.begin() as conn:
            conn.execute(insert(decisions), rows)
        pipe = client.pipeline(transaction=False)
        for job in jobs:
            pipe.xadd(stream_key(prefix), job)
        pipe.execute()
    engine.dispose()
    client.close()


def _acked(client: redis.Redis, prefix: str) -> int:
    from router.storage.shadow_stream import GROUP, stream_key

    for group in client.xinfo_groups(stream_key(prefix)):
        if group["name"].decode() == GROUP:
            return int(group["entries-read"] or 0) - int(group["pending"])
    return 0


def worker_throughput(env: dict[str, str], prefix: str, work: Path, workers: int,
                      seconds: float) -> tuple[float, float, float]:
    """Entries scored per second; the workers' CPU and the whole machine's, in cores."""
    client = redis.Redis.from_url(REDIS_URL)
    before = _acked(client, prefix)
    processes = []
    for n in range(workers):
        log = (work / f"worker-{workers}-{n}.log").open("wb")
        processes.append(subprocess.Popen([*CLI, "shadow-worker"], cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 240
        while _acked(client, prefix) - before < 50 * workers:  # every worker has loaded
            if time.monotonic() > deadline:
                raise SystemExit("shadow workers did not start scoring")
            time.sleep(0.05)
        tree = [psutil.Process(p.pid) for p in processes]
        cpu, busy = _cpu_seconds(tree), _machine_busy_seconds()
        start, first = time.monotonic(), _acked(client, prefix)
        time.sleep(seconds)
        elapsed = time.monotonic() - start
        scored = (_acked(client, prefix) - first) / elapsed
        return (scored, (_cpu_seconds(tree) - cpu) / elapsed,
                (_machine_busy_seconds() - busy) / elapsed)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(60)
        client.close()


def _stream_drained(client: redis.Redis, prefix: str, timeout_s: float = 300) -> float:
    """Seconds until every entry of the stream is read and acknowledged."""
    from router.storage.shadow_stream import GROUP, stream_key

    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        groups = {g["name"].decode(): g for g in client.xinfo_groups(stream_key(prefix))}
        group = groups.get(GROUP)
        if group is not None and not group["pending"] and not group["lag"]:
            return time.monotonic() - start
        time.sleep(0.2)
    raise SystemExit("the shadow workers did not drain the stream")


def sustained(args: argparse.Namespace, work: Path, bodies_file: Path,
              wrk: str) -> dict[str, object]:
    """Open-loop load with workers scoring meanwhile; then every row's shadow counted."""
    from sqlalchemy import func, select

    from router.storage.db import make_engine
    from router.storage.decision_log import decisions

    prefix = f"sr-bench-{uuid.uuid4().hex[:12]}:"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        with ExitStack() as stack:
            urls = {rate: f"sqlite:///{work / f'sustained-{rate}.db'}" for rate in ("0", "1")}
            envs = {rate: _env(args, work, prefix, urls[rate], shadow_sample_rate=rate)
                    for rate in urls}
            bases = {rate: stack.enter_context(gateway(envs[rate], work / f"s-{rate}.log"))
                     for rate in urls}
            processes = [subprocess.Popen([*CLI, "shadow-worker"], cwd=ROOT, env=envs["1"],
                                          stdout=(work / f"sw-{n}.log").open("wb"),
                                          stderr=subprocess.STDOUT)
                         for n in range(args.workers)]
            parts: dict[str, list[Measured]] = {rate: [] for rate in urls}
            for _ in range(4):
                for rate, base in bases.items():
                    parts[rate].append(run_wrk(wrk, work, base, "/v1/route", bodies_file, 32,
                                               args.seconds / 4, args.rate))
            drain_s = _stream_drained(client, prefix)
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(60)
        engine = make_engine(urls["1"])
        with engine.connect() as conn:
            logged = conn.scalar(select(func.count()).select_from(decisions))
            shadowed = conn.scalar(select(func.count()).select_from(decisions)
                                   .where(decisions.c.shadow.is_not(None)))
        engine.dispose()
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()
    out: dict[str, object] = {"offered_per_s": args.rate, "workers": args.workers,
                              "logged": logged, "with_shadow": shadowed,
                              "drain_after_s": drain_s}
    for rate, measured in parts.items():
        out[rate] = {"requests_per_s": sum(m.requests for m in measured)
                     / sum(m.seconds for m in measured),
                     "p50_ms": statistics.median(m.p50_ms for m in measured),
                     "p99_ms": statistics.median(m.p99_ms for m in measured),
                     "errors": sum(sum(m.errors.values()) for m in measured)}
    return out


def _row(label: str, m: Measured) -> str:
    errors = sum(m.errors.values())
    return (f"| {label} | {m.requests / m.seconds:,.0f} | {m.p50_ms:.2f} ms | "
            f"{m.p99_ms:.2f} ms | {errors} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--model-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="Offered requests/s for the sustained part (0: skip it).")
    parser.add_argument("--workers", type=int, default=2,
                        help="Shadow workers during the sustained part.")
    args = parser.parse_args(argv)

    prefix = f"sr-bench-{uuid.uuid4().hex[:12]}:"
    results: dict[str, object] = {"machine": describe_machine()}
    with tempfile.TemporaryDirectory(prefix="sr-shadow-") as tmp:
        work = Path(tmp)
        bodies_file = work / "bodies.jsonl"
        bodies_file.write_text("\n".join(route_bodies()) + "\n")
        try:
            with ExitStack() as stack:
                db_url = (stack.enter_context(postgres_database()) if args.db == "postgres"
                          else f"sqlite:///{work / 'log.db'}")
                with ExitStack() as gateways:
                    bases = {rate: gateways.enter_context(gateway(
                        _env(args, work, prefix, db_url, shadow_sample_rate=rate),
                        work / f"serve-{rate}.log")) for rate in ("0", "1")}
                    busy, started = _machine_busy_seconds(), time.monotonic()
                    latency = live_latency(bases, bodies_file, args.seconds)
                    live_busy = (_machine_busy_seconds() - busy) / (time.monotonic() - started)
                env = _env(args, work, prefix, db_url)
                fill_backlog(env, prefix, args.entries)
                throughput = {n: worker_throughput(env, prefix, work, n, args.seconds)
                              for n in (1, 2)}
            wrk = ensure_wrk(allow_install=True) if args.rate else None
            if args.rate and wrk is None:
                raise SystemExit("--rate needs wrk")
            held = sustained(args, work, bodies_file, wrk) if wrk else None
        finally:
            client = redis.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)
            client.close()

    print(f"machine: {results['machine']}")
    print(f"\nlive /v1/route, {args.seconds:g} s per row (1 gateway worker process, "
          f"{args.db}; the machine was busy {live_busy:.2f} of {os.cpu_count()} cores, "
          f"every process counted):\n")
    print("| shadow enqueue | connections | requests/s | p50 | p99 | errors |")
    print("|---|---|---|---|---|---|")
    for rate, label in (("0", "off (sample rate 0)"), ("1", "on (sample rate 1)")):
        for connections, m in latency[rate].items():
            print(_row(f"{label} | {connections}", m))
    print(f"\nshadow workers, {args.seconds:g} s each once scoring began "
          f"(backlog of {args.entries:,} entries):\n")
    print("| workers | entries scored per second | workers' CPU (cores) | machine busy (cores) |")
    print("|---|---|---|---|")
    for n, (rate_s, cpu, machine) in throughput.items():
        print(f"| {n} | {rate_s:,.0f} | {cpu:.2f} | {machine:.2f} |")
    if held is not None:
        print(f"\nsustained: {held['offered_per_s']:g} requests/s offered to each gateway, "
              f"{args.seconds:g} s each with {held['workers']} shadow workers running:\n")
        print("| shadow enqueue | requests/s | p50 | p99 | errors |")
        print("|---|---|---|---|---|")
        for rate, label in (("0", "off (sample rate 0)"), ("1", "on (sample rate 1)")):
            row = held[rate]
            assert isinstance(row, dict)
            print(f"| {label} | {row['requests_per_s']:,.0f} | {row['p50_ms']:.2f} ms | "
                  f"{row['p99_ms']:.2f} ms | {row['errors']} |")
        print(f"\nrequests logged by the sampled gateway: {held['logged']:,}; with their "
              f"shadow decision: {held['with_shadow']:,} (the stream drained "
              f"{held['drain_after_s']:.1f} s after the load stopped)")
        results["sustained"] = held
    results["latency"] = {rate: {k: {"requests_per_s": m.requests / m.seconds,
                                     "p50_ms": m.p50_ms, "p99_ms": m.p99_ms,
                                     "errors": sum(m.errors.values())}
                                 for k, m in by.items()} for rate, by in latency.items()}
    results["live_machine_busy_cores"] = live_busy
    results["workers"] = {n: {"entries_per_s": r, "worker_cores": c, "machine_busy_cores": m}
                          for n, (r, c, m) in throughput.items()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

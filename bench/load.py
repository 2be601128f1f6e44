"""Load and soak benchmark of the gateway over loopback.

    python bench/load.py                       # the full matrix, then a 10-minute soak
    python bench/load.py --soak-s 120 --json out.json
    python bench/load.py --seconds 10 --workers 1 --db sqlite --endpoints route --soak-s 0
    python bench/load.py --baseline-ref HEAD   # also /v1/route on the committed code
    python bench/load.py --endpoints route --rate 1500 --soak-s 0   # p99 at 1,500 req/s
    python bench/load.py --backends local,cascade --model-dir D --endpoints route \
        --workers 2 --db sqlite --soak-s 0      # the cascade beside the fast model alone

For every combination of endpoint (`/v1/route`, `/v1/messages`), worker count and database
(a fresh SQLite file, or a throw-away PostgreSQL database created on 127.0.0.1:5432 and
dropped afterwards) it starts the gateway, waits for /readyz, warms up for a few seconds,
then keeps `--clients` requests in flight for `--seconds` (or, with `--rate`, sends a
fixed number of requests per second over those connections) and reports requests/s,
p50/p95/p99 latency and errors (any non-200 answer, timeout or socket error). Then a soak:
`/v1/messages` for `--soak-s` seconds with the server processes' resident memory sampled
every `--sample-s` seconds, and whether it stayed flat.

Why wrk: on a 2-core machine a Python load generator needs about as much CPU per request
as the gateway itself, so it measures the client as much as the server. wrk (C, epoll,
one thread) needs a few percent of a core; the script installs Debian's package when it
is missing and falls back to a small asyncio generator (marked in the output) when it
cannot. Request bodies come from a Lua script that cycles through a file of bodies:

- `/v1/route`: every message in `datasets/routes/` (all routes, languages, lengths,
  injection attempts), shuffled with a fixed seed.
- `/v1/messages`: the same messages without `case_id`, so every request opens a new case
  with its own server-assigned id (a client cannot pick one: an unknown id is a 404) and
  a refund is a new operation, not an idempotent replay. Messages stating an impossible
  amount are left out (they are refused with 422 by design, which is not load).

The machine is shared: the table also reports how much CPU other processes used during
each run ("other load", in cores), so a slow row can be told from a busy machine.
Traffic goes only to 127.0.0.1; every loop is bounded in time.

`--backends local,cascade` runs every row once per backend (`SUPPORT_ROUTER_BACKEND`),
side by side in one run. The cascade needs a model folder (`--model-dir`) with both
stages and the cascade's policy already there: the gateway would otherwise start on the
local model and train e5 for 20 to 40 minutes before the cascade joins, and
the benchmark refuses to measure that (see `--model-dir`'s help for how to prepare one).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe_machine  # noqa: E402

ENDPOINTS = {"route": "/v1/route", "messages": "/v1/messages"}
BACKENDS = ("local", "cascade")
CASCADE_FILES = ("local-route-model.json", "policy.json", "e5-route-model.json",
                 "policy-e5.json", "policy-cascade.json")
PREPARE_CASCADE = ("support-router train --out D; support-router train --backend e5 --out D; "
                   "SUPPORT_ROUTER_MODEL_DIR=D support-router certify-cascade")
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
BENCH_KEY = "load-bench-" + uuid.uuid4().hex
"""A throw-away API key for the gateway under test: production runs with keys, so the
benchmark pays for authentication too. Only its SHA-256 reaches the server's settings."""

LUA_SCRIPT = r"""
-- Cycles through a file of request bodies (one JSON document per line); counts non-200s.
-- With LOAD_RATE > 0 requests leave on a fixed schedule of that many per second (shared
-- by the connections of this thread), whatever the answers' latency: an offered load.
local rate = tonumber(os.getenv("LOAD_RATE") or "0")
local now_s = nil
if rate > 0 then
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } load_timespec;
    int clock_gettime(int clock_id, load_timespec *tp);
  ]]
  local ts = ffi.new("load_timespec")
  now_s = function()
    ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
end
local next_at = nil
function delay()
  if rate <= 0 then return 0 end
  local now = now_s()
  next_at = (next_at or now) + 1 / rate
  return math.max(0, (next_at - now) * 1000)
end
local bodies = {}
for line in io.lines(os.getenv("LOAD_BODIES")) do bodies[#bodies + 1] = line end
local path = os.getenv("LOAD_PATH")
local headers = {["Content-Type"] = "application/json", ["X-API-Key"] = os.getenv("LOAD_KEY")}
local threads = {}
local next_id = 0
function setup(thread)
  thread:set("offset", next_id * 7919)
  next_id = next_id + 1
  table.insert(threads, thread)
end
statuses = {}
local i = 0
function init(args) i = offset or 0 end
function request()
  i = i + 1
  return wrk.format("POST", path, headers, bodies[(i % #bodies) + 1])
end
function response(status, hdrs, body)
  if status ~= 200 then
    local key = tostring(status)
    statuses[key] = (statuses[key] or 0) + 1
  end
end
function done(summary, latency, requests)
  local bad = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do bad[k] = (bad[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(bad) do parts[#parts + 1] = string.format('"%s": %d', k, v) end
  local e = summary.errors
  io.write(string.format(
    'LOADJSON {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, ' ..
    '"timeout": %d, "status": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, ' ..
    '"max_us": %d, "statuses": {%s}}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
    table.concat(parts, ", ")))
end
"""


@dataclass
class LoadResult:
    endpoint: str
    backend: str
    workers: int
    db: str
    server: str
    generator: str
    seconds: float
    requests: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int
    error_detail: dict[str, int] = field(default_factory=dict)
    other_load_cores: float = 0.0
    server_cpu_cores: float = 0.0
    server_cpu_us_per_request: float = 0.0
    """Server CPU time per request: less sensitive than req/s to a busy machine."""


@dataclass
class SoakResult:
    endpoint: str
    workers: int
    db: str
    seconds: float
    requests: int
    rps: float
    p99_ms: float
    errors: int
    samples: list[dict[str, float]]
    first_mb: float
    last_mb: float
    growth_pct: float
    slope_mb_per_min: float
    late_slope_mb_per_min: float
    """The slope over the second half of the samples, once start-up growth is over."""
    flat: bool


# -- inputs -------------------------------------------------------------------------------


def route_bodies(seed: int = 7) -> list[str]:
    """Every labelled message, shuffled: the production mix as far as we know it."""
    from calibration.data import load_labelled

    rows = load_labelled(ROOT / "datasets" / "routes")
    texts = [r.text for r in rows]
    random.Random(seed).shuffle(texts)
    return [json.dumps({"text": t}, ensure_ascii=False) for t in texts]


def message_bodies(seed: int = 11) -> list[str]:
    """The same mix for `/v1/messages`, minus impossible amounts (a 422 by design)."""
    from handlers.extract import InvalidAmount, parse_amounts

    out = []
    for body in route_bodies(seed):
        try:
            parse_amounts(json.loads(body)["text"])
        except InvalidAmount:
            continue
        out.append(body)
    return out


# -- servers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_supports_workers() -> bool:
    cli = Path(sys.executable).with_name("support-router")
    if not cli.exists():
        return False
    out = subprocess.run([str(cli), "serve", "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=60)
    return "--workers" in out.stdout


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database on the local server, dropped afterwards (whatever happens)."""
    import psycopg

    name = f"sr_load_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database(kind: str) -> Iterator[str | None]:
    if kind == "postgres":
        with postgres_database() as url:
            yield url
    else:
        yield None  # SQLite in the server's fresh var dir


@dataclass
class Server:
    process: subprocess.Popen
    base: str
    label: str

    def tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


def _server_env(var_dir: str, db_url: str | None, log_level: str | None, *,
                backend: str = "local", model_dir: Path = ROOT / "models") -> dict[str, str]:
    digest = hashlib.sha256(BENCH_KEY.encode()).hexdigest()
    env = {
        **os.environ,
        "SUPPORT_ROUTER_VAR_DIR": var_dir,
        "SUPPORT_ROUTER_MODEL_DIR": str(model_dir),
        "SUPPORT_ROUTER_BACKEND": backend,
        "SUPPORT_ROUTER_API_KEYS": json.dumps(
            [{"name": "load-bench", "sha256": digest, "roles": ["gateway"]}]),
        # The per-key rate limit would turn this benchmark into a 429 test.
        "SUPPORT_ROUTER_RATE_LIMIT_PER_S": "0",
    }
    if log_level:
        env["SUPPORT_ROUTER_LOG_LEVEL"] = log_level
    if db_url:
        env["SUPPORT_ROUTER_DATABASE_URL"] = db_url
    else:
        env.pop("SUPPORT_ROUTER_DATABASE_URL", None)
    return env


@contextmanager
def running_server(workers: int, db_url: str | None, *, baseline_src: Path | None,
                   use_cli: bool, log_level: str | None, backend: str = "local",
                   model_dir: Path = ROOT / "models") -> Iterator[Server]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sr-load-") as var_dir:
        env = _server_env(var_dir, db_url, log_level, backend=backend, model_dir=model_dir)
        cwd = ROOT
        if baseline_src is not None:
            # The committed code as it was: stock uvicorn (asyncio loop, h11 parser), as
            # it ran before `uvicorn[standard]` was a dependency.
            env["PYTHONPATH"] = str(baseline_src)
            cwd = baseline_src
            command = [sys.executable, "-m", "uvicorn", "router.gateway.asgi:app",
                       "--loop", "asyncio", "--http", "h11"]
            label = "baseline"
        elif use_cli:
            command = [str(Path(sys.executable).with_name("support-router")), "serve"]
            label = "serve"
        else:
            command = [sys.executable, "-m", "uvicorn", "router.gateway.asgi:app"]
            label = "uvicorn"
        command += ["--host", "127.0.0.1", "--port", str(port)]
        if workers > 1 or baseline_src is not None or not use_cli:
            command += ["--workers", str(workers)]
        if not use_cli or baseline_src is not None:
            command += ["--no-access-log", "--log-level", (log_level or "warning").lower()]
        log = open(Path(var_dir) / "server.log", "wb")  # noqa: SIM115 - closed below
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(process, f"http://127.0.0.1:{port}", label)
        try:
            ready = wait_ready(server, Path(var_dir) / "server.log")
            if backend == "cascade" and not ready.get("model", "").startswith("cascade:"):
                raise SystemExit(f"the gateway serves {ready.get('model')}, not the cascade "
                                 f"(pending: {ready.get('pending')}); prepare the folder: "
                                 f"{PREPARE_CASCADE}")
            yield server
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            log.close()


def wait_ready(server: Server, log_path: Path, timeout_s: float = 240.0) -> dict:
    """The first ready `/readyz` body."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"gateway exited with {server.process.returncode}:\n{tail}")
        try:
            answer = httpx.get(f"{server.base}/readyz", timeout=2)
            if answer.status_code == 200:
                return answer.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    tail = log_path.read_text(errors="replace")[-3000:]
    raise SystemExit(f"gateway did not become ready in {timeout_s:.0f} s:\n{tail}")


# -- load generators ----------------------------------------------------------------------


def ensure_wrk(allow_install: bool) -> str | None:
    found = shutil.which("wrk")
    if found or not allow_install or os.geteuid() != 0:
        return found
    print("wrk not found; installing Debian's package …", file=sys.stderr)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(["apt-get", "update", "-qq"], check=False, timeout=300, **quiet)
    subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=False, timeout=300,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, **quiet)
    return shutil.which("wrk")


@dataclass
class Measured:
    requests: int
    seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: Counter[str]


def run_wrk(wrk: str, workdir: Path, base: str, path: str, bodies_file: Path, clients: int,
            seconds: float, rate: float = 0.0) -> Measured:
    script = workdir / "load.lua"
    script.write_text(LUA_SCRIPT)
    env = {**os.environ, "LOAD_BODIES": str(bodies_file), "LOAD_PATH": path,
           "LOAD_KEY": BENCH_KEY, "LOAD_RATE": str(rate)}
    command = [wrk, "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
               "-s", str(script), base]
    out = subprocess.run(command, env=env, capture_output=True, text=True,
                         timeout=seconds + 120)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("LOADJSON ")), None)
    if line is None:
        raise SystemExit(f"wrk failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr}")
    data = json.loads(line.removeprefix("LOADJSON "))
    errors: Counter[str] = Counter({f"http_{k}": v for k, v in data["statuses"].items()})
    for kind in ("connect", "read", "write", "timeout"):
        if data[kind]:
            errors[kind] += data[kind]
    # wrk counts non-2xx/3xx in "status"; our own count (non-200) is in `statuses`.
    return Measured(data["requests"], data["duration_us"] / 1e6, data["p50_us"] / 1e3,
                    data["p95_us"] / 1e3, data["p99_us"] / 1e3, errors)


async def _python_load(host: str, port: int, path: str, bodies: list[bytes], clients: int,
                       seconds: float) -> Measured:
    """Keep-alive HTTP/1.1 over asyncio streams: the least Python per request we can do."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    async def client(index: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        i = index
        try:
            while time.monotonic() < deadline:
                body = bodies[i % len(bodies)]
                i += clients
                head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                        f"Content-Type: application/json\r\nX-API-Key: {BENCH_KEY}\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode()
                start = time.perf_counter()
                writer.write(head + body)
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - start)
                status = status_line.split(b" ")[1].decode() if status_line else "closed"
                if status != "200":
                    errors[f"http_{status}"] += 1
        except (OSError, asyncio.IncompleteReadError) as exc:
            errors[type(exc).__name__] += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    ms = np.array(latencies or [0.0]) * 1e3
    return Measured(len(latencies), elapsed, float(np.percentile(ms, 50)),
                    float(np.percentile(ms, 95)), float(np.percentile(ms, 99)), errors)


def run_python(base: str, path: str, bodies_file: Path, clients: int,
               seconds: float) -> Measured:
    bodies = [line.encode() for line in bodies_file.read_text().splitlines()]
    host, port = base.removeprefix("http://").split(":")
    return asyncio.run(_python_load(host, int(port), path, bodies, clients, seconds))


@dataclass
class Generator:
    name: str
    wrk: str | None

    def run(self, workdir: Path, base: str, path: str, bodies_file: Path, clients: int,
            seconds: float, rate: float = 0.0) -> Measured:
        if self.wrk:
            return run_wrk(self.wrk, workdir, base, path, bodies_file, clients, seconds, rate)
        if rate:
            raise SystemExit("--rate needs wrk (the Python generator only runs closed-loop)")
        return run_python(base, path, bodies_file, clients, seconds)


# -- measuring ----------------------------------------------------------------------------


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        with suppress(psutil.NoSuchProcess):
            t = proc.cpu_times()
            total += t.user + t.system
    return total


def _machine_busy_seconds() -> float:
    t = psutil.cpu_times()
    return t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(
        t, "softirq", 0.0)


def measure(generator: Generator, workdir: Path, server: Server, endpoint: str,
            bodies_file: Path, clients: int, seconds: float, warmup_s: float,
            rate: float = 0.0) -> tuple[Measured, float, float]:
    """One timed run after a warm-up; also the CPU the server and everyone else used."""
    path = ENDPOINTS[endpoint]
    if warmup_s > 0:
        generator.run(workdir, server.base, path, bodies_file, clients, warmup_s, rate)
    server_procs = server.tree()
    me = psutil.Process()
    busy0, server0, me0 = _machine_busy_seconds(), _cpu_seconds(server_procs), _cpu_seconds([me])
    children0 = me.cpu_times().children_user + me.cpu_times().children_system
    wall0 = time.monotonic()
    result = generator.run(workdir, server.base, path, bodies_file, clients, seconds, rate)
    wall = time.monotonic() - wall0
    children1 = me.cpu_times().children_user + me.cpu_times().children_system
    server_cpu = _cpu_seconds(server_procs) - server0
    # wrk is a finished child by now (children_*); the Python generator runs in this process.
    generator_cpu = (children1 - children0) + (_cpu_seconds([me]) - me0)
    other = max(0.0, _machine_busy_seconds() - busy0 - server_cpu - generator_cpu)
    if server_cpu < 0 or len(server.tree()) != len(server_procs):
        server_cpu = float("nan")  # a server process exited during the run: no figure
    return result, other / wall, server_cpu / wall


def load_run(args: argparse.Namespace, generator: Generator, workdir: Path, endpoint: str,
             workers: int, db: str, bodies_file: Path, *, baseline_src: Path | None,
             use_cli: bool, backend: str = "local") -> LoadResult:
    with database(db) as db_url, running_server(
        workers, db_url, baseline_src=baseline_src, use_cli=use_cli, log_level=args.log_level,
        backend=backend, model_dir=args.model_dir
    ) as server:
        m, other, server_cpu = measure(generator, workdir, server, endpoint, bodies_file,
                                       args.clients, args.seconds, args.warmup_s, args.rate)
        label = server.label
    return LoadResult(
        endpoint=ENDPOINTS[endpoint], backend=backend, workers=workers, db=db, server=label,
        generator=generator.name, seconds=round(m.seconds, 2), requests=m.requests,
        rps=round(m.requests / m.seconds, 1), p50_ms=round(m.p50_ms, 2),
        p95_ms=round(m.p95_ms, 2), p99_ms=round(m.p99_ms, 2), errors=sum(m.errors.values()),
        error_detail=dict(m.errors), other_load_cores=round(other, 2),
        server_cpu_cores=round(server_cpu, 2),
        server_cpu_us_per_request=round(server_cpu * m.seconds / max(m.requests, 1) * 1e6),
    )


def median_result(results: list[LoadResult]) -> LoadResult:
    """Medians of the repeated runs' figures; errors are summed (any error counts)."""
    first = results[0]
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r.error_detail)
    return LoadResult(
        endpoint=first.endpoint, backend=first.backend, workers=first.workers, db=first.db,
        server=first.server,
        generator=first.generator, seconds=statistics.median(r.seconds for r in results),
        requests=sum(r.requests for r in results),
        rps=statistics.median(r.rps for r in results),
        p50_ms=statistics.median(r.p50_ms for r in results),
        p95_ms=statistics.median(r.p95_ms for r in results),
        p99_ms=statistics.median(r.p99_ms for r in results),
        errors=sum(r.errors for r in results), error_detail=dict(errors),
        other_load_cores=statistics.median(r.other_load_cores for r in results),
        server_cpu_cores=statistics.median(r.server_cpu_cores for r in results),
        server_cpu_us_per_request=statistics.median(
            r.server_cpu_us_per_request for r in results),
    )


def rss_mb(server: Server) -> dict[str, float]:
    """Resident memory of the server's processes (the supervisor and each worker)."""
    out: dict[str, float] = {}
    for proc in server.tree():
        with suppress(psutil.NoSuchProcess):
            out[str(proc.pid)] = proc.memory_info().rss / 2**20
    out["total"] = sum(out.values())
    return out


def soak(args: argparse.Namespace, generator: Generator, workdir: Path,
         bodies_file: Path, use_cli: bool) -> SoakResult:
    """`/v1/messages` for `--soak-s` seconds; memory sampled every `--sample-s` seconds."""
    samples: list[dict[str, float]] = []
    with database(args.soak_db) as db_url, running_server(
        args.soak_workers, db_url, baseline_src=None, use_cli=use_cli,
        log_level=args.log_level, model_dir=args.model_dir
    ) as server:
        if args.soak_warmup_s > 0:
            generator.run(workdir, server.base, ENDPOINTS["messages"], bodies_file,
                          args.clients, args.soak_warmup_s)
        box: dict[str, Measured] = {}

        def drive() -> None:
            box["m"] = generator.run(workdir, server.base, ENDPOINTS["messages"],
                                     bodies_file, args.clients, args.soak_s)

        import threading

        thread = threading.Thread(target=drive, daemon=True)
        started = time.monotonic()
        thread.start()
        while True:
            elapsed = time.monotonic() - started
            samples.append({"t_s": round(elapsed, 1),
                            **{k: round(v, 1) for k, v in rss_mb(server).items()}})
            if elapsed >= args.soak_s or not thread.is_alive():
                break
            time.sleep(min(args.sample_s, max(0.0, args.soak_s - elapsed)))
        thread.join(timeout=args.soak_s + 180)
    m = box["m"]
    t = np.array([s["t_s"] for s in samples]) / 60.0
    mb = np.array([s["total"] for s in samples])
    slope = float(np.polyfit(t, mb, 1)[0]) if len(samples) >= 2 and t[-1] > 0 else 0.0
    half = len(samples) // 2
    late = (float(np.polyfit(t[half:], mb[half:], 1)[0])
            if len(samples) - half >= 3 else slope)
    growth = (mb[-1] - mb[0]) / mb[0] * 100 if mb[0] else 0.0
    # Flat: under 5% from the first sample to the last, and no more than 1 MB/min of
    # growth over the second half (allocator jitter is about ±1 MB between samples).
    flat = bool(growth < 5.0 and late <= 1.0)
    return SoakResult(
        endpoint=ENDPOINTS["messages"], workers=args.soak_workers, db=args.soak_db,
        seconds=round(m.seconds, 1), requests=m.requests, rps=round(m.requests / m.seconds, 1),
        p99_ms=round(m.p99_ms, 2), errors=sum(m.errors.values()), samples=samples,
        first_mb=round(float(mb[0]), 1), last_mb=round(float(mb[-1]), 1),
        growth_pct=round(float(growth), 2), slope_mb_per_min=round(slope, 3),
        late_slope_mb_per_min=round(late, 3), flat=flat,
    )


# -- output -------------------------------------------------------------------------------


def print_table(results: list[LoadResult]) -> None:
    header = (f"{'endpoint':<13} {'backend':<8} {'server':<8} {'workers':>7} {'db':<8} "
              f"{'req/s':>8} "
              f"{'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'errors':>6} {'srv cpu':>7} "
              f"{'µs/req':>7} {'other':>6}")
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r.endpoint:<13} {r.backend:<8} {r.server:<8} {r.workers:>7} {r.db:<8} "
              f"{r.rps:>8,.0f} "
              f"{r.p50_ms:>7.1f} {r.p95_ms:>7.1f} {r.p99_ms:>7.1f} {r.errors:>6} "
              f"{r.server_cpu_cores:>7.2f} {r.server_cpu_us_per_request:>7.0f} "
              f"{r.other_load_cores:>6.2f}")
        if r.error_detail:
            print(f"{'':<13} errors: {r.error_detail}")


def print_backends(results: list[LoadResult]) -> None:
    """Each backend's row next to the local model's on the same endpoint, workers and db."""
    local = {(r.endpoint, r.workers, r.db): r for r in results
             if r.backend == "local" and r.server != "baseline"}
    for r in results:
        base = local.get((r.endpoint, r.workers, r.db))
        if r.backend == "local" or base is None or not base.rps:
            continue
        print(f"{r.endpoint} {r.workers} worker(s) {r.db}: {r.backend} {r.rps:,.0f} req/s "
              f"({r.rps / base.rps:.2f}x local), p99 {r.p99_ms:.1f} ms (local "
              f"{base.p99_ms:.1f} ms)")


def print_soak(s: SoakResult) -> None:
    print(f"\nsoak: {s.endpoint}, {s.workers} worker(s), {s.db}, {s.seconds:.0f} s: "
          f"{s.requests} requests ({s.rps:,.0f} req/s), p99 {s.p99_ms:.1f} ms, "
          f"errors {s.errors}")
    print("  resident memory of the server processes (MB): " + ", ".join(
        f"{x['t_s']:.0f}s {x['total']:.1f}" for x in s.samples))
    print(f"  first {s.first_mb:.1f} MB, last {s.last_mb:.1f} MB "
          f"({s.growth_pct:+.1f}%), slope {s.slope_mb_per_min:+.2f} MB/min, second half "
          f"{s.late_slope_mb_per_min:+.2f} MB/min → "
          f"{'flat' if s.flat else 'NOT flat'}")


# -- main ---------------------------------------------------------------------------------


def export_ref(ref: str, into: Path) -> Path:
    """The tree of a commit (read-only `git archive`), for a baseline server."""
    data = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, check=True,
                          capture_output=True).stdout
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(data)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "src", filter="data")
    # The trained model too (`models/` is not committed): both servers score with the
    # same artifact, and the baseline does not spend minutes training at start.
    if (ROOT / "models").is_dir():
        shutil.copytree(ROOT / "models", into / "src" / "models")
    return into / "src"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--endpoints", default="route,messages")
    parser.add_argument(
        "--backends", default="local",
        help="comma-separated SUPPORT_ROUTER_BACKEND values to run every row with: local, "
        "cascade or both (side by side in one run)")
    parser.add_argument(
        "--model-dir", type=Path, default=ROOT / "models",
        help="the gateway's SUPPORT_ROUTER_MODEL_DIR (default: models/). The local model is "
        "trained into it if missing; the cascade is not (e5 takes 20 to 40 minutes on 2 "
        f"cores), so for --backends cascade prepare it first: {PREPARE_CASCADE}")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; medians shown")
    parser.add_argument(
        "--rate", type=float, default=0.0,
        help="offered load: requests leave on a fixed schedule of this many per second over "
        "the --clients connections (wrk only). 0 (default): closed loop, each connection "
        "sends its next request as soon as the answer arrives")
    parser.add_argument("--soak-s", type=float, default=600.0, help="0 skips the soak")
    parser.add_argument("--sample-s", type=float, default=30.0)
    parser.add_argument("--soak-db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--soak-workers", type=int, default=1)
    parser.add_argument(
        "--soak-warmup-s", type=float, default=60.0,
        help="load before the first memory sample, so caches sized by the input "
        "(SQLAlchemy's statement cache, numba's compiled kernels) are full: flat memory "
        "is about steady state")
    parser.add_argument("--generator", default="auto", choices=["auto", "wrk", "python"])
    parser.add_argument("--no-install", action="store_true", help="never apt-get wrk")
    parser.add_argument("--baseline-ref", default=None,
                        help="also run /v1/route on this commit's code (e.g. HEAD)")
    parser.add_argument(
        "--baseline-db", default="sqlite",
        help="databases for the baseline rows (the committed code's workers race to "
        "create the PostgreSQL schema at start, so its 2-worker PostgreSQL row can fail)")
    parser.add_argument("--log-level", default=None,
                        help="the gateway's SUPPORT_ROUTER_LOG_LEVEL (default: its own)")
    parser.add_argument("--json", dest="json_out", type=Path, default=None,
                        help="also write every figure to this JSON file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workers_list = [int(w) for w in args.workers.split(",") if w]
    dbs = [d for d in args.db.split(",") if d]
    endpoints = [e for e in args.endpoints.split(",") if e]
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        raise SystemExit(f"--backends: unknown {unknown}; choose from {', '.join(BACKENDS)}")
    args.model_dir = args.model_dir.resolve()
    missing = [f for f in CASCADE_FILES if not (args.model_dir / f).exists()]
    if "cascade" in backends and missing:
        raise SystemExit(f"--backends cascade: {args.model_dir} has no {', '.join(missing)}; "
                         f"prepare it first: {PREPARE_CASCADE}")

    wrk = None if args.generator == "python" else ensure_wrk(not args.no_install)
    if args.generator == "wrk" and wrk is None:
        raise SystemExit("wrk is not installed and could not be installed")
    generator = Generator("wrk" if wrk else "python-asyncio", wrk)

    from router.app.bootstrap import load_local
    from router.settings import Settings

    # Train once here, not inside a timed server start.
    load_local(Settings(model_dir=args.model_dir))
    use_cli = serve_supports_workers()
    machine = describe_machine()
    print(f"machine: {machine}")
    print(f"load generator: {generator.name}{' (in this process)' if not wrk else ''}; "
          f"{args.clients} clients"
          f"{f' offering {args.rate:,.0f} req/s' if args.rate else ' (closed loop)'}, "
          f"{args.seconds:.0f} s per row after {args.warmup_s:.0f} s "
          f"warm-up; server started with "
          f"{'support-router serve' if use_cli else 'uvicorn router.gateway.asgi:app'}")

    results: list[LoadResult] = []
    with tempfile.TemporaryDirectory(prefix="sr-load-bench-") as tmp:
        workdir = Path(tmp)
        bodies = {"route": workdir / "route.jsonl", "messages": workdir / "messages.jsonl"}
        bodies["route"].write_text("\n".join(route_bodies()) + "\n")
        bodies["messages"].write_text("\n".join(message_bodies()) + "\n")
        baseline_src = export_ref(args.baseline_ref, workdir) if args.baseline_ref else None

        plan: list[tuple[str, int, str, str, Path | None]] = []
        for endpoint in endpoints:
            for workers in workers_list:
                for db in dbs:
                    for backend in backends:
                        plan.append((endpoint, workers, db, backend, None))
                    if (baseline_src is not None and endpoint == "route"
                            and db in args.baseline_db.split(",")):
                        plan.append((endpoint, workers, db, "local", baseline_src))
        for endpoint, workers, db, backend, src in plan:
            runs = [load_run(args, generator, workdir, endpoint, workers, db, bodies[endpoint],
                             baseline_src=src, use_cli=use_cli, backend=backend)
                    for _ in range(args.repeat)]
            row = median_result(runs)
            results.append(row)
            print(f"  {row.endpoint} {backend} {row.server} workers={workers} {db}: "
                  f"{row.rps:,.0f} req/s p99 {row.p99_ms:.1f} ms errors {row.errors}",
                  file=sys.stderr, flush=True)

        soak_result = None
        if args.soak_s > 0:
            soak_result = soak(args, generator, workdir, bodies["messages"], use_cli)

    print()
    print_table(results)
    print("(srv cpu: cores the server processes used; µs/req: their CPU time per request; "
          "other: cores used by other processes on the machine during the run)")
    for workers in workers_list:
        for db in dbs:
            pair = {r.server: r for r in results if r.endpoint == "/v1/route"
                    and r.backend == "local" and r.workers == workers and r.db == db}
            if "baseline" in pair and len(pair) == 2:
                new = next(r for k, r in pair.items() if k != "baseline")
                old = pair["baseline"]
                print(f"/v1/route {workers} worker(s) {db}: {new.rps / old.rps:.1f}x req/s, "
                      f"p99 {old.p99_ms:.0f} → {new.p99_ms:.1f} ms")
    print_backends(results)
    if soak_result is not None:
        print_soak(soak_result)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({
            "machine": machine, "generator": generator.name, "clients": args.clients,
            "seconds": args.seconds, "repeat": args.repeat,
            "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
            "results": [asdict(r) for r in results],
            "soak": asdict(soak_result) if soak_result else None,
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""The ceiling of the HTTP stack alone: `/v1/route`'s shape with no work behind it.

    python bench/http_ceiling.py [--workers 2] [--seconds 15] [--repeat 3] [--rate 1500]
                                 [--server granian|uvicorn]

Serves a FastAPI app whose `POST /v1/route` validates the same JSON body as the gateway
and answers a constant decision: no model, no middleware, no database. It runs on the
gateway's server (granian, HTTP/1, the same worker count; `--server uvicorn` for uvicorn
with uvloop and httptools, the server before it) and is
loaded the way `bench/load.py` loads the gateway (wrk, 32 connections, the same message
bodies). Whatever this reaches on a machine bounds what the gateway can reach there, so
it tells a slow gateway from a slow machine. Prints medians over `--repeat` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fastapi import FastAPI
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import ensure_wrk, free_port, route_bodies, run_wrk  # noqa: E402
from bench.machine import describe_machine  # noqa: E402


class RouteBody(BaseModel):
    text: str = Field(min_length=1, max_length=8000)
    case_id: str | None = None


app = FastAPI()
DECISION = {"route": "other", "reason": "routed", "threshold": 0.84, "model": "none"}


@app.post("/v1/route")
def route(body: RouteBody) -> dict:
    return DECISION


@app.get("/healthz")
def healthz() -> dict:
    return {"ok": True}


def _wait_ready(base: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit("the no-op server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server", choices=("granian", "uvicorn"), default="granian")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="requests/s offered over the connections (0: closed loop)")
    args = parser.parse_args()
    wrk = ensure_wrk(allow_install=True)
    if wrk is None:
        raise SystemExit("this benchmark needs wrk (Debian's package)")
    print(describe_machine())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bodies = workdir / "route.jsonl"
        bodies.write_text("\n".join(route_bodies()) + "\n")
        port = free_port()
        command = (
            [sys.executable, "-m", "granian", "--interface", "asgi", "--http", "1",
             "--no-ws", "--port", str(port), "--workers", str(args.workers),
             "--log-level", "warning", "bench.http_ceiling:app"]
            if args.server == "granian" else
            [sys.executable, "-m", "uvicorn", "bench.http_ceiling:app", "--port", str(port),
             "--workers", str(args.workers), "--loop", "uvloop", "--http", "httptools",
             "--no-access-log", "--log-level", "warning"])
        # Its own process group: granian's worker must go with it, even when killed.
        server = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1],
                                  start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_ready(base)
            runs = [
                run_wrk(wrk, workdir, base, "/v1/route", bodies, args.clients, args.seconds,
                        args.rate)
                for _ in range(args.repeat)
            ]
        finally:
            _stop(server)
    rate = statistics.median(r.requests / r.seconds for r in runs)
    p50 = statistics.median(r.p50_ms for r in runs)
    p99 = statistics.median(r.p99_ms for r in runs)
    errors = sum(sum(r.errors.values()) for r in runs)
    load = f"{args.rate:,.0f} req/s offered" if args.rate else "closed loop"
    print(f"no-op /v1/route on {args.server}, {args.workers} workers, "
          f"{args.clients} wrk connections, {load}, "
          f"{args.seconds:g} s × {args.repeat}: {rate:,.0f} req/s, p50 {p50:.1f} ms, "
          f"p99 {p99:.1f} ms, {errors} errors (medians)")


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL after 15 s: granian at times outwaits a graceful stop with
    wrk's connections just closed, and a benchmark must not hang on its server."""
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


if __name__ == "__main__":
    main()

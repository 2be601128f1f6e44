"""Benchmark `POST /v1/route` over loopback: a real uvicorn process, 32 concurrent clients.

    python bench/gateway_route.py [--clients 32] [--seconds 20] [--workers 1]

Starts the gateway on a free port with a fresh SQLite file (the model folder is shared
with the repo's `models/`, trained first if missing), waits for /readyz, then keeps
`--clients` requests in flight for `--seconds`. Prints requests/s, p50/p99 latency and the
error count. Bounded in time; sends traffic only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from calibration.data import load_labelled, select_split  # noqa: E402
from router.settings import PROJECT_ROOT, get_settings  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gateway(port: int, var_dir: str, workers: int) -> subprocess.Popen:
    env = {**os.environ, "SUPPORT_ROUTER_VAR_DIR": var_dir}
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "router.gateway.asgi:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(command, env=env, cwd=PROJECT_ROOT)


def wait_ready(base: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("gateway did not become ready")


async def load(
    base: str, texts: list[str], clients: int, seconds: float
) -> tuple[list[float], Counter[str]]:
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(index: int, http: httpx.AsyncClient) -> None:
        i = index
        while time.monotonic() < deadline:
            start = time.perf_counter()
            try:
                response = await http.post(f"{base}/v1/route", json={"text": texts[i % len(texts)]})
                if response.status_code != 200:
                    errors[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] += 1
            latencies.append(time.perf_counter() - start)
            i += clients

    async with httpx.AsyncClient(limits=limits, timeout=10) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))
    return latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    from router.bootstrap import load_local

    load_local(get_settings())  # train once here, not inside the timed server start
    texts = [r.text for r in select_split(load_labelled(PROJECT_ROOT / "datasets/routes"), "test")]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as var_dir:
        server = start_gateway(port, var_dir, args.workers)
        try:
            wait_ready(base)
            asyncio.run(load(base, texts, args.clients, 2.0))  # warm-up
            started = time.perf_counter()
            latencies, errors = asyncio.run(load(base, texts, args.clients, args.seconds))
            elapsed = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(timeout=30)
    ms = np.array(latencies) * 1e3
    print(f"machine: {describe_machine()}")
    print(
        f"POST /v1/route, {args.clients} clients, {args.workers} worker(s), {args.seconds:.0f} s, "
        "load generator in the same machine"
    )
    print(
        f"requests: {len(ms)}  errors: {sum(errors.values())} {dict(errors)}  "
        f"throughput: {len(ms) / elapsed:,.0f} req/s"
    )
    print(f"latency: p50 {np.percentile(ms, 50):.1f} ms  p99 {np.percentile(ms, 99):.1f} ms")


if __name__ == "__main__":
    main()

"""What the request id, latency histogram and JSON access log cost per request.

Two measurements, printed (nothing asserted):

1. **Middleware alone**: `ObservabilityMiddleware` around a minimal ASGI app that answers
   200, called directly (no HTTP, no client), against the same app without it. The JSON
   access line goes to /dev/null through the real handler and formatter, so the figure
   includes formatting and the write.
2. **Through the app**: `GET /healthz` and `POST /v1/route` via TestClient on the real app,
   with the middleware and with a bare one that only sets the request id (logging to
   /dev/null in both). TestClient itself
   costs about a millisecond a request, so this difference is noisier than (1).

    python bench/observability_overhead.py [--n 20000] [--app-n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from fastapi.testclient import TestClient
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from router.gateway.app import create_app
from router.gateway.middleware.observability import ObservabilityMiddleware
from router.settings import Settings
from router.telemetry.logs import configure_logging


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})


class _BareRequestId:
    """What the app needs without observability: `request.state.request_id`, nothing else."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})["request_id"] = uuid.uuid4().hex
        await self.app(scope, receive, send)


def _scope() -> Scope:
    return {"type": "http", "method": "GET", "path": "/healthz", "headers": [],
            "query_string": b""}


async def _drive(app, n: int) -> float:  # type: ignore[no-untyped-def]
    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        return None

    start = time.perf_counter()
    for _ in range(n):
        await app(_scope(), receive, send)
    return (time.perf_counter() - start) / n


def middleware_alone(n: int, repeats: int = 5) -> tuple[float, float]:
    wrapped = ObservabilityMiddleware(_ok)
    bare, full = [], []
    for _ in range(repeats):
        bare.append(asyncio.run(_drive(_ok, n)))
        full.append(asyncio.run(_drive(wrapped, n)))
    return statistics.median(bare), statistics.median(full)


def _client_run(client: TestClient, n: int, method: str, url: str, body: dict | None) -> float:
    start = time.perf_counter()
    for _ in range(n):
        client.request(method, url, json=body)
    return (time.perf_counter() - start) / n


def through_app(settings: Settings, n: int) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}
    cases = {"GET /healthz": ("GET", "/healthz", None),
             "POST /v1/route": ("POST", "/v1/route",
                                {"text": "Where is my parcel? It has been two weeks."})}
    for label, (method, url, body) in cases.items():
        timings: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(3):
            for observed in (False, True):
                app = create_app(settings)
                if not observed:
                    app.user_middleware = [m if m.cls is not ObservabilityMiddleware
                                           else Middleware(_BareRequestId)
                                           for m in app.user_middleware]
                with TestClient(app) as client:
                    configure_logging(settings, stream=open("/dev/null", "w"))  # noqa: SIM115
                    _client_run(client, 200, method, url, body)  # warm-up
                    timings[observed].append(_client_run(client, n, method, url, body))
        results[label] = (statistics.median(timings[False]), statistics.median(timings[True]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--app-n", type=int, default=2000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(var_dir=Path(tmp) / "var", rate_limit_per_s=0)
        configure_logging(settings, stream=open("/dev/null", "w"))  # noqa: SIM115
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        bare, full = middleware_alone(args.n)
        print(f"middleware alone: {bare * 1e6:.1f} µs bare, {full * 1e6:.1f} µs with "
              f"request id + histogram + JSON access line → {(full - bare) * 1e6:.1f} µs")
        for label, (without, with_) in through_app(settings, args.app_n).items():
            print(f"{label} via TestClient: {without * 1e3:.3f} ms without, "
                  f"{with_ * 1e3:.3f} ms with → {(with_ - without) * 1e6:+.0f} µs")


if __name__ == "__main__":
    main()

"""Start-up: the services are built before the first request, or behind a gate.

**Usually in the lifespan**: the model is on disk and loads in seconds. The server binds a
worker's socket only once its lifespan has finished, so a worker that is still loading
(a replacement for one that died, say) takes no connection it could not answer.

**In the background when a model must be trained first** (a fresh clone: minutes). The
lifespan returns at once so the port opens, and until the services are built
`StartupGate` answers for the app:

- `/healthz` 200 (the process is up), and `/metrics` and the API docs as usual;
- `/readyz` 503 `{"ready": false, "status": "starting", "waiting_for": [...]}`;
- everything else 503 with the error code `starting` and a `Retry-After`.

Training happens once, not once per worker: `router.app.bootstrap.ensure_trained` trains
under a lock file in the model folder, and a worker that finds it taken waits for the
other one and loads what it wrote. A start that fails in the background ends the process
with exit code 3, as a failed lifespan would, after logging why, and nothing keeps
answering 503 for ever. Under `support-router serve` it also stops the gateway, which
exits 3 (router/gateway/server.py): workers that cannot start are not restarted in turn.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from router.app.bootstrap import build_services, ensure_trained
from router.app.services import Services
from router.errors import SupportRouterError
from router.gateway.errors import error_response
from router.gateway.server import START_FAILED_EXIT_CODE, report_start_failure
from router.settings import Settings

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 5
OPEN_WHILE_STARTING = frozenset({"/healthz", "/metrics", "/docs", "/docs/oauth2-redirect",
                                 "/redoc", "/openapi.json"})
"""Paths that need no services: answered normally while the gateway starts."""


@dataclass
class StartupState:
    """What a gateway that is not serving yet waits for (empty once it serves)."""

    waiting_for: list[str] = field(default_factory=list)


def start_in_background(settings: Settings, missing: list[str], state: StartupState,
                        started: Callable[[Services], None]) -> threading.Thread:
    """Train what is `missing`, build the services, hand them to `started`; in a thread."""
    state.waiting_for = [f"{backend} model training" for backend in missing]

    def run() -> None:
        try:
            for backend in missing:
                ensure_trained(settings, backend)
            state.waiting_for = ["model loading"]
            started(build_services(settings, join_cascade=True))
            state.waiting_for = []
        except BaseException as exc:
            # Our errors say what to fix (a missing data folder, a bad artifact); others
            # are named by class, their traceback follows either way.
            reason = (f"{exc.code}: {exc.message}" if isinstance(exc, SupportRouterError)
                      else type(exc).__name__)
            logger.critical("the gateway could not start (%s); this process exits with %d",
                            reason, START_FAILED_EXIT_CODE, exc_info=True)
            for handler in logging.getLogger().handlers:
                handler.flush()
            report_start_failure(reason)
            os._exit(START_FAILED_EXIT_CODE)

    thread = threading.Thread(target=run, name="gateway-start-up", daemon=True)
    thread.start()
    return thread


class StartupGate:
    """ASGI middleware: while the app has no services, answer for it (see module doc).

    Once the services are there it only passes requests on: one attribute read.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._open = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._open or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        if getattr(state, "services", None) is not None:
            self._open = True
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in OPEN_WHILE_STARTING:
            await self.app(scope, receive, send)
            return
        startup: StartupState = getattr(state, "startup", None) or StartupState(["start-up"])
        waiting_for = list(startup.waiting_for) or ["start-up"]
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if path == "/readyz":
            response = JSONResponse({"ready": False, "status": "starting",
                                     "waiting_for": waiting_for}, 503, headers)
        else:
            response = error_response(
                Request(scope), 503, "starting",
                f"the gateway is starting (waiting for {', '.join(waiting_for)}); retry "
                f"after {RETRY_AFTER_S} s", headers)
        await response(scope, receive, send)

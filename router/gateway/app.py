"""The FastAPI gateway: a thin HTTP layer over the router service and the handlers."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI

from router.app.bootstrap import build_services, models_to_train
from router.app.services import Services
from router.errors import SupportRouterError
from router.gateway.console import CONSOLE_PREFIX, console_router
from router.gateway.console.errors import error_page as console_error_page
from router.gateway.console.errors import handle_console_error
from router.gateway.errors import ERROR_RESPONSES, error_responses, install_error_handlers
from router.gateway.middleware.access import install_access
from router.gateway.middleware.body_limits import RequestLimits
from router.gateway.middleware.forwarded import ForwardedHeaders
from router.gateway.middleware.observability import ObservabilityMiddleware
from router.gateway.routes import (
    admin,
    approvals,
    cases,
    docs,
    experiments,
    handoffs,
    health,
    messages,
    route,
)
from router.gateway.routes import metrics as metrics_route
from router.gateway.server import report_start_failure
from router.gateway.startup import StartupGate, StartupState, start_in_background
from router.settings import Settings, get_settings
from router.telemetry.logs import install_logging

# The error statuses each router's handlers can answer with (router.errors), documented in
# OpenAPI next to ERROR_RESPONSES (body and parameter checks, every route).
ROUTER_ERRORS: list[tuple[APIRouter, dict[int | str, dict[str, Any]]]] = [
    (health.router, {503: {"description": "`/readyz`: not ready (`status: not_ready`)"}}),
    (route.router, error_responses(503)),
    (messages.router, error_responses(404, 503)),
    (approvals.router, error_responses(404, 409, 503)),
    (cases.router, error_responses(404)),
    (handoffs.router, error_responses(404, 409)),
    (admin.router, error_responses(409)),
    (experiments.router, error_responses(404, 409)),
]
ROUTERS = [
    health.router,
    metrics_route.router,
    route.router,
    messages.router,
    approvals.router,
    cases.router,
    handoffs.router,
    admin.router,
    experiments.router,
]


def create_app(settings: Settings | None = None, *, services: Services | None = None,
               json_logs: bool = False, freeze_heap: bool = False,
               background_start: bool = False) -> FastAPI:
    """Build the app; services (model, policy, database) are built at start-up, not import.

    `json_logs=True` (the served app, `router.gateway.asgi`) installs the JSON log handler
    on the root logger while the app runs (router/telemetry/logs.py). Off by default, because the
    root logger belongs to the process: an app run inside a CLI command (`tasks run`) or
    a test must not start writing the process's log lines to stderr.

    `freeze_heap=True` (also the served app) moves everything alive after start-up — the
    model's vocabulary and weights, millions of long-lived objects — out of the cyclic
    garbage collector's reach (`gc.freeze()`). Otherwise every full collection walks
    them all, a pause of tens of milliseconds that lands on whichever requests are in
    flight: most of the served p99. Process-wide, so not for apps built inside tests.

    `background_start=True` (the served app): when a model must be trained first, start
    in a thread and let `StartupGate` answer meanwhile (router/gateway/startup.py); a
    start that fails there ends the process.
    """

    def started(app: FastAPI, built: Services) -> None:
        app.state.services = built
        install_access(app)
        if freeze_heap:
            gc.collect()
            gc.freeze()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        chosen = services.settings if services is not None else settings or get_settings()
        undo_logging = install_logging(chosen) if json_logs else lambda: None
        missing = models_to_train(chosen) if services is None and background_start else []
        if missing:
            start_in_background(chosen, missing, app.state.startup,
                                lambda built: started(app, built))
        else:
            try:
                started(app, services if services is not None
                        else build_services(chosen, join_cascade=True))
            except SupportRouterError as exc:
                # Every replacement worker would fail the same way: stop `serve` instead.
                report_start_failure(f"{exc.code}: {exc.message}")
                raise
        yield
        built = getattr(app.state, "services", None)
        if built is not None:
            await built.router.drain_shadows()  # jobs still on their way to Redis
            built.close()
        access = getattr(app.state, "access", None)
        if access is not None and access.limiter is not None:
            await access.limiter.aclose()  # the shared limiter's Redis connections
        undo_logging()  # the root logger is process-wide: leave it as it was found

    app = FastAPI(
        title="support-router",
        version="0.1.0",
        summary="Routes support messages with a calibrated decision model.",
        lifespan=lifespan,
        # FastAPI's pages load their assets from CDNs; ours serve them (routes/docs.py).
        docs_url=None,
        redoc_url=None,
    )
    app.state.startup = StartupState()
    if services is not None:
        app.state.services = services
    install_error_handlers(app, pages=(CONSOLE_PREFIX + "/", handle_console_error))
    # Added before the request-id middleware, so it runs inside it: its refusals carry
    # the request id too. Bodies are checked before routing: nothing is written.
    app.add_middleware(RequestLimits, form_path_prefixes=(CONSOLE_PREFIX + "/",),
                       form_error=console_error_page)
    # The caller's address for the keyless rate limit: the socket peer, unless the peer is
    # a configured proxy (router/gateway/middleware/forwarded.py).
    app.add_middleware(ForwardedHeaders)
    # Outside the limits: while the services are not built yet, it answers for the app.
    app.add_middleware(StartupGate)

    # Request id, access log line and latency histogram (middleware/observability.py);
    # added last, so it is the outermost of ours and sees every refusal of the others.
    app.add_middleware(ObservabilityMiddleware)

    for api_router in ROUTERS:
        responses = dict(ERROR_RESPONSES)
        for known, extra in ROUTER_ERRORS:
            if known is api_router:
                responses |= extra
        app.include_router(api_router, responses=responses)
    app.include_router(docs.router)
    app.include_router(console_router())
    return app

"""The FastAPI gateway: a thin HTTP layer over the router service and the handlers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from router.bootstrap import build_services
from router.gateway.deps import Services
from router.gateway.errors import install_error_handlers
from router.gateway.routes import admin, approvals, cases, handoffs, health, messages, route
from router.settings import Settings, get_settings

ROUTERS = [
    health.router,
    route.router,
    messages.router,
    approvals.router,
    cases.router,
    handoffs.router,
    admin.router,
]
REQUEST_ID_HEADER = "X-Request-ID"


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """Build the app; services (model, policy, database) are built at start-up, not import."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is None:
            app.state.services = build_services(settings or get_settings())
        yield
        app.state.services.router.close()
        app.state.services.engine.dispose()

    app = FastAPI(
        title="support-router",
        version="0.1.0",
        summary="Routes support messages with a calibrated decision model.",
        lifespan=lifespan,
    )
    if services is not None:
        app.state.services = services
    install_error_handlers(app)

    @app.middleware("http")
    async def request_id(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request.state.request_id = uuid.uuid4().hex
        response = await call_next(request)
        response.headers[REQUEST_ID_HEADER] = request.state.request_id
        return response

    for api_router in ROUTERS:
        app.include_router(api_router)
    return app

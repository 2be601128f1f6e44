"""The supervisor's pages: refunds held for a decision, oldest first."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from router.gateway.console.deps import SupervisorSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import render
from router.gateway.deps import ServicesDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/approvals")
async def approvals(request: Request, session: SupervisorSession,
                    services: ServicesDep) -> Response:
    """Held refunds, oldest first."""
    held = await run_in_threadpool(services.desk.list_approvals, "held")
    return render(request, "approvals.html", approvals=held)

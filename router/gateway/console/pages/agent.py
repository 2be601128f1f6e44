"""The agent's pages: the hand-off queue, a page at a time."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from router.gateway.console.deps import AgentSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import render
from router.gateway.deps import ServicesDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/handoffs")
async def handoffs(request: Request, session: AgentSession, services: ServicesDep) -> Response:
    """Cases waiting for a person, oldest first."""
    page = await run_in_threadpool(lambda: services.desk.list_handoffs(limit=50))
    return render(request, "handoffs.html", page=page)

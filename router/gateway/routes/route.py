from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from router.contracts import Decision
from router.gateway.deps import ServicesDep
from router.gateway.schemas import RouteIn
from router.rules import RouteRequest

router = APIRouter(tags=["routing"])


@router.post("/v1/route", response_model=Decision)
async def route_message(body: RouteIn, services: ServicesDep, request: Request) -> Decision:
    """Score one message and decide its route (or to clarify). The decision is logged."""
    route_request = RouteRequest(
        text=body.text, case_id=body.case_id, customer=body.customer, kind=body.kind
    )
    return await run_in_threadpool(
        services.router.route, route_request, request_id=request.state.request_id
    )

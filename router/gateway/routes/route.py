"""`POST /v1/route`: the routing decision only, logged before it is returned.

The hot path of the gateway, so it avoids two per-request costs that dominated its
profile: a thread hop (`run_in_threadpool`) for a fraction of a millisecond of scoring,
and FastAPI re-validating the returned `Decision` against `response_model` before
serialising it. The decision is serialised once by pydantic's own JSON encoder; the
declared `response_model` still documents the body in OpenAPI.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from router.contracts import Decision
from router.gateway.deps import ServicesDep, require_role
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.gateway.schemas import RouteIn
from router.routing.rules import RouteRequest

router = APIRouter(tags=["routing"], dependencies=[Depends(require_role("gateway"))],
                   responses=ACCESS_RESPONSES)


@router.post("/v1/route", response_model=Decision)
async def route_message(body: RouteIn, services: ServicesDep, request: Request) -> Response:
    """Score one message and decide its route (or to clarify). The decision is logged."""
    route_request = RouteRequest(
        text=body.text, case_id=body.case_id, customer=body.customer, kind=body.kind
    )
    decision = await services.router.route_async(
        route_request, request_id=request.state.request_id
    )
    return Response(decision.model_dump_json(), media_type="application/json")

"""`POST /v1/messages`: route one customer message, act on it, reply.

A plain `def` on purpose: the handlers do several blocking database transactions (and,
with a chat model configured, a remote call), which belong on a worker thread, not the
event loop. The reply is serialised once from the validated `MessageOut` instead of
letting FastAPI validate the returned object against `response_model` a second time
(that re-validation was about 7% of the endpoint's CPU in a profile under load); the
declared `response_model` still documents the body in OpenAPI.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from router.decision_log import DecisionLog
from router.gateway.access import ACCESS_RESPONSES
from router.gateway.deps import ServicesDep, require_role
from router.gateway.desk_schemas import MessageIn, MessageOut
from router.rules import RouteRequest

router = APIRouter(tags=["messages"], dependencies=[Depends(require_role("gateway"))],
                   responses=ACCESS_RESPONSES)


@router.post("/v1/messages", response_model=MessageOut)
def post_message(body: MessageIn, services: ServicesDep, request: Request) -> Response:
    """Route one customer message, act on it, and reply; later messages continue the case."""
    desk = services.desk
    facts = desk.prepare(body.text, case_id=body.case_id, customer=body.customer)
    route_request = RouteRequest(
        text=body.text, case_id=facts.case_id, customer=body.customer, kind=body.kind,
        case_route=facts.case_route, case_has_held_refund=facts.case_has_held_refund,
        earlier_texts=facts.clarified_texts,
    )
    decision = services.router.route(route_request, request_id=request.state.request_id)
    outcome = desk.handle_message(body.text, facts.case_id, body.customer, decision,
                                  facts=facts)
    DecisionLog(services.engine).set_outcome(decision.request_id, outcome.status)
    reply = MessageOut.model_validate(outcome, from_attributes=True)
    return Response(reply.model_dump_json(), media_type="application/json")

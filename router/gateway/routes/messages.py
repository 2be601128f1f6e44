from __future__ import annotations

from fastapi import APIRouter, Request

from router.decision_log import DecisionLog
from router.gateway.deps import ServicesDep
from router.gateway.desk_schemas import MessageIn, MessageOut
from router.rules import RouteRequest

router = APIRouter(tags=["messages"])


@router.post("/v1/messages", response_model=MessageOut)
def post_message(body: MessageIn, services: ServicesDep, request: Request) -> MessageOut:
    """Route one customer message, act on it, and reply; later messages continue the case."""
    desk = services.desk
    facts = desk.prepare(body.text, case_id=body.case_id, customer=body.customer)
    route_request = RouteRequest(
        text=body.text, case_id=facts.case_id, customer=body.customer, kind=body.kind,
        case_route=facts.case_route, case_has_held_refund=facts.case_has_held_refund,
    )
    decision = services.router.route(route_request, request_id=request.state.request_id)
    outcome = desk.handle_message(body.text, facts.case_id, body.customer, decision,
                                  facts=facts)
    DecisionLog(services.engine).set_outcome(decision.request_id, outcome.status)
    return MessageOut.model_validate(outcome, from_attributes=True)

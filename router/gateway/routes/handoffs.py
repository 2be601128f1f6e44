"""The human queue: cases handed off to people, and an agent's reply to one."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from router.gateway.deps import ServicesDep, require_role
from router.gateway.desk_schemas import HandoffReplyIn, HandoffReplyOut, HandoffRow
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.gateway.schemas import Identifier

router = APIRouter(tags=["handoffs"], dependencies=[Depends(require_role("agent"))],
                   responses=ACCESS_RESPONSES)


@router.get("/v1/handoffs", response_model=list[HandoffRow])
def list_handoffs(services: ServicesDep) -> list[HandoffRow]:
    """Cases waiting for a person, oldest first."""
    return [HandoffRow.model_validate(row) for row in services.desk.list_handoffs()]


@router.post("/v1/handoffs/{case_id}/reply", response_model=HandoffReplyOut)
def reply_to_handoff(case_id: Identifier, body: HandoffReplyIn,
                     services: ServicesDep) -> HandoffReplyOut:
    """Send a person's reply to the customer on the case; the case is then resolved."""
    outcome = services.desk.reply_handoff(case_id, body.agent, body.text)
    return HandoffReplyOut.model_validate(outcome, from_attributes=True)

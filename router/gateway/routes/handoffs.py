"""The human queue: cases handed off to people, a page at a time, and an agent's reply.

The replier recorded is the authenticated caller (`PrincipalDep`); the body's `agent`
is only a display name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from handlers.fallback.handoffs import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from router.gateway.deps import PrincipalDep, ServicesDep, require_role
from router.gateway.desk_schemas import HandoffPageOut, HandoffReplyIn, HandoffReplyOut
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.gateway.schemas import Identifier

router = APIRouter(tags=["handoffs"], dependencies=[Depends(require_role("agent"))],
                   responses=ACCESS_RESPONSES)


@router.get("/v1/handoffs", response_model=HandoffPageOut)
def list_handoffs(
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Rows per page.")]
    = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_-]+$",
                                        description="`next_cursor` of the previous page.")]
    = None,
    older_than_s: Annotated[float | None, Query(ge=0, le=10 ** 9, description=(
        "Only cases waiting at least this many seconds."))] = None,
    newer_than_s: Annotated[float | None, Query(ge=0, le=10 ** 9, description=(
        "Only cases waiting at most this many seconds."))] = None,
    lang: Annotated[str | None, Query(pattern=r"^[a-z]{2,3}$", description=(
        "Only cases whose newest customer message is in this language (`en`, `de`, …, "
        "`und`)."))] = None,
) -> HandoffPageOut:
    """Cases waiting for a person, oldest first, one page at a time."""
    page = services.desk.list_handoffs(limit=limit, cursor=cursor, older_than_s=older_than_s,
                                       newer_than_s=newer_than_s, lang=lang)
    return HandoffPageOut.model_validate(page, from_attributes=True)


@router.post("/v1/handoffs/{case_id}/reply", response_model=HandoffReplyOut)
def reply_to_handoff(case_id: Identifier, body: HandoffReplyIn, services: ServicesDep,
                     principal: PrincipalDep) -> HandoffReplyOut:
    """Send a person's reply to the customer on the case; the case is then resolved."""
    outcome = services.desk.reply_handoff(case_id, body.agent, body.text, principal=principal)
    return HandoffReplyOut.model_validate(outcome, from_attributes=True)

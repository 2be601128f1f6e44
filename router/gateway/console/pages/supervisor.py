"""The supervisor's pages: refunds held for a decision, each with its case, and the decision.

A decision is made once whatever happens: the desk's `decide_approval` decides under the
order's lock, so of two supervisors deciding the same refund at once one decides and the
other is told who did (409 `already_decided`, on the refund's own page, not an error
page). The decider recorded is the session's key name; the note stays in the case's
history for colleagues.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from router.errors import Conflict, InvalidInput
from router.gateway.console.deps import CheckedForm, SupervisorSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.deps import ServicesDep
from router.gateway.schemas import Identifier

router = APIRouter(route_class=ConsoleRoute)

DECISIONS = ("approve", "reject")


@router.get("/approvals")
async def approvals(request: Request, session: SupervisorSession,
                    services: ServicesDep) -> Response:
    """Held refunds, oldest first."""
    held = await run_in_threadpool(services.desk.list_approvals, "held")
    return render(request, "approvals.html", approvals=held)


def _told(review: dict[str, Any]) -> str | None:
    """The newest reply the desk sent on the case after a supervisor's decision."""
    decided = {"refunds.decide", "refunds.close"}
    actions = [a for a in review["case"]["actions"] if a["name"] in decided
               and a.get("artifacts", {}).get("operation") == review["approval"]["operation"]]
    if not actions:
        return None
    replies = [m for m in review["case"]["messages"]
               if m["role"] != "customer" and m["created_at"] >= actions[-1]["created_at"]]
    return replies[0]["text"] if replies else None


async def _review_page(request: Request, services: ServicesDep, operation: str, *,
                       status_code: int = 200, notice: dict[str, str] | None = None,
                       ) -> Response:
    review = await run_in_threadpool(services.desk.review_approval, operation)
    return render(request, "approval.html", status_code=status_code, review=review,
                  approval=review["approval"], case=review["case"], told=_told(review),
                  notice=notice)


@router.get("/approvals/{operation}")
async def approval(operation: Identifier, request: Request, session: SupervisorSession,
                   services: ServicesDep) -> Response:
    """One held refund with its case, order and earlier refunds; the decision form."""
    return await _review_page(request, services, operation)


@router.post("/approvals/{operation}/decision")
async def decide(operation: Identifier, request: Request, session: SupervisorSession,
                 form: CheckedForm, services: ServicesDep) -> Response:
    """Approve or reject, once; a decision someone else made first is shown, not repeated."""
    decision = form.get("decision", "")
    if decision not in DECISIONS:
        raise InvalidInput(f"decision must be approve or reject, not {decision!r}",
                           code="invalid_decision")
    try:
        outcome = await run_in_threadpool(
            lambda: services.desk.decide_approval(
                operation, decision, session.key_name, principal=session.key_name,
                note=form.get("note", "")))
    except Conflict as conflict:
        return await _review_page(request, services, operation, status_code=409,
                                  notice={"code": conflict.code, "message": conflict.message})
    if outcome.replayed and outcome.decided_by != session.key_name:
        past = "approved" if outcome.decision == "approve" else "rejected"
        return await _review_page(request, services, operation, status_code=409, notice={
            "code": "already_decided",
            "message": f"{operation} was already {past} by {outcome.decided_by}; "
                       "your decision changed nothing"})
    return RedirectResponse(f"{console_base(request)}/approvals/{operation}", status_code=303,
                            headers=SECURITY_HEADERS)

"""Refunds held for a supervisor, and a supervisor's decision on one.

The decider recorded is the authenticated caller (`PrincipalDep`: the API key's name, or
`anonymous@loopback` without keys); the body's `supervisor` is only a display name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from router.gateway.deps import PrincipalDep, ServicesDep, require_role
from router.gateway.desk_schemas import ApprovalDecisionIn, ApprovalOut, ApprovalRow
from router.gateway.middleware.access import ACCESS_RESPONSES

router = APIRouter(tags=["approvals"], dependencies=[Depends(require_role("supervisor"))],
                   responses=ACCESS_RESPONSES)


@router.get("/v1/approvals", response_model=list[ApprovalRow])
def list_approvals(
    services: ServicesDep,
    status: Annotated[str, Query(description="held | approved | rejected | all")] = "held",
) -> list[ApprovalRow]:
    """Refunds above the limit, by supervisor state (default: still held)."""
    return [ApprovalRow.model_validate(row) for row in services.desk.list_approvals(status)]


@router.post("/v1/approvals/{operation}/decision", response_model=ApprovalOut)
def decide_approval(operation: str, body: ApprovalDecisionIn, services: ServicesDep,
                    principal: PrincipalDep) -> ApprovalOut:
    """Approve (issue exactly once) or reject (never issue) a held refund."""
    outcome = services.desk.decide_approval(operation, body.decision, body.supervisor,
                                            principal=principal, note=body.note)
    return ApprovalOut.model_validate(outcome, from_attributes=True)

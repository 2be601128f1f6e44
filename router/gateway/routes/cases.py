from __future__ import annotations

from fastapi import APIRouter

from router.gateway.deps import ServicesDep
from router.gateway.desk_schemas import CaseOut

router = APIRouter(tags=["cases"])


@router.get("/v1/cases/{case_id}", response_model=CaseOut)
def get_case(case_id: str, services: ServicesDep) -> CaseOut:
    """The case with its messages, the router's decisions, the actions and refund operations."""
    return CaseOut.model_validate(services.desk.get_case(case_id))

from __future__ import annotations

from fastapi import APIRouter, Depends

from router.gateway.deps import ServicesDep, require_role
from router.gateway.desk_schemas import CaseOut
from router.gateway.middleware.access import ACCESS_RESPONSES

router = APIRouter(tags=["cases"], dependencies=[Depends(require_role("gateway"))],
                   responses=ACCESS_RESPONSES)


@router.get("/v1/cases/{case_id}", response_model=CaseOut)
def get_case(case_id: str, services: ServicesDep) -> CaseOut:
    """The case with its messages, the router's decisions, the actions and refund operations."""
    return CaseOut.model_validate(services.desk.get_case(case_id))

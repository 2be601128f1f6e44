from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from router.gateway.deps import ServicesDep

logger = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(services: ServicesDep) -> JSONResponse:
    """Ready only when the policy and model are loaded and the database answers."""
    checks = {"model_and_policy": services.ready, "database": False}
    try:
        with services.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = True
    except Exception:  # noqa: BLE001 - any failure means "not ready"
        logger.warning("readiness: the database did not answer", exc_info=True)
    ready = all(checks.values())
    policy = services.router.primary.policy
    body = {
        "status": "ready" if ready else "not_ready",
        "checks": checks,
        "policy_version": policy.version,
        "model": services.router.primary.model.name,
    }
    return JSONResponse(body, status_code=200 if ready else 503)

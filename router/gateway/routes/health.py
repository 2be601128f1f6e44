from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from router.gateway.deps import ServicesDep
from router.gateway.errors import describe_database_error
from router.storage.db import current_revision, head_revision

logger = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up (also while it starts: see router/gateway/startup.py)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(services: ServicesDep) -> JSONResponse:
    """Ready only when the policy and model are loaded, the database answers and its
    schema is at the newest migration (a database recreated empty answers, but every
    request on it would fail)."""
    checks = {"model_and_policy": services.ready, "database": False, "schema": False}
    revision = None
    try:
        revision = current_revision(services.engine)
        checks["database"] = True
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        described = (describe_database_error(exc) if isinstance(exc, SQLAlchemyError)
                     else type(exc).__name__)
        logger.warning("readiness: the database did not answer: %s", described)
    head = head_revision()
    checks["schema"] = checks["database"] and revision == head
    if checks["database"] and not checks["schema"]:
        logger.warning("readiness: the database schema is at %s, this code needs %s",
                       revision or "nothing (empty)", head)
    ready = all(checks.values())
    policy = services.router.primary.policy
    body = {
        "ready": ready,
        "status": "ready" if ready else "not_ready",
        "checks": checks,
        "schema_revision": revision,
        "policy_version": policy.version,
        "model": services.router.primary.model.name,
        # Ready meanwhile: e.g. the cascade's e5 stage training while the local model serves.
        "pending": services.pending,
    }
    return JSONResponse(body, status_code=200 if ready else 503)

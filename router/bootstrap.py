"""Build the running system from settings: engine, schema, model, policy, services.

The local model is trained on first start when its artifact is missing, so a fresh
clone serves without a separate training step.
"""

from __future__ import annotations

import logging

from router.db import make_engine
from router.errors import ArtifactError
from router.decision_log import DecisionLog
from router.gateway.deps import Services
from router.models.local import LocalRouteModel
from router.policy import load_policy
from router.service import BoundModel, RouterService
from router.settings import Settings
from router.training import train_local

logger = logging.getLogger(__name__)


def load_local(settings: Settings) -> BoundModel:
    """The embedded model and its policy, trained from `datasets/` if either is missing."""
    if not settings.local_model_path.exists() or not settings.policy_path.exists():
        logger.warning("no local model at %s; training it now", settings.local_model_path)
        train_local(settings.routes_data, settings.model_dir, policy_path=settings.policy_path)
    return BoundModel(LocalRouteModel.load(settings.local_model_path), load_policy(settings.policy_path))


def load_backend(settings: Settings, backend: str) -> BoundModel:
    """A backend with its own policy, for offline tools (eval, score)."""
    if backend == "local":
        return load_local(settings)
    raise ArtifactError(f"unknown backend {backend!r}; choose local, e5 or typesafe")


def build_router_offline(settings: Settings) -> RouterService:
    """A router for one-off CLI use: decisions go to an in-memory log, not the gateway's."""
    return RouterService(load_backend(settings, settings.backend), DecisionLog(make_engine("sqlite://")))


def build_services(settings: Settings) -> Services:
    engine = make_engine(settings.resolved_database_url)
    log = DecisionLog(engine)
    log.create_schema()
    router = RouterService(load_local(settings), log)
    services = Services(settings=settings, engine=engine, router=router)
    services.ready = True
    return services

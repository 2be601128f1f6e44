"""Admin endpoints: publish a policy version or roll back, without dropping requests.

The new policy is validated against the running model (409 `policy_model_mismatch`),
stored and made active on disk (`router.storage.policy_store`), then swapped into the router
service; requests already being decided keep the policy they started with.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from router.contracts import Policy
from router.gateway.deps import ServicesDep, require_role
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.routing.policy import running_model
from router.storage.policy_store import (
    PolicyStore,
    PolicySwitch,
    active_policy_path,
    ensure_policy_fits,
    load_policy,
)

router = APIRouter(prefix="/v1/admin", tags=["admin"],
                   dependencies=[Depends(require_role("admin"))],
                   responses=ACCESS_RESPONSES)


class PolicySwitchOut(BaseModel):
    action: str
    version: str
    previous_version: str | None
    threshold: float


def _switch(services: ServicesDep, change: str, policy: Policy | None = None) -> PolicySwitchOut:
    bound = services.router.primary
    running = running_model(bound.model, bound.policy)
    store = PolicyStore(active_policy_path(services.settings))

    def accept(candidate: Policy) -> None:
        ensure_policy_fits(candidate, running)

    if change == "publish" and policy is not None:
        switch: PolicySwitch = store.publish(policy, accept=accept)
    else:
        switch = store.rollback(accept=accept)
    services.router.swap_policy(switch.policy)
    return PolicySwitchOut(action=switch.action, version=switch.policy.version,
                           previous_version=switch.previous_version,
                           threshold=switch.policy.threshold)


@router.post("/policy", response_model=PolicySwitchOut)
def publish_policy(body: Policy, services: ServicesDep) -> PolicySwitchOut:
    """Publish a policy artifact for the running model and switch to it."""
    return _switch(services, "publish", body)


@router.post("/policy/rollback", response_model=PolicySwitchOut)
def rollback_policy(services: ServicesDep) -> PolicySwitchOut:
    """Return to the policy version that was active before the current one."""
    return _switch(services, "rollback")


@router.post("/policy/reload", response_model=PolicySwitchOut)
def reload_policy(services: ServicesDep) -> PolicySwitchOut:
    """Re-read the active policy file (after `support-router policy rollback|publish`)."""
    bound = services.router.primary
    policy = load_policy(active_policy_path(services.settings))
    ensure_policy_fits(policy, running_model(bound.model, bound.policy))
    previous = services.router.swap_policy(policy)
    return PolicySwitchOut(action="reload", version=policy.version,
                           previous_version=previous.version, threshold=policy.threshold)

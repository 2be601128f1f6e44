"""Admin endpoints: list the policy versions, publish one or roll back, without dropping
requests.

Publish and rollback call the policy follower (`router.app.policy_sync`), as the
console does, so each is checked the same way and recorded under the calling key's name.

A policy becomes active only once it has passed three checks, whichever way it comes
(publish, rollback, reload): its contract (`router.contracts.Policy`: each calibrator kind
with its parameters, thresholds in [0, 1], the version's pattern), the running model
(409 `policy_model_mismatch`), and deciding fixed messages on the running model
(`router.routing.policy_check`). A policy that fails the first or the last is refused
with 422 `invalid_policy`, the message naming the field; a refused one changes nothing,
in the database or in memory. Then it is stored and made active in the shared database
(`router.storage.policy_db`, one transaction) and swapped into this worker's router
service at once; every other worker and host swaps it in within the poll interval
(`router.app.policy_sync`). Requests already being decided keep the policy they started
with.

An active version that does not load need not block a publish or rollback: replacing a
broken policy is the case they are for.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from router.app.policy_views import PolicyVersionsOut, read_policy_versions
from router.contracts import Policy
from router.errors import InvalidPolicy
from router.gateway.deps import PrincipalDep, ServicesDep, require_role
from router.gateway.errors import refusing_route
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.storage.policy_store import PolicySwitch

PolicyRoute = refusing_route(lambda message: InvalidPolicy(f"not a valid policy: {message}"))
"""A body that does not fit `Policy` is an invalid policy (422 `invalid_policy`), not
just an invalid request: publishing clients can tell a refused policy apart."""


router = APIRouter(prefix="/v1/admin", tags=["admin"],
                   dependencies=[Depends(require_role("admin"))],
                   responses=ACCESS_RESPONSES, route_class=PolicyRoute)


class PolicySwitchOut(BaseModel):
    action: str
    version: str
    previous_version: str | None
    threshold: float


def _out(switch: PolicySwitch) -> PolicySwitchOut:
    return PolicySwitchOut(action=switch.action, version=switch.policy.version,
                           previous_version=switch.previous_version,
                           threshold=switch.policy.threshold)


@router.get("/policy", response_model=PolicyVersionsOut)
def list_policies(services: ServicesDep) -> PolicyVersionsOut:
    """The primary backend's policy versions (newest first, each with its guarantee and
    held-out figures, who last made it active and when), the active one, the one a
    rollback returns to, and the history, newest first."""
    return read_policy_versions(services.policies.db,
                                served_version=services.router.primary.policy.version)


@router.post("/policy", response_model=PolicySwitchOut)
def publish_policy(body: Policy, services: ServicesDep,
                   principal: PrincipalDep) -> PolicySwitchOut:
    """Publish a policy artifact for the running model and switch to it.

    Refused with 422 `invalid_policy` (naming the field) when it fails its contract or
    deciding fixed messages with it on the running model does not give probabilities;
    409 `policy_model_mismatch` when it is for another model. Nothing changes then.
    """
    return _out(services.policies.publish(body, by=principal))


@router.post("/policy/rollback", response_model=PolicySwitchOut)
def rollback_policy(services: ServicesDep, principal: PrincipalDep) -> PolicySwitchOut:
    """Return to the policy version that was active before the current one (checked as a
    published one is)."""
    return _out(services.policies.rollback(by=principal))


@router.post("/policy/reload", response_model=PolicySwitchOut)
def reload_policy(services: ServicesDep) -> PolicySwitchOut:
    """Serve the database's active policy in this worker now (every worker does within
    the poll interval anyway), checked as a published one is; a refused one leaves the
    running policy in place."""
    policy, previous = services.policies.reload()
    return PolicySwitchOut(action="reload", version=policy.version,
                           previous_version=previous.version, threshold=policy.threshold)

"""What a person reads about the policy versions: the read model of the console's policy
page and of `GET /v1/admin/policy`.

Built from the shared database (`router.storage.policy_db`), not from this worker's
memory, so every worker answers the same; what this worker serves is shown next to it
(`served_version`), since a worker follows the database only within the poll interval.
`policy_versions_view` is pure over what the database returned; `read_policy_versions`
is the one read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from router.contracts import Guarantee, Policy, PolicyData, PolicyModel
from router.storage.policy_db import PolicyDB, StoredVersion, replay_history

HELD_OUT_RATES = ("misroute_rate_routed", "coverage", "clarify_rate", "unclear_recall",
                  "misroute_rate", "correct_outcome_rate")
"""The routing rates of a policy's test part, in the order the page lists them."""


class PolicyEventOut(BaseModel):
    """One adopt, publish or rollback, and who made it (None: an adoption, or an event
    recorded before who was kept)."""

    at: datetime
    action: Literal["adopt", "publish", "rollback"]
    version: str
    previous: str | None
    by: str | None


class HeldOutRate(BaseModel):
    """One routing rate on the policy's held-out test part, with its 95% interval."""

    name: str
    value: float
    low: float | None
    high: float | None


class HeldOutFigures(BaseModel):
    """What `calibrate` measured on the test part it never fitted or certified on."""

    n: int
    accuracy: float | None
    rates: list[HeldOutRate]
    bootstrap: str | None

    def rate(self, name: str) -> HeldOutRate | None:
        """One rate by name (None when the policy did not measure it)."""
        return next((r for r in self.rates if r.name == name), None)


class PolicyVersionOut(BaseModel):
    version: str
    active: bool
    stored_at: datetime
    published_by: str | None
    """Who last made it active (publish or rollback), None for an adoption."""
    published_at: datetime | None
    model: PolicyModel
    calibrator: str
    threshold: float
    per_route_thresholds: dict[str, float] | None
    min_margin: float | None
    guarantee: Guarantee | None
    data: PolicyData
    held_out: HeldOutFigures | None
    """None: the policy carries no test-part figures (the default one `train` writes)."""
    notes: str


class UnreadableVersionOut(BaseModel):
    """A stored version that does not load (edited by hand, say): what is wrong with it."""

    version: str
    active: bool
    stored_at: datetime
    problem: str


class PolicyVersionsOut(BaseModel):
    slot: str
    """The primary backend whose versions these are."""
    active_version: str | None
    served_version: str
    """What the worker that answered serves (the active one, within the poll interval)."""
    rollback_to: str | None
    """The version a rollback would re-activate; None when there is none."""
    versions: list[PolicyVersionOut]
    """Newest stored first."""
    unreadable: list[UnreadableVersionOut] = []
    """Stored versions that do not load; publishing a valid one or rolling back replaces
    a broken active one."""
    history: list[PolicyEventOut]
    """Newest first."""

    @property
    def active(self) -> PolicyVersionOut | None:
        return next((v for v in self.versions if v.active), None)

    def version(self, name: str | None) -> PolicyVersionOut | None:
        return next((v for v in self.versions if v.version == name), None)


def held_out_figures(metrics_test: dict[str, Any]) -> HeldOutFigures | None:
    """The policy's test-part figures as the page shows them (None if it has none)."""
    routing = metrics_test.get("routing")
    if not metrics_test.get("n") or not isinstance(routing, dict):
        return None
    rates = []
    for name in HELD_OUT_RATES:
        entry = routing.get(name)
        if isinstance(entry, dict) and "value" in entry:
            ci = entry.get("ci95") or [None, None]
            rates.append(HeldOutRate(name=name, value=float(entry["value"]),
                                     low=ci[0], high=ci[1]))
    accuracy = metrics_test.get("accuracy")
    return HeldOutFigures(n=int(metrics_test["n"]), rates=rates,
                          accuracy=float(accuracy) if accuracy is not None else None,
                          bootstrap=metrics_test.get("bootstrap"))


def _version_out(policy: Policy, stored_at: datetime, *, active: bool,
                 events: list[PolicyEventOut]) -> PolicyVersionOut:
    made_active = [e for e in events if e.version == policy.version]
    last = made_active[-1] if made_active else None
    return PolicyVersionOut(
        version=policy.version, active=active, stored_at=stored_at,
        published_by=last.by if last else None, published_at=last.at if last else None,
        model=policy.model, calibrator=policy.calibrator.kind, threshold=policy.threshold,
        per_route_thresholds=({str(r): t for r, t in policy.per_route_thresholds.items()}
                              if policy.per_route_thresholds else None),
        min_margin=policy.min_margin, guarantee=policy.guarantee, data=policy.data,
        held_out=held_out_figures(policy.metrics_test), notes=policy.notes)


def policy_versions_view(*, slot: str, versions: list[StoredVersion],
                         history: list[dict[str, Any]], served_version: str
                         ) -> PolicyVersionsOut:
    """The page's model from the stored versions and the history (oldest first)."""
    events = [PolicyEventOut.model_validate(e) for e in history]
    stack = replay_history(history)
    active = stack[-1] if stack else None
    rows = [_version_out(v.policy, v.stored_at, active=v.version == active, events=events)
            for v in versions if v.policy is not None]
    rows.sort(key=lambda row: row.stored_at, reverse=True)
    unreadable = [UnreadableVersionOut(version=v.version, active=v.version == active,
                                       stored_at=v.stored_at, problem=v.problem or "")
                  for v in versions if v.policy is None]
    return PolicyVersionsOut(slot=slot, active_version=active, served_version=served_version,
                             rollback_to=stack[-2] if len(stack) >= 2 else None,
                             versions=rows, unreadable=unreadable, history=events[::-1])


def read_policy_versions(db: PolicyDB, *, served_version: str) -> PolicyVersionsOut:
    """The versions of `db`'s slot, as the database has them now (one read)."""
    versions, history = db.overview()
    return policy_versions_view(slot=db.slot, versions=versions, history=history,
                                served_version=served_version)

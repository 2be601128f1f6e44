"""The router as one callable: rules, then the decision model under its policy, then the log."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from router.contracts import Decision, Policy
from router.decision_log import DecisionLog
from router.errors import ModelUnavailable
from router.models.base import DecisionModel
from router.policy import decide
from router.rules import DEFAULT_RULES, RouteRequest, Rule, first_rule_hit


@dataclass(frozen=True)
class BoundModel:
    """A decision model and the policy calibrated for it: they are never mixed up."""

    model: DecisionModel
    policy: Policy


def new_request_id() -> str:
    return uuid.uuid4().hex


class RouterService:
    def __init__(
        self,
        primary: BoundModel,
        log: DecisionLog,
        *,
        fallback: BoundModel | None = None,
        rules: Sequence[Rule] = DEFAULT_RULES,
    ) -> None:
        self._primary = primary
        self._fallback = fallback
        self._log = log
        self._rules = tuple(rules)
        self._lock = threading.Lock()

    @property
    def primary(self) -> BoundModel:
        return self._primary

    def swap_policy(self, policy: Policy) -> Policy:
        """Switch the primary model's policy atomically; in-flight requests keep the old one."""
        with self._lock:
            previous = self._primary.policy
            self._primary = BoundModel(self._primary.model, policy)
        return previous

    def decide(self, request: RouteRequest, *, request_id: str | None = None) -> Decision:
        """Decide without logging (used by shadow scoring and offline tools)."""
        request_id = request_id or new_request_id()
        bound = self._primary
        hit = first_rule_hit(request, self._rules)
        if hit is not None:
            return Decision(
                request_id=request_id,
                route=hit.route,
                scores=None,
                threshold=bound.policy.threshold,
                policy_version=bound.policy.version,
                reason=f"rule:{hit.name}",
                model="rules",
            )
        try:
            return decide(bound.model.score(request.text), bound.policy, request_id=request_id)
        except ModelUnavailable:
            if self._fallback is None:
                raise
            fallback = self._fallback
            scores = fallback.model.score(request.text)
            return decide(scores, fallback.policy, request_id=request_id, model_unavailable=True)

    def route(self, request: RouteRequest, *, request_id: str | None = None) -> Decision:
        decision = self.decide(request, request_id=request_id)
        self._log.append(decision, text=request.text, case_id=request.case_id)
        return decision

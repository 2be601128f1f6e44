"""The router as one callable: rules, then the decision model under its policy, then the log.

With an experiment (`router.routing.experiments`), each request is decided by its assigned live
variant's model and policy, logged with the experiment and variant names; shadow variants
score the same request after the live decision is committed, and their decisions go into
the same row's `shadow` column. The response never depends on them. With a
`ShadowEnqueuer` (Redis configured) the request only appends a job to the shadow stream
and `support-router shadow-worker` processes score it (`router.app.shadow_worker`);
without one, a background thread in this process does.

A cascade (`router.routing.cascade`) is one bound model like any other: its stages are
asked in order under its policy's stage thresholds, and the decision carries the
answering stage's model and threshold.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from anyio import to_thread

from router.contracts import Decision, ExperimentConfig, Policy
from router.errors import ModelUnavailable
from router.models.base import DecisionModel
from router.routing.cascade import CascadeModel, score_cascade, stage_policy
from router.routing.experiments import ShadowWorker, assign, assignment_unit
from router.routing.policy import decide
from router.routing.rules import DEFAULT_RULES, RouteRequest, Rule, first_rule_hit
from router.routing.scoring import score_request
from router.routing.shadows import ShadowEnqueuer, sampled
from router.storage.decision_log import CompanionWrite, DecisionLog
from router.telemetry.metrics import count_decision, time_model


@dataclass(frozen=True)
class BoundModel:
    """A decision model and the policy calibrated for it: they are never mixed up."""

    model: DecisionModel
    policy: Policy


@dataclass(frozen=True)
class LiveExperiment:
    """An experiment's configuration with each variant's model and policy loaded."""

    config: ExperimentConfig
    variants: dict[str, BoundModel]
    shadows: dict[str, BoundModel] = field(default_factory=dict)


def new_request_id() -> str:
    return uuid.uuid4().hex


def _assigned(experiment: LiveExperiment, request: RouteRequest, request_id: str) -> str:
    unit = assignment_unit(customer=request.customer, case_id=request.case_id,
                           request_id=request_id)
    return assign(experiment.config, unit).name


def decide_with(bound: BoundModel, request: RouteRequest, request_id: str,
                variant: str | None, *, rules: Sequence[Rule] = DEFAULT_RULES,
                fallback: BoundModel | None = None) -> Decision:
    """One variant's decision: the rules first, then its model under its policy (and the
    fallback's, if given, when the model is unavailable)."""
    hit = first_rule_hit(request, rules)
    if hit is not None:
        return Decision(
            request_id=request_id,
            route=hit.route,
            scores=None,
            threshold=bound.policy.threshold,
            policy_version=bound.policy.version,
            variant=variant,
            reason=f"rule:{hit.name}",
            model="rules",
        )
    try:
        if bound.policy.stages is not None and isinstance(bound.model, CascadeModel):
            with time_model("cascade"):
                answer = score_cascade(bound.model, request, bound.policy.stages)
            return decide(answer.scores, stage_policy(bound.policy, answer.stage),
                          request_id=request_id, variant=variant)
        with time_model(bound.policy.model.backend):
            scores = score_request(bound.model, request)
        return decide(scores, bound.policy, request_id=request_id, variant=variant)
    except ModelUnavailable:
        if fallback is None:
            raise
        with time_model(fallback.policy.model.backend):
            scores = score_request(fallback.model, request)
        return decide(scores, fallback.policy, request_id=request_id, variant=variant,
                      model_unavailable=True)


def score_shadows(shadows: dict[str, BoundModel], request: RouteRequest, request_id: str,
                  *, rules: Sequence[Rule] = DEFAULT_RULES) -> dict[str, Any]:
    """Every shadow variant's decision, as the live row's `shadow` column holds them: an
    unavailable model is recorded as its error code, never a fallback's decision."""
    out: dict[str, dict[str, Any]] = {}
    for name, bound in shadows.items():
        try:
            d = decide_with(bound, request, request_id, name, rules=rules)
        except ModelUnavailable as exc:
            out[name] = {"error": exc.code}
            continue
        out[name] = {"route": d.route, "reason": d.reason, "model": d.model,
                     "policy_version": d.policy_version, "threshold": d.threshold,
                     "choice": d.scores.choice if d.scores else None,
                     "confidence": d.scores.confidence if d.scores else None,
                     "probabilities": dict(d.scores.probabilities) if d.scores else None}
    first = next(iter(out.values()), {})
    return {"choice": first.get("choice"), "variants": out}


class RouterService:
    def __init__(
        self,
        primary: BoundModel,
        log: DecisionLog,
        *,
        fallback: BoundModel | None = None,
        rules: Sequence[Rule] = DEFAULT_RULES,
        experiment: LiveExperiment | None = None,
        shadow_queue: ShadowEnqueuer | None = None,
        shadow_sample_rate: float = 1.0,
    ) -> None:
        self._primary = primary
        self._fallback = fallback
        self._log = log
        self._rules = tuple(rules)
        self._lock = threading.Lock()
        self._experiment = experiment
        self.shadow_sample_rate = shadow_sample_rate
        self.shadow_queue = shadow_queue
        self.shadow_worker: ShadowWorker | None = None
        if experiment is not None and experiment.shadows and shadow_queue is None:
            self.shadow_worker = ShadowWorker(maxsize=experiment.config.shadow_queue_size)
        self.decides_inline = False
        self._update_inline()

    @property
    def primary(self) -> BoundModel:
        return self._primary

    @property
    def experiment(self) -> LiveExperiment | None:
        return self._experiment

    def swap_policy(self, policy: Policy) -> Policy:
        """Switch the primary model's policy atomically; in-flight requests keep the old one."""
        with self._lock:
            previous = self._primary.policy
            self._primary = BoundModel(self._primary.model, policy)
        return previous

    def swap_primary(self, primary: BoundModel) -> BoundModel:
        """Serve another model under its own policy from the next request on (a stage that
        joined a running gateway: router/app/cascade_join.py); the previous one. A request
        reads the primary once, so one in flight is decided by the model it started with."""
        with self._lock:
            previous, self._primary = self._primary, primary
            self._update_inline()
        return previous

    def _update_inline(self) -> None:
        # The embedded model scores in a fraction of a millisecond: cheaper to run on the
        # event loop than to hand to a thread. e5 (20-35 ms) and remote models are not.
        live = [self._primary, *([self._fallback] if self._fallback else []),
                *(self._experiment.variants.values() if self._experiment else ())]
        self.decides_inline = all(b.policy.model.backend == "local" for b in live)

    def swap_experiment(self, experiment: LiveExperiment | None) -> LiveExperiment | None:
        """Run `experiment` (None: none) from the next request on; the previous one.

        Each request reads the experiment once, so one that started under the previous
        experiment is decided and logged under it."""
        with self._lock:
            previous, self._experiment = self._experiment, experiment
            if (experiment is not None and experiment.shadows and self.shadow_queue is None
                    and self.shadow_worker is None):
                self.shadow_worker = ShadowWorker(maxsize=experiment.config.shadow_queue_size)
            self._update_inline()
        return previous

    def variant_for(self, request: RouteRequest, request_id: str) -> str | None:
        """The live variant assigned to this request's customer (or case), if any."""
        experiment = self._experiment
        return None if experiment is None else _assigned(experiment, request, request_id)

    def decide(self, request: RouteRequest, *, request_id: str | None = None) -> Decision:
        """Decide without logging (used by offline tools); under the experiment running
        as it starts, whose name the decision carries."""
        request_id = request_id or new_request_id()
        experiment = self._experiment
        if experiment is None:
            return self._decide_with(self._primary, request, request_id, None)
        variant = _assigned(experiment, request, request_id)
        decision = self._decide_with(experiment.variants[variant], request, request_id, variant)
        return decision.model_copy(update={"experiment": experiment.config.name})

    def _decide_with(self, bound: BoundModel, request: RouteRequest, request_id: str,
                     variant: str | None) -> Decision:
        return decide_with(bound, request, request_id, variant, rules=self._rules,
                           fallback=self._fallback)

    def route(self, request: RouteRequest, *, request_id: str | None = None) -> Decision:
        """Decide and log (committed before this returns); for threads and the CLI."""
        decision = self.decide(request, request_id=request_id)
        self.record(request, decision)
        return decision

    def record(self, request: RouteRequest, decision: Decision, *,
               outcome: str | None = None, together_with: CompanionWrite | None = None
               ) -> None:
        """Log a decision made by `decide` (with the handler's outcome, when known, and
        `together_with`'s writes in the same transaction), then count it and hand it to
        the shadow variants; committed before this returns."""
        self._log.append(decision, text=request.text, case_id=request.case_id,
                         experiment=decision.experiment, outcome=outcome,
                         together_with=together_with)
        self._after_logged(request, decision)

    async def route_async(self, request: RouteRequest, *,
                          request_id: str | None = None) -> Decision:
        """`route` for the event loop: the row goes through the log's group commit.

        Returns only after the decision is committed, as `route` does. The embedded
        model scores on the loop; other backends score on a worker thread.
        """
        if self.decides_inline:
            decision = self.decide(request, request_id=request_id)
        else:
            decision = await to_thread.run_sync(
                partial(self.decide, request, request_id=request_id))
        await self._log.append_async(decision, text=request.text, case_id=request.case_id,
                                     experiment=decision.experiment)
        self._after_logged(request, decision, wait=False)
        return decision

    def _after_logged(self, request: RouteRequest, decision: Decision, *,
                      wait: bool = True) -> None:
        """What follows a committed decision: its metrics, then the shadow variants of the
        experiment that decided it (`wait=False` on the event loop: the Redis append goes
        out with the loop's next batch instead of blocking)."""
        count_decision(decision)
        experiment = self._experiment
        if (experiment is None or not experiment.config.shadows
                or experiment.config.name != decision.experiment
                or not sampled(decision.request_id, self.shadow_sample_rate)):
            return  # no shadows, or the experiment that decided it has been stopped since
        if self.shadow_queue is not None:
            submit = self.shadow_queue.submit if wait else self.shadow_queue.submit_nowait
            submit(request, decision.request_id, experiment.config.name,
                   experiment.config.shadows)
        elif self.shadow_worker is not None:
            shadows = experiment.shadows
            self.shadow_worker.submit(
                lambda: self._log.set_shadow(decision.request_id, score_shadows(
                    shadows, request, decision.request_id, rules=self._rules)))

    async def drain_shadows(self) -> None:
        """Wait until the shadow jobs this loop handed to Redis are appended (shutdown)."""
        if self.shadow_queue is not None:
            await self.shadow_queue.drain()

    def close(self) -> None:
        """Finish queued shadow work and stop its thread; commit queued log rows."""
        if self.shadow_worker is not None:
            self.shadow_worker.close()
        if self.shadow_queue is not None:
            self.shadow_queue.close()
        self._log.close()

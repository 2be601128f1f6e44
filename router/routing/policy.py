"""The routing policy: calibrate the model's scores, then route or ask to clarify.

Pure functions over contracts; loading and saving the artifact are the only I/O.
"""

from __future__ import annotations

import numpy as np

from router.contracts import (
    ROUTES,
    Calibrator,
    Decision,
    DecisionReason,
    DecisionRoute,
    Policy,
    PolicyModel,
    Route,
    RouteScores,
)
from router.routing.calibrators import apply_calibrator_array
from router.routing.embedding_drift import project


def apply_calibrator(scores: RouteScores, calibrator: Calibrator) -> RouteScores:
    """Recalibrate probabilities; the calibrator was fitted for the policy's own model.

    One row of `router.routing.calibrators.apply_calibrator_array`, the computation the
    calibration tooling certifies thresholds on.
    """
    if calibrator.kind == "none":
        return scores
    probs = np.array([[scores.probabilities[r] for r in ROUTES]], dtype=float)
    calibrated = apply_calibrator_array(probs, calibrator)[0]
    return RouteScores.from_probabilities(scores.model, dict(zip(ROUTES, calibrated, strict=True)),
                                          embedding=scores.embedding)


def threshold_for(policy: Policy, choice: Route) -> float:
    if policy.per_route_thresholds and choice in policy.per_route_thresholds:
        return policy.per_route_thresholds[choice]
    return policy.threshold


def top2_margin(scores: RouteScores) -> float:
    first, second = sorted(scores.probabilities.values(), reverse=True)[:2]
    return first - second


def decide(
    scores: RouteScores,
    policy: Policy,
    *,
    request_id: str,
    variant: str | None = None,
    model_unavailable: bool = False,
) -> Decision:
    """Route when the model chose an actionable route confidently enough; else clarify.

    `model_unavailable` marks a decision answered by the fallback model because the
    configured one failed; the reason says so whatever the route.
    """
    calibrated = apply_calibrator(scores, policy.calibrator)
    threshold = threshold_for(policy, calibrated.choice)
    route: DecisionRoute
    reason: DecisionReason
    if calibrated.choice == "unclear":
        route, reason = "clarify", "unclear"
    elif calibrated.confidence < threshold or (
        policy.min_margin is not None and top2_margin(calibrated) < policy.min_margin
    ):
        route, reason = "clarify", "below_threshold"
    else:
        route, reason = calibrated.choice, "confident"
    return Decision(
        request_id=request_id,
        route=route,
        scores=calibrated,
        threshold=threshold,
        policy_version=policy.version,
        variant=variant,
        reason="model_unavailable" if model_unavailable else reason,
        model=calibrated.model,
        projections=_projections(scores, policy),
    )


def _projections(scores: RouteScores, policy: Policy) -> list[float] | None:
    """The message's projections on the policy's embedding summary, when an e5 model
    scored it and the policy has one: a k x dim product on the embedding scoring made."""
    summary = policy.reference.embedding if policy.reference is not None else None
    if summary is None or scores.embedding is None:
        return None
    if len(scores.embedding) != len(summary.directions[0]):
        return None  # another embedder's width: nothing comparable to project
    return project(summary, scores.embedding)


def running_model(model: object, policy: Policy) -> PolicyModel:
    """The identity of a running decision model, as a policy must name it.

    `artifact_sha` is the local model's artifact hash, or TypeSafe's question hash (the
    remote model's answers depend on it exactly as the local model's depend on weights).
    """
    backend = policy.model.backend
    sha = getattr(model, "artifact_sha", None)
    if sha is None and backend == "typesafe":
        from router.models.typesafe import question_sha

        sha = question_sha()
    return PolicyModel(backend=backend, name=model.name, artifact_sha=sha)  # type: ignore[attr-defined]

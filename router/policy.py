"""The routing policy: calibrate the model's scores, then route or ask to clarify.

Pure functions over contracts; loading and saving the artifact are the only I/O.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from router.contracts import ROUTES, Calibrator, Decision, Policy, RouteScores
from router.errors import ArtifactError


def apply_calibrator(scores: RouteScores, calibrator: Calibrator) -> RouteScores:
    """Recalibrate probabilities; the calibrator was fitted for the policy's own model."""
    if calibrator.kind == "none":
        return scores
    probs = np.array([scores.probabilities[r] for r in ROUTES], dtype=float)
    if calibrator.kind == "temperature":
        logp = np.log(np.clip(probs, 1e-300, None)) / float(calibrator.params["temperature"])
        logp -= logp.max()
        calibrated = np.exp(logp)
    else:  # isotonic, one-vs-rest step functions then renormalised
        calibrated = np.array(
            [
                np.interp(p, calibrator.params[r]["x"], calibrator.params[r]["y"])
                for r, p in zip(ROUTES, probs, strict=True)
            ]
        )
        calibrated = np.clip(calibrated, 1e-12, None)
    return RouteScores.from_probabilities(scores.model, dict(zip(ROUTES, calibrated, strict=True)))


def threshold_for(policy: Policy, choice: str) -> float:
    if policy.per_route_thresholds and choice in policy.per_route_thresholds:
        return policy.per_route_thresholds[choice]  # type: ignore[index]
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
    )


def load_policy(path: Path) -> Policy:
    try:
        return Policy.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ArtifactError(f"no policy at {path}; run `support-router train`") from exc
    except ValueError as exc:
        raise ArtifactError(f"policy {path} is not a valid policy artifact: {exc}") from exc


def save_policy(policy: Policy, path: Path) -> None:
    """Write atomically so a gateway reloading the file never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(policy.model_dump(mode="json"), indent=2, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(payload + "\n")
    os.replace(tmp, path)

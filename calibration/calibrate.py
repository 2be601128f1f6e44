"""`support-router calibrate`: split, recalibrate, certify, measure — and the policy artifact.

Pure over arrays (ids, labels, probabilities): the CLI reads the files, this module
decides. Rows used to train the model are excluded by the caller's `excluded` mask
(`calibration.splits.model_train_mask`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from calibration.certify import (
    PER_ROUTE,
    Certification,
    RowsNeeded,
    certify_per_route,
    certify_threshold,
    clopper_pearson_upper,
    rows_needed,
    walk_start_count,
)
from calibration.drift import EmbeddingModel, with_reference
from calibration.intervals import bootstrap_calibration, bootstrap_routing
from calibration.metrics import (
    calibration_summary,
    outcomes,
    routed_mask,
    routing_summary,
)
from calibration.recalibrate import (
    apply_calibrator_array,
    choices_and_confidence,
    fit_calibrator,
    label_indices,
)
from calibration.splits import PartIndex, assign_parts
from router.contracts import (
    NEVER_ROUTE,
    Calibrator,
    CalibratorKind,
    Guarantee,
    Policy,
    PolicyData,
    PolicyModel,
    Route,
    RouteScores,
)
from router.errors import CalibrationError


@dataclass(frozen=True)
class CalibrateOptions:
    alpha: float = 0.02
    delta: float = 0.05
    recalibrate: CalibratorKind = "none"
    cost_misroute: float | None = None
    cost_clarify: float | None = None
    per_route: bool = False
    min_margin: float | None = None
    n_boot: int = 1000
    seed: int = 0
    version: str | None = None


@dataclass(frozen=True)
class CalibrationResult:
    policy: Policy
    parts: PartIndex
    certifications: dict[str, Certification]
    """Key "all" for one global threshold, else one per actionable route."""
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyScores:
    """Predictions after a policy's calibrator, with the policy's routing applied."""

    probabilities: np.ndarray
    choices: np.ndarray
    confidences: np.ndarray
    margins: np.ndarray
    routed: np.ndarray


def score_with_policy(probabilities: np.ndarray, policy: Policy) -> PolicyScores:
    """Recalibrate (n, 4) probabilities and apply the policy's thresholds and margin rule."""
    calibrated = apply_calibrator_array(probabilities, policy.calibrator)
    choices, confidences, margins = choices_and_confidence(calibrated)
    routed = routed_mask(choices, confidences, policy.threshold,
                         per_route=policy.per_route_thresholds, margins=margins,
                         min_margin=policy.min_margin)
    return PolicyScores(calibrated, choices, confidences, margins, routed)


def calibrate(
    ids: np.ndarray,
    labels: np.ndarray,
    probabilities: np.ndarray,
    *,
    model: PolicyModel,
    options: CalibrateOptions,
    now: datetime,
    excluded: np.ndarray | None = None,
    labels_sha: str | None = None,
    texts: Sequence[str] | None = None,
    e5: EmbeddingModel | None = None,
) -> CalibrationResult:
    """Fit the calibrator, certify the threshold(s) and measure on the test part.

    Parameters
    ----------
    ids, labels : ndarray of str, shape (n,)
    probabilities : ndarray of shape (n, 4)
        The model's raw probabilities, columns in `ROUTES` order.
    model : PolicyModel
        The model the predictions came from; the policy is bound to it.
    options : CalibrateOptions
    now : datetime
        Creation time of the artifact (and part of its default version).
    excluded : ndarray of bool, shape (n,), optional
        Rows never to use (the model's training rows).
    labels_sha : str, optional
        Content hash of the labelled rows, recorded in the artifact.
    texts : sequence of str, shape (n,), optional
        The rows' texts: when given, the policy carries the drift reference of its
        certify rows (their length and language guess; `calibration.drift`).
    e5 : E5RouteModel, optional
        The e5 model the predictions came from: with `texts`, the reference also holds
        the embedding summary of the certify rows (it embeds them).

    Returns
    -------
    CalibrationResult

    Raises
    ------
    CalibrationError
        Too few certify rows, isotonic on too few fit rows, or no certifiable threshold
        (the message says how many more labelled rows would be needed).
    """
    labels = np.asarray(labels)
    parts = assign_parts(ids, excluded=excluded, use_fit=options.recalibrate != "none")
    y = label_indices(labels)
    calibrator = fit_calibrator(options.recalibrate, probabilities[parts.fit], y[parts.fit])
    certify_probs = apply_calibrator_array(probabilities[parts.certify], calibrator)
    choices, confidences, margins = choices_and_confidence(certify_probs)
    certifications = _certify(labels[parts.certify], choices, confidences, margins, options)
    policy = _policy(certifications, calibrator, model, parts, options, now, labels_sha)
    before, after, metrics = _test_metrics(labels, y, probabilities, parts.test, policy, options)
    policy = policy.model_copy(update={"metrics_test": metrics})
    if texts is not None:
        certify = parts.certify.tolist()
        policy = with_reference(
            policy, RouteScores.from_probability_rows(model.name, probabilities[certify]),
            [texts[i] for i in certify], source=f"decisions on {len(certify)} certify rows",
            e5=e5)
    return CalibrationResult(policy, parts, certifications, before, after)


def _certify(labels: np.ndarray, choices: np.ndarray, confidences: np.ndarray,
             margins: np.ndarray, options: CalibrateOptions) -> dict[str, Certification]:
    if options.per_route:
        results = certify_per_route(
            labels, choices, confidences, alpha=options.alpha, delta=options.delta,
            margins=margins, min_margin=options.min_margin,
            cost_misroute=options.cost_misroute, cost_clarify=options.cost_clarify,
        )
    else:
        results = {"all": certify_threshold(
            labels, choices, confidences, alpha=options.alpha, delta=options.delta,
            margins=margins, min_margin=options.min_margin,
            cost_misroute=options.cost_misroute, cost_clarify=options.cost_clarify,
        )}
    if not any(c.certified for c in results.values()):
        raise CalibrationError(format_not_certified(results, len(labels)),
                               code="no_certified_threshold")
    return results


def format_not_certified(results: dict[str, Certification], n_certify: int) -> str:
    """A plain explanation of why nothing was certified, and how many rows would help."""
    first = next(iter(results.values()))
    delta = sum(c.delta for c in results.values())
    split = "" if len(results) == 1 else f", split {len(results)} ways by route"
    head = (f"no threshold certifies a misroute rate <= {first.alpha:g} at delta "
            f"{delta:g}{split} on {n_certify} certify rows")
    lines = [head]
    for name, cert in results.items():
        scope = "" if name == "all" else f"route {name}: "
        stop = cert.stopped_at
        if stop is not None:
            lines.append(
                f"{scope}the walk ended at threshold {cert.curve.thresholds[stop]:.2f}: "
                f"{cert.curve.misroutes[stop]} misroutes of {cert.curve.routed[stop]} routed "
                f"(p = {cert.p_values[stop]:.3g} > delta)")
        elif not cert.tested.any():
            start = walk_start_count(cert.alpha, cert.delta)
            lines.append(f"{scope}no threshold routes the {start} certify rows a test needs")
        need: RowsNeeded | None = rows_needed(cert.curve, alpha=cert.alpha, delta=cert.delta,
                                              n_certify=n_certify)
        if need is not None:
            lines.append(
                f"{scope}at threshold {need.threshold:.2f} the observed rate is "
                f"{need.observed_rate:.4f}; about {need.more_certify_rows:,} more labelled "
                f"certify rows ({need.certify_rows_needed:,} in all) would certify it if "
                "that rate holds"
            )
        elif np.all(cert.curve.misroute_rate_routed[cert.curve.routed > 0] >= cert.alpha):
            lines.append(f"{scope}the observed misroute rate is at least {cert.alpha:g} at every "
                         "threshold; more rows will not help — improve the model or raise alpha")
    return "; ".join(lines)


def _policy(certifications: dict[str, Certification], calibrator: Calibrator, model: PolicyModel,
            parts: PartIndex, options: CalibrateOptions, now: datetime,
            labels_sha: str | None) -> Policy:
    per_route: dict[Route, float] | None
    if options.per_route:  # `certify_per_route` certified each route of PER_ROUTE
        thresholds = {r: certifications[r].threshold for r in PER_ROUTE}
        per_route = {r: (t if t is not None else NEVER_ROUTE) for r, t in thresholds.items()}
        threshold = max(t for t in per_route.values() if t <= 1.0)
        method = (f"learn-then-test, fixed sequence, binomial tail; per route "
                  f"(Bonferroni: delta/{len(PER_ROUTE)} each)")
    else:
        per_route, threshold = None, float(certifications["all"].threshold or 0.0)
        method = "learn-then-test, fixed sequence, binomial tail"
    routed = sum(c.routed for c in certifications.values())
    misroutes = sum(c.misroutes for c in certifications.values())
    guarantee = Guarantee(
        alpha=options.alpha, delta=options.delta, n_certify=len(parts.certify),
        misroutes=misroutes,
        upper_bound=clopper_pearson_upper(misroutes, routed, confidence=1 - options.delta),
        method=method,
    )
    body = {"model": model.model_dump(), "calibrator": calibrator.model_dump(),
            "threshold": threshold, "per_route": per_route, "min_margin": options.min_margin,
            "labels_sha": labels_sha}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    version = options.version or f"{model.backend}-{now:%Y%m%dT%H%M%SZ}-{digest}"
    return Policy(
        version=version,
        created_at=now,
        model=model,
        calibrator=calibrator,
        threshold=threshold,
        per_route_thresholds=per_route,
        min_margin=options.min_margin,
        guarantee=guarantee,
        data=PolicyData(labels_sha=labels_sha, n_fit=len(parts.fit),
                        n_certify=len(parts.certify), n_test=len(parts.test)),
        notes=format_certification_notes(certifications),
    )


def format_certification_notes(certifications: dict[str, Certification]) -> str:
    """One line per certification: threshold, routed, misroutes, bound."""
    parts = []
    for name, cert in certifications.items():
        scope = "" if name == "all" else f"{name}: "
        if cert.certified:
            parts.append(f"{scope}threshold {cert.threshold:.2f} routes {cert.routed} certify "
                         f"rows with {cert.misroutes} misroutes (upper bound "
                         f"{cert.upper_bound:.4f} at 1-{cert.delta:.3g})")
        else:
            parts.append(f"{scope}no threshold certified; this route always gets a clarify")
    return "; ".join(parts)


def _test_metrics(labels: np.ndarray, y: np.ndarray, probabilities: np.ndarray,
                  test: np.ndarray, policy: Policy, options: CalibrateOptions
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Calibration before/after and routing at the policy, on the test part only."""
    if len(test) == 0:
        return {}, {}, {"n": 0}
    raw = probabilities[test] / probabilities[test].sum(axis=1, keepdims=True)
    scored = score_with_policy(raw, policy)
    test_labels = labels[test]
    outcome = outcomes(test_labels, scored.choices, scored.routed)
    before = calibration_summary(y[test], raw)
    after_ci = bootstrap_calibration(y[test], scored.probabilities, n_boot=options.n_boot,
                                     seed=options.seed)
    after = {k: v["value"] for k, v in after_ci.items()}
    summary = routing_summary(test_labels, outcome)
    metrics = {
        "n": len(test),
        "bootstrap": f"percentile, {options.n_boot} resamples, seed {options.seed}",
        "counts": {k: summary[k] for k in ("correct", "misroute", "clarify_needed",
                                           "clarify_unneeded", "routed")},
        "routing": bootstrap_routing(test_labels, outcome, n_boot=options.n_boot,
                                     seed=options.seed),
        "calibration": after_ci,
        "calibration_before": before,
        "accuracy": float(np.mean(scored.choices == test_labels)),
    }
    return before, after, metrics

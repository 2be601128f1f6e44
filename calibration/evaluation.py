"""One evaluation of a router on labelled rows, at a policy: the `eval --json` figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calibration.metrics import (
    classification_summary,
    expected_calibration_error,
    outcomes,
    routed_mask,
    routing_by_group,
    routing_summary,
)
from router.contracts import ROUTES, Policy, RouteScores
from router.routing.policy import apply_calibrator, top2_margin


def evaluate(
    labels: Sequence[str],
    scores: Sequence[RouteScores],
    policy: Policy,
    *,
    tags: Sequence[Sequence[str]] | None = None,
    languages: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Model metrics on the raw choice plus routing metrics at the policy.

    Scores are recalibrated with the policy's calibrator first, exactly as the gateway does.
    With `tags` (one list per row), `per_tag` repeats the key figures for each tag, so
    e.g. the injection rows can be read on their own. `per_label` gives the routing
    figures of the rows of each true route, and with `languages` (one code per row)
    `per_language` gives them for each language, so a weak route or language shows.
    """
    calibrated = [apply_calibrator(s, policy.calibrator) for s in scores]
    choices = [s.choice for s in calibrated]
    routed = routed_mask(
        choices,
        [s.confidence for s in calibrated],
        policy.threshold,
        per_route=policy.per_route_thresholds,
        margins=[top2_margin(s) for s in calibrated],
        min_margin=policy.min_margin,
    )
    probabilities = np.array([[s.probabilities[r] for r in ROUTES] for s in calibrated])
    y_true = np.array([ROUTES.index(label) for label in labels])
    outcome = outcomes(labels, choices, routed)
    summary = routing_summary(labels, outcome)
    return {
        **summary,
        **classification_summary(labels, choices),
        "ece_15": expected_calibration_error(y_true, probabilities, n_bins=15),
        "threshold": policy.threshold,
        "per_route_thresholds": policy.per_route_thresholds,
        "policy_version": policy.version,
        "model": calibrated[0].model if calibrated else policy.model.name,
        "per_tag": _per_tag(labels, choices, outcome, tags) if tags is not None else {},
        "per_label": routing_by_group(labels, outcome, labels),
        "per_language": (routing_by_group(labels, outcome, languages)
                         if languages is not None else {}),
    }


def _per_tag(
    labels: Sequence[str],
    choices: Sequence[str],
    outcome: np.ndarray,
    tags: Sequence[Sequence[str]],
) -> dict[str, dict[str, float]]:
    """Accuracy, correct-outcome rate and misroutes of the rows carrying each tag."""
    right = np.asarray(labels) == np.asarray(choices)
    good = np.isin(outcome, ("correct", "clarify_needed"))
    result = {}
    for tag in sorted({t for row_tags in tags for t in row_tags}):
        rows = np.array([tag in row_tags for row_tags in tags])
        result[tag] = {
            "n": int(rows.sum()),
            "accuracy": float(right[rows].mean()),
            "correct_outcome_rate": float(good[rows].mean()),
            "misroutes": int(np.sum(outcome[rows] == "misroute")),
        }
    return result


def stage_summary(stages: Sequence[str], latencies_ms: Sequence[float]) -> dict[str, Any]:
    """Each cascade stage's share of the messages it answered and their latency.

    Parameters
    ----------
    stages : sequence of str, shape (n,)
        The model that answered each message.
    latencies_ms : sequence of float, shape (n,)
        The whole cascade's time for each message (every stage it asked), in ms.

    Returns
    -------
    dict
        ``latency_ms`` (p50, p99, mean over all messages) and ``stages``: per answering
        model, ``n``, ``share`` and the same latency figures over its messages.
    """
    names, times = np.asarray(stages, dtype=object), np.asarray(latencies_ms, dtype=float)

    def figures(mask: np.ndarray) -> dict[str, float]:
        chosen = times[mask]
        return {"p50": float(np.percentile(chosen, 50)), "p99": float(np.percentile(chosen, 99)),
                "mean": float(chosen.mean())}

    if len(names) == 0:
        return {"latency_ms": {}, "stages": {}}
    return {
        "latency_ms": figures(np.ones(len(names), dtype=bool)),
        "stages": {str(name): {"n": int((names == name).sum()),
                               "share": float((names == name).mean()),
                               "latency_ms": figures(names == name)}
                   for name in dict.fromkeys(names.tolist())},
    }

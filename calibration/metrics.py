"""Routing outcomes and metrics: pure functions over arrays.

Definitions (shared by `eval`, `calibrate`, `report`, `compare`): at threshold λ a request
is **routed** if its choice is not `unclear` and its confidence ≥ λ, otherwise it gets a
**clarify**. Outcomes: `correct` (routed, choice = label), `misroute` (routed, choice ≠
label — routing a request labelled unclear is a misroute), `clarify_needed` (clarify,
label unclear), `clarify_unneeded` (clarify, label not unclear).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.metrics import f1_score, precision_recall_fscore_support

from router.contracts import ROUTES

OUTCOMES = ("correct", "misroute", "clarify_needed", "clarify_unneeded")


def routed_mask(
    choices: Sequence[str] | np.ndarray,
    confidences: Sequence[float] | np.ndarray,
    threshold: float,
    *,
    per_route: Mapping[str, float] | None = None,
    margins: Sequence[float] | np.ndarray | None = None,
    min_margin: float | None = None,
) -> np.ndarray:
    """Boolean array, True where the request is routed rather than clarified.

    Parameters
    ----------
    choices, confidences : array-like of shape (n,)
    threshold : float
        Confidence threshold λ (used for routes without a per-route threshold).
    per_route : mapping, optional
        Route → threshold, overriding `threshold` for that choice.
    margins, min_margin : optional
        Top-2 probability margins of shape (n,) and the least margin that may route.
    """
    choices = np.asarray(choices)
    confidences = np.asarray(confidences, dtype=float)
    lambdas = np.full(len(choices), float(threshold))
    for route, value in (per_route or {}).items():
        lambdas[choices == route] = value
    routed = (choices != "unclear") & (confidences >= lambdas)
    if min_margin is not None and margins is not None:
        routed &= np.asarray(margins, dtype=float) >= min_margin
    return routed


def outcomes(labels: Sequence[str] | np.ndarray, choices: Sequence[str] | np.ndarray,
             routed: np.ndarray) -> np.ndarray:
    """Outcome name per request, shape (n,)."""
    labels = np.asarray(labels)
    choices = np.asarray(choices)
    return np.where(
        routed,
        np.where(choices == labels, "correct", "misroute"),
        np.where(labels == "unclear", "clarify_needed", "clarify_unneeded"),
    )


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else 0.0


def routing_summary(labels: Sequence[str] | np.ndarray, outcome: np.ndarray) -> dict[str, float]:
    """Rates that the data team reads; each is 0.0 when its denominator is empty."""
    labels = np.asarray(labels)
    n = len(labels)
    counts = {name: int(np.sum(outcome == name)) for name in OUTCOMES}
    routed = counts["correct"] + counts["misroute"]
    clear = labels != "unclear"
    routed_clear = int(np.sum(clear & np.isin(outcome, ("correct", "misroute"))))
    return {
        "n": n,
        **counts,
        "routed": routed,
        "misroute_rate_routed": _ratio(counts["misroute"], routed),
        "misroute_rate": _ratio(counts["misroute"], n),
        "coverage": _ratio(routed_clear, int(clear.sum())),
        "clarify_rate": _ratio(n - routed, n),
        "unclear_recall": _ratio(counts["clarify_needed"], int(np.sum(~clear))),
        "correct_outcome_rate": _ratio(counts["correct"] + counts["clarify_needed"], n),
    }


def expected_calibration_error(
    y_true: np.ndarray, probabilities: np.ndarray, *, n_bins: int = 15, strategy: str = "uniform"
) -> float:
    """Top-label ECE: weighted mean |accuracy − confidence| over bins of the top probability.

    Parameters
    ----------
    y_true : ndarray of shape (n,)
        Index of the true class.
    probabilities : ndarray of shape (n, k)
    n_bins : int
        Number of bins (15 by default, the usual choice).
    strategy : {"uniform", "quantile"}
        Equal-width bins over [0, 1], or equal-mass bins.
    """
    top = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == y_true
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        edges = np.quantile(top, np.linspace(0.0, 1.0, n_bins + 1))
        edges[0], edges[-1] = 0.0, 1.0
    bins = np.clip(np.searchsorted(edges, top, side="right") - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            total += in_bin.sum() * abs(correct[in_bin].mean() - top[in_bin].mean())
    return float(total / len(top))


def classification_summary(labels: Sequence[str], choices: Sequence[str]) -> dict:
    """Accuracy, macro-F1 and per-route precision/recall of the model's choice."""
    labels = list(labels)
    choices = list(choices)
    precision, recall, _, support = precision_recall_fscore_support(
        labels, choices, labels=list(ROUTES), zero_division=0
    )
    return {
        "accuracy": float(np.mean(np.asarray(labels) == np.asarray(choices))),
        "macro_f1": float(
            f1_score(labels, choices, labels=list(ROUTES), average="macro", zero_division=0)
        ),
        "per_route": {
            route: {"precision": float(p), "recall": float(r), "n": int(s)}
            for route, p, r, s in zip(ROUTES, precision, recall, support, strict=True)
        },
    }

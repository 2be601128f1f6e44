"""Routing outcomes and metrics: pure functions over arrays.

Definitions (shared by `eval`, `calibrate`, `report`, `compare`): at threshold λ a request
is **routed** if its choice is not `unclear` and its confidence ≥ λ, otherwise it gets a
**clarify**. Outcomes: `correct` (routed, choice = label), `misroute` (routed, choice ≠
label — routing a request labelled unclear is a misroute), `clarify_needed` (clarify,
label unclear), `clarify_unneeded` (clarify, label not unclear).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import f1_score, precision_recall_fscore_support

from router.contracts import ROUTES, Route

OUTCOMES = ("correct", "misroute", "clarify_needed", "clarify_unneeded")


def routed_mask(
    choices: Sequence[str] | np.ndarray,
    confidences: Sequence[float] | np.ndarray,
    threshold: float,
    *,
    per_route: Mapping[str, float] | Mapping[Route, float] | None = None,
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
    routed: np.ndarray = (choices != "unclear") & (confidences >= lambdas)
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


OUTCOME_CELLS = ("correct", "misroute_clear", "misroute_unclear", "clarify_needed",
                 "clarify_unneeded")
"""Outcomes split by whether the label is clear: every routing rate is a ratio of these."""


def outcome_cells(labels: Sequence[str] | np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """Index into `OUTCOME_CELLS` per request, shape (n,)."""
    labels, outcome = np.asarray(labels), np.asarray(outcome)
    cells = np.full(len(outcome), 4, dtype=np.int64)
    cells[outcome == "correct"] = 0
    cells[(outcome == "misroute") & (labels != "unclear")] = 1
    cells[(outcome == "misroute") & (labels == "unclear")] = 2
    cells[outcome == "clarify_needed"] = 3
    return cells


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    ratio: np.ndarray = np.divide(numerator, denominator, out=out, where=denominator > 0)
    return ratio


def routing_rates(cell_counts: np.ndarray) -> dict[str, np.ndarray]:
    """Routing rates from counts of `OUTCOME_CELLS`, shape (..., 5) → arrays of shape (...).

    Each rate is 0.0 where its denominator is empty.
    """
    c, mc, mu, cn, cu = np.moveaxis(np.asarray(cell_counts, dtype=float), -1, 0)
    n = c + mc + mu + cn + cu
    routed = c + mc + mu
    return {
        "misroute_rate_routed": _ratio(mc + mu, routed),
        "misroute_rate": _ratio(mc + mu, n),
        "coverage": _ratio(c + mc, c + mc + cu),
        "clarify_rate": _ratio(cn + cu, n),
        "unclear_recall": _ratio(cn, cn + mu),
        "correct_outcome_rate": _ratio(c + cn, n),
    }


def routing_summary(labels: Sequence[str] | np.ndarray, outcome: np.ndarray) -> dict[str, float]:
    """Counts and the rates that the data team reads; each rate is 0.0 when its denominator
    is empty."""
    counts = np.bincount(outcome_cells(labels, outcome), minlength=len(OUTCOME_CELLS))
    c, mc, mu, cn, cu = (int(v) for v in counts)
    return {
        "n": int(counts.sum()),
        "correct": c,
        "misroute": mc + mu,
        "clarify_needed": cn,
        "clarify_unneeded": cu,
        "routed": c + mc + mu,
        **{name: float(value) for name, value in routing_rates(counts).items()},
    }


GROUP_FIGURES = ("n", "routed", "misroute", "coverage", "misroute_rate_routed",
                 "correct_outcome_rate")


def routing_by_group(labels: Sequence[str] | np.ndarray, outcome: np.ndarray,
                     groups: Sequence[str] | np.ndarray) -> dict[str, dict[str, float]]:
    """`routing_summary`'s key figures for each group's rows (each true route, each
    language, …), groups in sorted order: a weak route or language shows on its own."""
    keys = np.asarray(groups)
    label_array = np.asarray(labels)
    result = {}
    for group in sorted(set(keys.tolist())):
        rows = keys == group
        summary = routing_summary(label_array[rows], outcome[rows])
        result[str(group)] = {name: summary[name] for name in GROUP_FIGURES}
    return result


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
    top, correct = _top_label(probabilities, np.asarray(y_true))
    return _bin_gap(top, correct, n_bins=n_bins, strategy=strategy)


def classification_summary(labels: Sequence[str], choices: Sequence[str]) -> dict[str, Any]:
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


def _top_label(probabilities: np.ndarray, y_true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top probability and whether the argmax is the true class."""
    return probabilities.max(axis=1), probabilities.argmax(axis=1) == y_true


def _bin_gap(values: np.ndarray, hits: np.ndarray, *, n_bins: int, strategy: str) -> float:
    """Weighted mean |mean(hits) − mean(values)| over bins of `values`."""
    return float(_BinnedGap(values, hits, n_bins=n_bins, strategy=strategy).gap(None))


def classwise_calibration_error(
    y_true: np.ndarray, probabilities: np.ndarray, *, n_bins: int = 15, strategy: str = "uniform"
) -> float:
    """Classwise ECE: the mean over classes of the one-vs-rest calibration error.

    Parameters
    ----------
    y_true : ndarray of shape (n,)
        Index of the true class.
    probabilities : ndarray of shape (n, k)
    n_bins : int
        Bins per class (15 equal-width by default).
    strategy : {"uniform", "quantile"}

    Returns
    -------
    float
        ``mean_j sum_b |B_jb|/n · |freq_jb − mean p_jb|``: for each class j the
        predicted probability p_j is binned and compared with how often j is the label.
    """
    y_true = np.asarray(y_true)
    return float(np.mean([
        _bin_gap(probabilities[:, j], y_true == j, n_bins=n_bins, strategy=strategy)
        for j in range(probabilities.shape[1])
    ]))


def brier_loss(y_true: np.ndarray, probabilities: np.ndarray) -> float:
    """Multi-class Brier score: mean over rows of ``sum_j (p_j − 1[y = j])²`` (lower is better).

    Parameters
    ----------
    y_true : ndarray of shape (n,)
    probabilities : ndarray of shape (n, k)
    """
    return float(np.mean(_brier_rows(np.asarray(y_true), probabilities)))


def negative_log_likelihood(y_true: np.ndarray, probabilities: np.ndarray,
                            *, eps: float = 1e-15) -> float:
    """Mean negative log-probability of the true class (natural log; lower is better).

    Parameters
    ----------
    y_true : ndarray of shape (n,)
    probabilities : ndarray of shape (n, k)
        Rows are renormalised after clipping to ``[eps, 1]``, as scikit-learn's ``log_loss``.
    """
    return float(np.mean(_nll_rows(np.asarray(y_true), probabilities, eps=eps)))


def _brier_rows(y_true: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    squares = np.sum(probabilities**2, axis=1)
    rows: np.ndarray = squares - 2 * probabilities[np.arange(len(y_true)), y_true] + 1.0
    return rows


def _nll_rows(y_true: np.ndarray, probabilities: np.ndarray, *, eps: float = 1e-15) -> np.ndarray:
    clipped = np.clip(probabilities, eps, 1.0)
    clipped = clipped / clipped.sum(axis=1, keepdims=True)
    rows: np.ndarray = -np.log(clipped[np.arange(len(y_true)), y_true])
    return rows


class _BinnedGap:
    """An ECE-style binned gap that can be re-evaluated under bootstrap weights in O(n).

    `gap(weights)` with integer weights equals the unweighted computation on the sample
    that repeats row i weights[i] times (equal-mass edges follow `np.quantile`'s default
    linear interpolation on that sample).
    """

    def __init__(self, values: np.ndarray, hits: np.ndarray, *, n_bins: int, strategy: str):
        if strategy not in ("uniform", "quantile"):
            raise ValueError(f"strategy={strategy!r}; use 'uniform' or 'quantile'")
        self.n_bins, self.strategy = n_bins, strategy
        values = np.asarray(values, dtype=float)
        diff = np.asarray(hits, dtype=float) - values
        if strategy == "uniform":  # bins never move: keep the rows in their own order
            self.order = None
            self.values, self.diff = values, diff
            self.fixed_bins = self._bins(np.linspace(0.0, 1.0, n_bins + 1))
        else:  # equal-mass edges need the values sorted
            self.order = np.argsort(values, kind="stable")
            self.values, self.diff = values[self.order], diff[self.order]

    def _bins(self, edges: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(edges, self.values, side="right") - 1, 0, self.n_bins - 1)

    def _edges(self, weights: np.ndarray | None) -> np.ndarray:
        levels = np.linspace(0.0, 1.0, self.n_bins + 1)
        edges: np.ndarray
        if weights is None:
            edges = np.quantile(self.values, levels)
        else:  # np.quantile's linear rule on the expanded (repeated-rows) sample
            cumulative = np.cumsum(weights)
            position = (cumulative[-1] - 1) * levels
            below = np.floor(position)
            last = len(self.values) - 1
            at = np.minimum(np.searchsorted(cumulative, below, side="right"), last)
            nxt = np.minimum(np.searchsorted(cumulative, below + 1, side="right"), last)
            edges = self.values[at] + (position - below) * (self.values[nxt] - self.values[at])
        edges[0], edges[-1] = 0.0, 1.0
        return edges

    def gap(self, weights: np.ndarray | None) -> float:
        """The binned gap; `weights` (n,) are per-row counts in the original row order."""
        if weights is not None and self.order is not None:
            weights = weights[self.order]
        total = len(self.values) if weights is None else weights.sum()
        if total == 0:
            return 0.0
        signed = self.diff if weights is None else weights * self.diff
        if self.strategy == "uniform":
            per_bin = np.bincount(self.fixed_bins, weights=signed, minlength=self.n_bins)
        else:  # values are sorted: each bin is a slice, summed through one cumulative sum
            edges = self._edges(weights)
            bounds = np.concatenate(
                [[0], np.searchsorted(self.values, edges[1:-1], side="left"), [len(self.values)]]
            )
            cumulative = np.concatenate([[0.0], np.cumsum(signed)])
            per_bin = cumulative[bounds[1:]] - cumulative[bounds[:-1]]
        return float(np.abs(per_bin).sum() / total)


def calibration_summary(y_true: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """The calibration figures reports name: ECE with 15 equal-width and 15 equal-mass bins,
    classwise-ECE (15 equal-width), Brier and NLL.

    Parameters
    ----------
    y_true : ndarray of shape (n,)
    probabilities : ndarray of shape (n, k)
    """
    return {
        "ece_15_equal_width": expected_calibration_error(y_true, probabilities, n_bins=15),
        "ece_15_equal_mass": expected_calibration_error(y_true, probabilities, n_bins=15,
                                                        strategy="quantile"),
        "classwise_ece_15_equal_width": classwise_calibration_error(y_true, probabilities),
        "brier": brier_loss(y_true, probabilities),
        "nll": negative_log_likelihood(y_true, probabilities),
    }

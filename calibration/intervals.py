"""Bootstrap intervals for the metrics in `calibration.metrics`, fast at any size.

Routing rates are ratios of five outcome counts, so resampling rows is exactly a
multinomial draw of those counts (free at any n). Calibration figures are re-evaluated
under resampling weights: every one except equal-mass ECE is linear in the weights
before an absolute value, so a batch of resamples is one sparse product; equal-mass ECE
recomputes its quantile edges per resample from a cumulative sum. A test holds every
weighted figure equal to the plain metric on the resampled rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from calibration.metrics import (
    OUTCOME_CELLS,
    _BinnedGap,
    _brier_rows,
    _nll_rows,
    _top_label,
    outcome_cells,
    routing_rates,
)


class CalibrationStats:
    """The calibration figures of one set of predictions, re-evaluable under bootstrap weights.

    Parameters
    ----------
    y_true : ndarray of shape (n,)
        Index of the true class.
    probabilities : ndarray of shape (n, k)
    n_bins : int
        15 by default, for both binnings.
    """

    def __init__(self, y_true: np.ndarray, probabilities: np.ndarray, *, n_bins: int = 15):
        y_true = np.asarray(y_true)
        top, correct = _top_label(probabilities, y_true)
        self.n = len(y_true)
        self._width = _BinnedGap(top, correct, n_bins=n_bins, strategy="uniform")
        self._mass = _BinnedGap(top, correct, n_bins=n_bins, strategy="quantile")
        self._classwise = [
            _BinnedGap(probabilities[:, j], y_true == j, n_bins=n_bins, strategy="uniform")
            for j in range(probabilities.shape[1])
        ]
        self._brier = _brier_rows(y_true, probabilities)
        self._nll = _nll_rows(y_true, probabilities)

    def summary(self, weights: np.ndarray | None = None) -> dict[str, float]:
        """`calibration_summary` of the rows repeated `weights[i]` times (None: once each)."""
        w = np.ones(self.n) if weights is None else np.asarray(weights, dtype=float)
        weights = None if weights is None else w
        total = w.sum()
        return {
            "ece_15_equal_width": self._width.gap(weights),
            "ece_15_equal_mass": self._mass.gap(weights),
            "classwise_ece_15_equal_width": float(np.mean([c.gap(weights)
                                                           for c in self._classwise])),
            "brier": float(w @ self._brier / total) if total else 0.0,
            "nll": float(w @ self._nll / total) if total else 0.0,
        }

    def summaries(self, weights: np.ndarray) -> dict[str, np.ndarray]:
        """`summary` for many weight vectors at once, shape (b, n) → arrays of shape (b,).

        Every figure except equal-mass ECE is a linear function of the weights followed by
        |·|, so one sparse product evaluates all of them for the whole batch.
        """
        weights = np.asarray(weights, dtype=float)
        sums = (self._linear_map() @ weights.T).T  # (b, columns)
        total = sums[:, -1]
        n_bins = self._width.n_bins
        classwise = [np.abs(sums[:, n_bins * (j + 1): n_bins * (j + 2)]).sum(axis=1)
                     for j in range(len(self._classwise))]
        return {
            "ece_15_equal_width": np.abs(sums[:, :n_bins]).sum(axis=1) / total,
            "ece_15_equal_mass": np.array([self._mass.gap(w) for w in weights]),
            "classwise_ece_15_equal_width": np.mean(classwise, axis=0) / total,
            "brier": sums[:, -3] / total,
            "nll": sums[:, -2] / total,
        }

    def _linear_map(self) -> sparse.csr_matrix:
        """Sparse (columns × n): per-bin signed gaps, Brier and NLL rows, and the row count."""
        if getattr(self, "_map", None) is None:
            n_bins = self._width.n_bins
            gaps = [self._width, *self._classwise]
            rows = np.concatenate([g.fixed_bins + n_bins * k for k, g in enumerate(gaps)]
                                  + [np.full(self.n, n_bins * len(gaps) + k) for k in range(3)])
            values = np.concatenate([g.diff for g in gaps]
                                    + [self._brier, self._nll, np.ones(self.n)])
            columns = np.tile(np.arange(self.n), len(gaps) + 3)
            self._map = sparse.csr_matrix((values, (rows, columns)),
                                          shape=(n_bins * len(gaps) + 3, self.n))
        return self._map


_BOOTSTRAP_BATCH_VALUES = 4_000_000
"""Weights held at once while bootstrapping (32 MB of float64)."""


def _interval(draws: np.ndarray, point: float, level: float) -> dict[str, float | list[float]]:
    tail = (1.0 - level) / 2 * 100
    return {"value": float(point),
            f"ci{round(level * 100)}": [float(np.percentile(draws, tail)),
                                        float(np.percentile(draws, 100 - tail))]}


def bootstrap_calibration(
    y_true: np.ndarray, probabilities: np.ndarray, *, n_boot: int = 1000, level: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, float | list[float]]]:
    """`calibration_summary` with percentile bootstrap intervals (rows resampled).

    Parameters
    ----------
    y_true : ndarray of shape (n,)
    probabilities : ndarray of shape (n, k)
    n_boot : int
        Resamples (1,000 by default).
    level : float
        0.95 gives the 2.5th and 97.5th percentiles, under the key ``"ci95"``.
    seed : int
        Seed of the resampling, so reports are reproducible.

    Returns
    -------
    dict
        ``{metric: {"value": point, "ci95": [low, high]}}``.
    """
    stats = CalibrationStats(y_true, probabilities)
    point = stats.summary()
    if stats.n == 0:
        return {k: _interval(np.array([v]), v, level) for k, v in point.items()}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[np.ndarray]] = {k: [] for k in point}
    batch = max(1, min(n_boot, _BOOTSTRAP_BATCH_VALUES // stats.n))
    for start in range(0, n_boot, batch):
        weights = np.stack([
            np.bincount(rng.integers(0, stats.n, size=stats.n), minlength=stats.n)
            for _ in range(min(batch, n_boot - start))
        ])
        for k, v in stats.summaries(weights).items():
            draws[k].append(v)
    return {k: _interval(np.concatenate(draws[k]), point[k], level) for k in point}


def bootstrap_routing(
    labels: Sequence[str] | np.ndarray, outcome: np.ndarray, *, n_boot: int = 1000,
    level: float = 0.95, seed: int = 0,
) -> dict[str, dict[str, float | list[float]]]:
    """Routing rates with percentile bootstrap intervals.

    Every routing rate is a ratio of counts of `OUTCOME_CELLS`, so resampling rows is
    exactly a multinomial draw of those counts; this costs nothing at any n.

    Parameters
    ----------
    labels : array-like of shape (n,)
    outcome : ndarray of shape (n,)
        From `outcomes`.
    n_boot, level, seed
        As in `bootstrap_calibration`.
    """
    counts = np.bincount(outcome_cells(labels, outcome), minlength=len(OUTCOME_CELLS))
    n = int(counts.sum())
    point = routing_rates(counts)
    if n == 0:
        return {k: _interval(np.array([0.0]), float(v), level) for k, v in point.items()}
    draws = routing_rates(np.random.default_rng(seed).multinomial(n, counts / n, size=n_boot))
    return {k: _interval(draws[k], float(point[k]), level) for k in point}

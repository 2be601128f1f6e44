"""Certifying a two-stage cascade as one router, with `certify.py`'s guarantee.

The promise is the one `certify_threshold` makes, about the cascade as a whole: with
probability at least 1 − δ over the draw of the certify rows, the misroute rate among
the requests the cascade routes (whichever stage routed them) is at most α.

The thresholds (t_fast, t_strong) are searched jointly on a 2-D grid fixed in advance:

- t_fast walks `FAST_GRID` (a few values, fixed before any data is seen); t_strong
  walks certify.py's `THRESHOLD_GRID` at or below t_fast (an earlier stage is never
  looser than a later one: `router.contracts.Policy` refuses that).
- For each t_fast, the rows the fast stage routes at t_fast are routed whatever
  t_strong is; the others are routed when the strong stage routes them at t_strong.
  So the cascade's counts at (t_fast, ·) are certify.py's `threshold_curve` of one
  effective answer per row — the fast stage's choice at confidence 1 where it routes,
  the strong stage's choice and confidence elsewhere — and certify.py's fixed-sequence
  walk over t_strong tests them unchanged.
- The walks are a Bonferroni family: each runs at δ / len(fast grid), so every
  certified pair of every walk holds together with probability ≥ 1 − δ, and any of them
  may be chosen: the most coverage (or, with costs, the least cost), ties to the
  smaller t_fast (more traffic on the fast path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.certify import (
    THRESHOLD_GRID,
    Certification,
    certify_threshold,
    check_certify_size,
)
from calibration.recalibrate import choices_and_confidence
from router.contracts import Calibrator
from router.errors import CalibrationError
from router.routing.calibrators import apply_calibrator_array

FAST_GRID = (0.99, 0.98, 0.97, 0.95, 0.93, 0.90, 0.85, 0.80)
"""The fast stage's thresholds, strict to loose, fixed before any data is seen."""

METHOD = ("learn-then-test over the cascade's (t_fast, t_strong) grid: Bonferroni over "
          f"{len(FAST_GRID)} fast thresholds, fixed sequence over strong thresholds, "
          "binomial tail")


@dataclass(frozen=True)
class StageRows:
    """One stage's recalibrated answers on the certify rows, arrays of shape (n,)."""

    choices: np.ndarray
    confidences: np.ndarray


@dataclass(frozen=True)
class CascadeCertification:
    """The family of walks and the chosen pair (None when no pair is certified)."""

    alpha: float
    delta: float
    fast_grid: tuple[float, ...]
    walks: tuple[Certification, ...]
    """One fixed-sequence walk over t_strong per fast threshold, each at δ / len(grid)."""
    fast_routes: tuple[int, ...]
    """Rows the fast stage routes at each fast threshold."""
    chosen: int | None
    n: int

    @property
    def certified(self) -> bool:
        return self.chosen is not None

    @property
    def t_fast(self) -> float | None:
        return None if self.chosen is None else self.fast_grid[self.chosen]

    @property
    def walk(self) -> Certification | None:
        return None if self.chosen is None else self.walks[self.chosen]

    @property
    def t_strong(self) -> float | None:
        return None if self.walk is None else self.walk.threshold

    @property
    def routed(self) -> int:
        return 0 if self.walk is None else self.walk.routed

    @property
    def misroutes(self) -> int:
        return 0 if self.walk is None else self.walk.misroutes

    @property
    def upper_bound(self) -> float | None:
        return None if self.walk is None else self.walk.upper_bound

    @property
    def fast_share(self) -> float:
        """Share of certify rows the fast stage answers at the chosen t_fast."""
        return 0.0 if self.chosen is None or not self.n else self.fast_routes[self.chosen] / self.n


def stage_rows(probabilities: np.ndarray, calibrator: Calibrator) -> StageRows:
    """A stage's raw (n, 4) probabilities, recalibrated as the gateway does."""
    choices, confidences, _ = choices_and_confidence(
        apply_calibrator_array(np.asarray(probabilities, dtype=float), calibrator))
    return StageRows(np.asarray(choices), np.asarray(confidences, dtype=float))


def effective_answers(fast: StageRows, strong: StageRows, t_fast: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the cascade's answer at t_fast as one (choice, confidence): the fast
    choice at confidence 1 where the fast stage routes, else the strong stage's; and
    the mask of the rows the fast stage answers."""
    by_fast = (fast.choices != "unclear") & (fast.confidences >= t_fast)
    return (np.where(by_fast, fast.choices, strong.choices),
            np.where(by_fast, 1.0, strong.confidences), by_fast)


def certify_cascade(
    labels: np.ndarray,
    fast: StageRows,
    strong: StageRows,
    *,
    alpha: float,
    delta: float,
    fast_grid: tuple[float, ...] = FAST_GRID,
    grid: np.ndarray = THRESHOLD_GRID,
    cost_misroute: float | None = None,
    cost_clarify: float | None = None,
    check_size: bool = True,
) -> CascadeCertification:
    """Certify (t_fast, t_strong) with P(misroute_rate_routed of the cascade > α) ≤ δ.

    Parameters
    ----------
    labels : ndarray of str, shape (n,)
    fast, strong : StageRows
        Both stages' recalibrated answers on the same certify rows (`stage_rows`).
    alpha, delta : float
        As in `calibration.certify.certify_threshold`; δ is the whole family's.
    fast_grid : tuple of float
        The fast stage's thresholds, strict to loose.
    grid : ndarray of shape (m,)
        The strong stage's thresholds, strict to loose; each walk keeps those ≤ t_fast.
    cost_misroute, cost_clarify : float, optional
        Choose the certified pair of least cost on the certify rows instead of the one
        routing the most clear requests.
    check_size : bool
        Refuse below 50 rows and warn below 200 (as `certify_threshold`).

    Returns
    -------
    CascadeCertification
    """
    labels = np.asarray(labels)
    if not (len(labels) == len(fast.choices) == len(strong.choices)):
        raise CalibrationError(f"{len(labels)} labels, {len(fast.choices)} fast and "
                               f"{len(strong.choices)} strong answers; one each per row")
    if not fast_grid:
        raise CalibrationError("an empty fast-threshold grid")
    if check_size:
        check_certify_size(len(labels))
    share = delta / len(fast_grid)
    walks, fast_routes = [], []
    for t_fast in fast_grid:
        choices, confidences, by_fast = effective_answers(fast, strong, t_fast)
        walks.append(certify_threshold(
            labels, choices, confidences, alpha=alpha, delta=share,
            grid=np.asarray(grid)[np.asarray(grid) <= t_fast + 1e-12],
            cost_misroute=cost_misroute, cost_clarify=cost_clarify, check_size=False))
        fast_routes.append(int(by_fast.sum()))
    chosen = _choose(walks, fast_grid, cost_misroute, cost_clarify)
    return CascadeCertification(alpha, delta, tuple(fast_grid), tuple(walks),
                                tuple(fast_routes), chosen, len(labels))


def _choose(walks: list[Certification], fast_grid: tuple[float, ...],
            cost_misroute: float | None, cost_clarify: float | None) -> int | None:
    """The walk whose chosen pair covers most (or costs least); ties to the looser t_fast."""
    best: tuple[float, float] | None = None
    chosen = None
    for index, walk in enumerate(walks):
        if walk.chosen is None:
            continue
        curve, j = walk.curve, walk.chosen
        if cost_misroute is not None and cost_clarify is not None:
            value = -(cost_misroute * curve.misroutes[j] + cost_clarify * curve.clarify_unneeded[j])
        else:
            value = float(curve.n_clear - curve.clarify_unneeded[j])
        key = (float(value), -fast_grid[index])
        if best is None or key > best:
            best, chosen = key, index
    return chosen

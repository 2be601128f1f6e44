"""Choosing the clarify threshold with a finite-sample guarantee (Learn-then-Test).

The promise: with probability at least 1 − δ over the draw of the certify rows, the
misroute rate among routed requests at the certified threshold λ̂ is at most α
(`misroute_rate_routed` ≤ α, for requests drawn like the certify rows).

How (Angelopoulos et al., "Learn then Test", fixed-sequence testing):

1. A grid of thresholds is fixed in advance, walked from strict to loose
   (`THRESHOLD_GRID`: 0.99, 0.98, …, 0.00).
2. At each λ, with n routed certify rows and k misroutes among them, the null
   "misroute rate at λ > α" gets the p-value p = P(Bin(n, α) ≤ k): given n, the misroutes
   are Bin(n, rate(λ)), so p is valid for every λ whose rate exceeds α.
3. The walk stops at the first p > δ; every λ before it is certified. Fixed-sequence
   testing controls the family-wise error at δ, so *all* certified thresholds keep the
   promise together — which is why a cost (`--cost-misroute`, `--cost-clarify`) may pick
   any of them, not only the loosest (the default).

Where the walk starts: the strictest thresholds route very few rows, and there one
misroute is enough to end the walk before it gets anywhere (below
``n_min = ⌈ln δ / ln(1 − α)⌉`` routed rows not even zero misroutes pass). So the walk
starts at the first λ routing at least `walk_start_count(α, δ)` certify rows: the fewest
rows at which an observed rate of α/2 would already be certified. Routed sets are
nested, so the skipped thresholds are a prefix of the grid, and the start depends only
on how many rows are routed, never on their labels. The simulation test checks the
promise over thousands of draws.

Per route (`--per-route`): each actionable route walks its own grid at δ/3 (Bonferroni),
so all three promises hold together with probability ≥ 1 − δ, and so does the overall
one (a mixture of rates ≤ α is ≤ α).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.stats import beta, binom

from router.contracts import ACTIONABLE_ROUTES, ROUTES
from router.errors import CalibrationError

THRESHOLD_GRID = np.round(np.arange(99, -1, -1) / 100, 2)
"""Strict to loose, fixed before any data is seen."""
MIN_CERTIFY_ROWS = 50
WARN_CERTIFY_ROWS = 200
PER_ROUTE = tuple(r for r in ROUTES if r in ACTIONABLE_ROUTES)


class CalibrationWarning(UserWarning):
    """A soft problem with calibration data (too few rows for a strong guarantee)."""


@dataclass(frozen=True)
class ThresholdCurve:
    """Counts at each grid threshold (arrays of shape (m,)) over n rows."""

    thresholds: np.ndarray
    routed: np.ndarray
    misroutes: np.ndarray
    clarify_unneeded: np.ndarray
    n: int
    n_clear: int

    @property
    def misroute_rate_routed(self) -> np.ndarray:
        rate: np.ndarray = np.divide(self.misroutes, self.routed,
                                     out=np.zeros(len(self.routed)), where=self.routed > 0)
        return rate

    @property
    def coverage(self) -> np.ndarray:
        """Routed clear requests / clear requests (routed unclear ones are misroutes)."""
        routed_clear = self.n_clear - self.clarify_unneeded
        return routed_clear / self.n_clear if self.n_clear else np.zeros(len(self.routed))


@dataclass(frozen=True)
class Certification:
    """The outcome of one fixed-sequence walk."""

    alpha: float
    delta: float
    curve: ThresholdCurve
    p_values: np.ndarray
    tested: np.ndarray
    accepted: np.ndarray
    chosen: int | None
    upper_bound: float | None
    route: str | None = None

    @property
    def certified(self) -> bool:
        return self.chosen is not None

    @property
    def threshold(self) -> float | None:
        return None if self.chosen is None else float(self.curve.thresholds[self.chosen])

    @property
    def routed(self) -> int:
        return 0 if self.chosen is None else int(self.curve.routed[self.chosen])

    @property
    def misroutes(self) -> int:
        return 0 if self.chosen is None else int(self.curve.misroutes[self.chosen])

    @property
    def stopped_at(self) -> int | None:
        """Grid index where the walk ended (the first tested p > δ), if it did."""
        failed = np.flatnonzero(self.tested & (self.p_values > self.delta))
        return None if len(failed) == 0 else int(failed[0])


@dataclass(frozen=True)
class RowsNeeded:
    """How many more labelled certify rows would certify α at the observed error rate."""

    threshold: float
    observed_rate: float
    routed_needed: int
    certify_rows_needed: int
    more_certify_rows: int


def min_routed_for_certification(alpha: float, delta: float) -> int:
    """Least n for which zero misroutes out of n certify α at level δ: ⌈ln δ / ln(1 − α)⌉."""
    return math.ceil(math.log(delta) / math.log1p(-alpha) - 1e-12)


@functools.lru_cache(maxsize=64)
def walk_start_count(alpha: float, delta: float) -> int:
    """Least n at which ⌊α·n/2⌋ misroutes out of n certify α at level δ (≥ n_min)."""
    low = min_routed_for_certification(alpha, delta)
    while True:
        ns = np.arange(low, 4 * low + 1)
        ok = np.flatnonzero(binom.cdf(np.floor(alpha * ns / 2), ns, alpha) <= delta)
        if len(ok):
            return int(ns[ok[0]])
        low = 4 * low + 1


def binomial_p_value(misroutes: np.ndarray, routed: np.ndarray, alpha: float) -> np.ndarray:
    """P(Bin(n, α) ≤ k) elementwise: small when k misroutes of n are unlikely if rate > α.

    Parameters
    ----------
    misroutes, routed : ndarray of int, shape (m,)
    alpha : float

    Returns
    -------
    ndarray of shape (m,)
        1.0 where n = 0 (nothing to test).
    """
    routed = np.asarray(routed)
    return np.where(routed > 0, binom.cdf(misroutes, routed, alpha), 1.0)


def clopper_pearson_upper(misroutes: int, routed: int, *, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial rate.

    Parameters
    ----------
    misroutes, routed : int
        k errors out of n trials.
    confidence : float
        e.g. 1 − δ; equals statsmodels' two-sided ``method="beta"`` bound at
        ``alpha = 2(1 − confidence)``.
    """
    if routed == 0 or misroutes >= routed:
        return 1.0
    return float(beta.ppf(confidence, misroutes + 1, routed - misroutes))


def threshold_curve(
    labels: np.ndarray,
    choices: np.ndarray,
    confidences: np.ndarray,
    *,
    grid: np.ndarray = THRESHOLD_GRID,
    margins: np.ndarray | None = None,
    min_margin: float | None = None,
    route: str | None = None,
) -> ThresholdCurve:
    """Routed, misroute and needless-clarify counts at every grid threshold.

    Parameters
    ----------
    labels, choices : ndarray of str, shape (n,)
    confidences : ndarray of shape (n,)
    grid : ndarray of shape (m,)
    margins, min_margin : optional
        Top-2 margins (n,) and the least margin that may route.
    route : str, optional
        Count only rows whose choice is this route (per-route certification).
    """
    labels, choices = np.asarray(labels), np.asarray(choices)
    confidences = np.asarray(confidences, dtype=float)
    scope = np.ones(len(labels), dtype=bool) if route is None else choices == route
    routable = scope & (choices != "unclear")
    if min_margin is not None and margins is not None:
        routable &= np.asarray(margins, dtype=float) >= min_margin
    clear = scope & (labels != "unclear")

    def at_or_above(mask: np.ndarray) -> np.ndarray:
        values = np.sort(confidences[mask])
        return len(values) - np.searchsorted(values, grid, side="left")

    routed = at_or_above(routable)
    routed_clear = at_or_above(routable & clear)
    return ThresholdCurve(
        thresholds=np.asarray(grid, dtype=float),
        routed=routed,
        misroutes=at_or_above(routable & (choices != labels)),
        clarify_unneeded=int(clear.sum()) - routed_clear,
        n=int(scope.sum()),
        n_clear=int(clear.sum()),
    )


def check_certify_size(n: int) -> None:
    """Refuse below 50 certify rows; warn below 200."""
    if n < MIN_CERTIFY_ROWS:
        raise CalibrationError(f"{n} certify rows; need at least {MIN_CERTIFY_ROWS}")
    if n < WARN_CERTIFY_ROWS:
        warnings.warn(
            f"{n} certify rows; below {WARN_CERTIFY_ROWS} the certified threshold is "
            "likely to be strict (few rows routed)",
            CalibrationWarning,
            stacklevel=2,
        )


def walk_fixed_sequence(curve: ThresholdCurve, *, alpha: float, delta: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p-values, tested and accepted flags (each shape (m,)) of the fixed-sequence walk."""
    p_values = binomial_p_value(curve.misroutes, curve.routed, alpha)
    tested = curve.routed >= walk_start_count(alpha, delta)
    accepted = np.zeros(len(p_values), dtype=bool)
    for j in np.flatnonzero(tested):
        if p_values[j] > delta:
            break
        accepted[j] = True
    return p_values, tested, accepted


def certify_threshold(
    labels: np.ndarray,
    choices: np.ndarray,
    confidences: np.ndarray,
    *,
    alpha: float,
    delta: float,
    grid: np.ndarray = THRESHOLD_GRID,
    margins: np.ndarray | None = None,
    min_margin: float | None = None,
    route: str | None = None,
    cost_misroute: float | None = None,
    cost_clarify: float | None = None,
    check_size: bool = True,
) -> Certification:
    """Certify a threshold λ̂ with P(misroute_rate_routed(λ̂) > α) ≤ δ.

    Parameters
    ----------
    labels, choices : ndarray of str, shape (n,)
        Certify rows' labels and the (recalibrated) model choices.
    confidences : ndarray of shape (n,)
        Choice confidences after recalibration, as the gateway computes them.
    alpha : float
        Largest acceptable misroute rate among routed requests, in (0, 1).
    delta : float
        Allowed probability that the promise fails, in (0, 1).
    grid : ndarray of shape (m,)
        Thresholds from strict to loose, fixed before seeing the data.
    margins, min_margin : optional
        With `min_margin`, a request also needs a top-2 margin ≥ it to route.
    route : str, optional
        Certify only requests whose choice is this route (see `certify_per_route`).
    cost_misroute, cost_clarify : float, optional
        When both are given, choose among certified thresholds the one with the least
        ``cost_misroute · misroutes + cost_clarify · needless clarifies`` on the certify
        rows (ties go to the looser threshold); otherwise the loosest certified one.
    check_size : bool
        Refuse below 50 rows and warn below 200 (the simulation turns this off).

    Returns
    -------
    Certification
        With `upper_bound`, the one-sided (1 − δ) Clopper–Pearson bound at the chosen λ.
    """
    if not (0 < alpha < 1 and 0 < delta < 1):
        raise CalibrationError(f"alpha={alpha}, delta={delta}; both must be in (0, 1)")
    if check_size:
        check_certify_size(len(labels))
    curve = threshold_curve(labels, choices, confidences, grid=grid, margins=margins,
                            min_margin=min_margin, route=route)
    p_values, tested, accepted = walk_fixed_sequence(curve, alpha=alpha, delta=delta)
    chosen = _choose(curve, accepted, cost_misroute, cost_clarify)
    upper = None if chosen is None else clopper_pearson_upper(
        int(curve.misroutes[chosen]), int(curve.routed[chosen]), confidence=1 - delta
    )
    return Certification(alpha, delta, curve, p_values, tested, accepted, chosen, upper, route)


def _choose(curve: ThresholdCurve, accepted: np.ndarray, cost_misroute: float | None,
            cost_clarify: float | None) -> int | None:
    """Index of the chosen certified threshold: least cost, else the loosest."""
    candidates = np.flatnonzero(accepted)
    if len(candidates) == 0:
        return None
    if cost_misroute is None or cost_clarify is None:
        return int(candidates[-1])
    cost = cost_misroute * curve.misroutes[candidates] + cost_clarify * curve.clarify_unneeded[
        candidates
    ]
    best = np.flatnonzero(cost == cost.min())
    return int(candidates[best[-1]])


def expected_cost(curve: ThresholdCurve, index: int, *, cost_misroute: float,
                  cost_clarify: float) -> float:
    """Mean cost per request at one grid threshold."""
    total = cost_misroute * curve.misroutes[index] + cost_clarify * curve.clarify_unneeded[index]
    return float(total / curve.n) if curve.n else 0.0


def certify_per_route(
    labels: np.ndarray,
    choices: np.ndarray,
    confidences: np.ndarray,
    *,
    alpha: float,
    delta: float,
    **options: Any,
) -> dict[str, Certification]:
    """One certification per actionable route, each at δ/3 (Bonferroni).

    Parameters are those of `certify_threshold`; `delta` is the total, split evenly.

    Returns
    -------
    dict
        Route → Certification (some may be uncertified).
    """
    check_certify_size(len(labels))
    share = delta / len(PER_ROUTE)
    return {
        route: certify_threshold(labels, choices, confidences, alpha=alpha, delta=share,
                                 route=route, check_size=False, **options)
        for route in PER_ROUTE
    }


def rows_needed(curve: ThresholdCurve, *, alpha: float, delta: float,
                n_certify: int | None = None) -> RowsNeeded | None:
    """Fewest certify rows that would certify some grid λ if its error rate held.

    At each λ with observed rate r̂ = k/n < α, find the least n′ whose one-sided (1 − δ)
    Clopper–Pearson bound at k′ = r̂·n′ is ≤ α, and scale by the share of certify rows
    that λ routes among all `n_certify` certify rows (default: the curve's rows; per route,
    pass the total). Returns the cheapest λ that needs more rows than there are, or None
    when there is none (r̂ ≥ α everywhere, or the walk ended at a stricter threshold whose
    misroutes were too many — more rows at the same rates would not change that).
    """
    total = curve.n if n_certify is None else n_certify
    best: RowsNeeded | None = None
    for j, threshold in enumerate(curve.thresholds):
        n, k = int(curve.routed[j]), int(curve.misroutes[j])
        if n == 0 or k / n >= alpha:
            continue
        routed_needed = max(_routed_needed(k / n, alpha=alpha, delta=delta),
                            walk_start_count(alpha, delta))
        certify_needed = math.ceil(routed_needed * total / n)
        if certify_needed <= total:
            continue  # enough rows already: the walk ended before reaching this threshold
        if best is None or certify_needed < best.certify_rows_needed:
            best = RowsNeeded(float(threshold), k / n, routed_needed, certify_needed,
                              max(0, certify_needed - total))
    return best


def _routed_needed(rate: float, *, alpha: float, delta: float) -> int:
    """Least n with the Clopper–Pearson upper bound at k = rate·n at most α."""
    if rate == 0:
        return min_routed_for_certification(alpha, delta)

    def excess(n: float) -> float:
        k = rate * n
        return float(beta.ppf(1 - delta, k + 1, n - k)) - alpha

    low, high = 1.0, 10.0
    if excess(low) <= 0:
        return 1
    while excess(high) > 0:
        low, high = high, high * 10
        if high > 1e12:
            return int(1e12)
    return math.ceil(float(brentq(excess, low, high, xtol=0.5)))

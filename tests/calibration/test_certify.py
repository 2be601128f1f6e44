from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import beta, binom
from statsmodels.stats.proportion import proportion_confint

from calibration.certify import (
    THRESHOLD_GRID,
    CalibrationWarning,
    binomial_p_value,
    certify_per_route,
    certify_threshold,
    clopper_pearson_upper,
    min_routed_for_certification,
    rows_needed,
    threshold_curve,
    walk_start_count,
)
from router.errors import CalibrationError

# --- synthetic routing data with a known misroute rate ---------------------------------
# Confidence s ~ U(0, 1); a routed request is misrouted with probability q(s) = c (1 - s).
# The true misroute rate among requests routed at λ is the mean of q over [λ, 1]:
#     r(λ) = c (1 - λ) / 2.


def _draw(rng: np.random.Generator, n: int, c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = rng.uniform(size=n)
    wrong = rng.uniform(size=n) < c * (1 - s)
    labels = np.where(wrong, "account", "refund")
    return labels, np.full(n, "refund"), s


def _true_rate(threshold: float, c: float) -> float:
    return c * (1 - threshold) / 2


def _flat_draw(rng: np.random.Generator, n: int, rate: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = rng.uniform(size=n)
    labels = np.where(rng.uniform(size=n) < rate, "other", "refund")
    return labels, np.full(n, "refund"), s


def _naive_threshold(labels: np.ndarray, choices: np.ndarray, s: np.ndarray, alpha: float
                     ) -> float | None:
    """What one would do without a guarantee: the loosest λ whose empirical rate is ≤ α."""
    curve = threshold_curve(labels, choices, s)
    ok = np.flatnonzero((curve.routed > 0) & (curve.misroute_rate_routed <= alpha))
    return None if len(ok) == 0 else float(curve.thresholds[ok[-1]])


DRAWS = 2000
TOLERANCE_QUANTILE = 1 - 1e-4


@pytest.mark.parametrize(
    ("scenario", "alpha", "delta", "c", "power"),
    [("sloped", 0.10, 0.10, 0.6, 0.9), ("flat_just_above_alpha", 0.10, 0.10, 0.0, 0.0),
     ("sloped", 0.05, 0.05, 0.3, 0.7)],
)
def test_simulated_guarantee_holds(scenario: str, alpha: float, delta: float, c: float,
                                   power: float) -> None:
    """Over 1,000 draws, certified thresholds whose true rate exceeds α occur in ≤ δ of runs.

    Tolerance: if failures happened with probability exactly δ, their count would be
    Bin(DRAWS, δ); the test allows up to its 1 - 1e-4 quantile, so a correct procedure
    fails this test with probability below 1e-4.
    """
    rng = np.random.default_rng(20261130)
    n, flat_rate = 1500, alpha * 1.15
    failures = naive_failures = certified = 0
    for _ in range(DRAWS):
        if scenario == "sloped":
            labels, choices, s = _draw(rng, n, c)
        else:
            labels, choices, s = _flat_draw(rng, n, flat_rate)
        result = certify_threshold(labels, choices, s, alpha=alpha, delta=delta, check_size=False)
        naive = _naive_threshold(labels, choices, s, alpha)

        def true_rate(threshold: float) -> float:
            return _true_rate(threshold, c) if scenario == "sloped" else flat_rate

        if result.certified:
            certified += 1
            failures += true_rate(result.threshold) > alpha
        naive_failures += naive is not None and true_rate(naive) > alpha
    allowed = int(binom.ppf(TOLERANCE_QUANTILE, DRAWS, delta))
    print(f"{scenario}: {failures} broken, {naive_failures} naive broken, {certified} certified, "
          f"allowed {allowed}")
    assert failures <= allowed, f"{failures}/{DRAWS} runs broke the promise (allowed {allowed})"
    # The simulation can see a broken promise: the naive rule breaks it far more often.
    assert naive_failures > allowed
    assert certified >= power * DRAWS  # and the procedure is not vacuous


def test_p_values_and_walk_by_hand() -> None:
    # 300 rows: confidences 0.995 (100 rows, 0 wrong), 0.955 (100 rows, 2 wrong),
    # 0.905 (100 rows, 30 wrong). alpha 0.05, delta 0.1 -> n_min = 45.
    labels = np.array(["refund"] * 100 + ["refund"] * 98 + ["other"] * 2
                      + ["refund"] * 70 + ["other"] * 30)
    choices = np.full(300, "refund")
    s = np.repeat([0.995, 0.955, 0.905], 100)
    result = certify_threshold(labels, choices, s, alpha=0.05, delta=0.1, check_size=False)
    at = {round(t, 2): j for j, t in enumerate(result.curve.thresholds)}
    assert result.curve.routed[at[0.99]] == 100 and result.curve.misroutes[at[0.95]] == 2
    assert result.p_values[at[0.99]] == pytest.approx(0.95**100)
    assert result.p_values[at[0.95]] == pytest.approx(binom.cdf(2, 200, 0.05))
    assert result.p_values[at[0.90]] > 0.1  # 32 of 300: the walk stops here
    assert result.threshold == pytest.approx(0.91)  # loosest λ before 0.90
    assert result.routed == 200 and result.misroutes == 2
    assert result.upper_bound == pytest.approx(
        proportion_confint(2, 200, alpha=0.2, method="beta")[1]
    )


def test_the_walk_starts_where_a_rate_of_half_alpha_would_pass() -> None:
    assert min_routed_for_certification(0.02, 0.05) == 149
    assert 0.98**149 <= 0.05 < 0.98**148  # below 149 rows not even 0 misroutes pass
    start = walk_start_count(0.02, 0.05)
    assert binom.cdf(np.floor(0.01 * start), start, 0.02) <= 0.05
    assert all(binom.cdf(np.floor(0.01 * n), n, 0.02) > 0.05 for n in range(149, start))
    for n, certified in ((start - 1, False), (start, True)):
        labels = np.full(n, "refund")
        result = certify_threshold(labels, labels, np.full(n, 0.99), alpha=0.02, delta=0.05,
                                   check_size=False)
        assert result.certified is certified
        assert bool(result.tested.any()) is certified


@pytest.mark.parametrize(("k", "n", "confidence"), [(0, 10, 0.95), (3, 50, 0.9), (17, 400, 0.99)])
def test_clopper_pearson_matches_statsmodels(k: int, n: int, confidence: float) -> None:
    expected = proportion_confint(k, n, alpha=2 * (1 - confidence), method="beta")[1]
    assert clopper_pearson_upper(k, n, confidence=confidence) == pytest.approx(expected)
    # and the duality the certification rests on: bound <= alpha iff p-value <= delta
    assert binom.cdf(k, n, expected) == pytest.approx(1 - confidence)


def test_binomial_p_value_matches_scipy() -> None:
    p = binomial_p_value(np.array([0, 3, 0]), np.array([10, 100, 0]), 0.05)
    assert p.tolist() == pytest.approx([binom.cdf(0, 10, 0.05), binom.cdf(3, 100, 0.05), 1.0])


def test_cost_picks_the_cheapest_certified_threshold() -> None:
    rng = np.random.default_rng(4)
    labels, choices, s = _draw(rng, 3000, 0.6)
    loosest = certify_threshold(labels, choices, s, alpha=0.1, delta=0.1, check_size=False)
    cautious = certify_threshold(labels, choices, s, alpha=0.1, delta=0.1, check_size=False,
                                 cost_misroute=1000.0, cost_clarify=1.0)
    accepted = np.flatnonzero(loosest.accepted)
    curve = loosest.curve
    costs = 1000.0 * curve.misroutes[accepted] + curve.clarify_unneeded[accepted]
    assert cautious.chosen == accepted[np.flatnonzero(costs == costs.min())[-1]]
    assert cautious.threshold > loosest.threshold
    assert cautious.accepted[cautious.chosen]


def test_per_route_uses_bonferroni_and_margin_rule() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    choices = rng.choice(["refund", "account", "other"], size=n)
    s = rng.uniform(size=n)
    wrong = rng.uniform(size=n) < 0.3 * (1 - s)
    labels = np.where(wrong, "unclear", choices)
    results = certify_per_route(labels, choices, s, alpha=0.1, delta=0.09)
    assert set(results) == {"refund", "account", "other"}
    for route, result in results.items():
        assert result.delta == pytest.approx(0.03)
        alone = certify_threshold(labels[choices == route], choices[choices == route],
                                  s[choices == route], alpha=0.1, delta=0.03, check_size=False)
        assert result.threshold == alone.threshold
    margins = np.where(np.arange(n) % 2 == 0, 0.5, 0.01)
    with_margin = threshold_curve(labels, choices, s, margins=margins, min_margin=0.1)
    assert with_margin.routed[-1] == int(np.sum(margins >= 0.1))


def test_unclear_choices_never_route_but_routing_an_unclear_label_is_a_misroute() -> None:
    labels = np.array(["unclear", "unclear", "refund"])
    choices = np.array(["refund", "unclear", "refund"])
    curve = threshold_curve(labels, choices, np.array([0.9, 0.9, 0.9]), grid=np.array([0.5]))
    assert (curve.routed[0], curve.misroutes[0], curve.clarify_unneeded[0]) == (2, 1, 0)


def test_certify_size_limits() -> None:
    labels = np.full(49, "refund")
    with pytest.raises(CalibrationError, match="49 certify rows; need at least 50"):
        certify_threshold(labels, labels, np.ones(49), alpha=0.1, delta=0.1)
    labels = np.full(120, "refund")
    with pytest.warns(CalibrationWarning, match="120 certify rows"):
        certify_threshold(labels, labels, np.ones(120), alpha=0.1, delta=0.1)
    labels = np.full(200, "refund")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        certify_threshold(labels, labels, np.ones(200), alpha=0.1, delta=0.1)


@pytest.mark.parametrize(("alpha", "delta"), [(0.0, 0.1), (1.0, 0.1), (0.1, 0.0), (0.1, 1.5)])
def test_bad_alpha_or_delta(alpha: float, delta: float) -> None:
    labels = np.full(300, "refund")
    with pytest.raises(CalibrationError, match="must be in"):
        certify_threshold(labels, labels, np.ones(300), alpha=alpha, delta=delta)


def test_rows_needed_when_nothing_is_certified() -> None:
    # 100 routed at 0.99 with one misroute (rate 1%); alpha 2% needs more rows.
    labels = np.array(["refund"] * 99 + ["other"] + ["unclear"] * 100)
    choices = np.array(["refund"] * 100 + ["unclear"] * 100)
    s = np.concatenate([np.full(100, 0.995), np.full(100, 0.5)])
    result = certify_threshold(labels, choices, s, alpha=0.02, delta=0.05, check_size=False)
    assert not result.certified
    need = rows_needed(result.curve, alpha=0.02, delta=0.05)
    assert need is not None and need.observed_rate == pytest.approx(0.01)
    # at rate 1%, the least n with a Clopper-Pearson bound <= 2%
    n = need.routed_needed
    assert beta.ppf(0.95, 0.01 * n + 1, 0.99 * n) <= 0.02
    assert beta.ppf(0.95, 0.01 * (n - 1) + 1, 0.99 * (n - 1)) > 0.02
    assert need.certify_rows_needed == math.ceil(n * 200 / 100)
    assert need.more_certify_rows == need.certify_rows_needed - 200


def test_rows_needed_is_none_when_every_rate_is_above_alpha() -> None:
    labels = np.array(["other"] * 10 + ["refund"] * 10)
    curve = threshold_curve(labels, np.full(20, "refund"), np.full(20, 0.9))
    assert rows_needed(curve, alpha=0.02, delta=0.05) is None


def test_grid_runs_strict_to_loose() -> None:
    assert THRESHOLD_GRID[0] == pytest.approx(0.99) and THRESHOLD_GRID[-1] == 0.0
    assert np.all(np.diff(THRESHOLD_GRID) < 0)


def test_rows_needed_per_route_counts_all_certify_rows() -> None:
    labels = np.array(["refund"] * 99 + ["other"] + ["unclear"] * 100)
    choices = np.array(["refund"] * 100 + ["unclear"] * 100)
    s = np.concatenate([np.full(100, 0.995), np.full(100, 0.5)])
    curve = threshold_curve(labels, choices, s, route="refund")
    alone = rows_needed(curve, alpha=0.02, delta=0.05)
    among_all = rows_needed(curve, alpha=0.02, delta=0.05, n_certify=600)
    assert alone is not None and among_all is not None
    assert among_all.certify_rows_needed == math.ceil(alone.routed_needed * 600 / 100)
    assert among_all.more_certify_rows == among_all.certify_rows_needed - 600

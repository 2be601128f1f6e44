"""Certifying a two-stage cascade as one router (`calibration.cascade`)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.cascade import FAST_GRID, StageRows, certify_cascade, effective_answers
from calibration.certify import THRESHOLD_GRID, certify_threshold
from router.errors import CalibrationError
from router.routing.cascade import answering_stage_rows

# --- a synthetic population with known misroute rates ---------------------------------
# Every request is a refund. The fast stage's confidence f ~ U(0, 1) and it is wrong
# (says account) with probability 0.3 (1 - f); the strong stage's confidence g ~ U(0, 1)
# independently, wrong with probability 0.1 (1 - g). So the cascade's misroute rate at
# (t_fast, t_strong) is known in closed form, and a large draw stands in for it.


def _draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, StageRows, StageRows]:
    f, g = rng.uniform(size=n), rng.uniform(size=n)
    fast_wrong = rng.uniform(size=n) < 0.3 * (1 - f)
    strong_wrong = rng.uniform(size=n) < 0.1 * (1 - g)
    labels = np.full(n, "refund")
    return (labels,
            StageRows(np.where(fast_wrong, "account", "refund"), f),
            StageRows(np.where(strong_wrong, "account", "refund"), g))


def _true_rate(t_fast: float, t_strong: float) -> float:
    """Misroutes among routed: fast-routed mass P(f ≥ t_f) with mean error 0.3(1 − t_f)/2,
    the rest routed by the strong stage with mean error 0.1(1 − t_s)/2."""
    fast_mass, fast_err = 1 - t_fast, 0.3 * (1 - t_fast) / 2
    strong_mass, strong_err = t_fast * (1 - t_strong), 0.1 * (1 - t_strong) / 2
    return (fast_mass * fast_err + strong_mass * strong_err) / (fast_mass + strong_mass)


def _cascade_counts(labels: np.ndarray, fast: StageRows, strong: StageRows,
                    t_fast: float, t_strong: float) -> tuple[int, int]:
    """Routed and misrouted rows, decided row by row as the gateway decides them."""
    stage = answering_stage_rows(np.column_stack([fast.choices, strong.choices]),
                                 np.column_stack([fast.confidences, strong.confidences]),
                                 [t_fast, t_strong])
    choice = np.where(stage == 0, fast.choices, strong.choices)
    confidence = np.where(stage == 0, fast.confidences, strong.confidences)
    threshold = np.where(stage == 0, t_fast, t_strong)
    routed = (choice != "unclear") & (confidence >= threshold)
    return int(routed.sum()), int((routed & (choice != labels)).sum())


def test_the_certified_pair_counts_what_the_gateway_would_route() -> None:
    labels, fast, strong = _draw(np.random.default_rng(0), 5_000)
    result = certify_cascade(labels, fast, strong, alpha=0.03, delta=0.05)
    assert result.certified and result.t_fast is not None and result.t_strong is not None
    assert result.t_strong <= result.t_fast
    assert (result.routed, result.misroutes) == _cascade_counts(
        labels, fast, strong, result.t_fast, result.t_strong)
    assert result.misroutes / result.routed <= 0.03
    assert result.upper_bound is not None and result.upper_bound <= 0.03
    by_fast = (fast.choices != "unclear") & (fast.confidences >= result.t_fast)
    assert result.fast_share == pytest.approx(by_fast.mean())


def test_each_walk_is_certify_threshold_at_delta_over_the_family() -> None:
    labels, fast, strong = _draw(np.random.default_rng(1), 3_000)
    result = certify_cascade(labels, fast, strong, alpha=0.03, delta=0.05)
    assert len(result.walks) == len(FAST_GRID)
    t_fast = FAST_GRID[3]
    choices, confidences, _ = effective_answers(fast, strong, t_fast)
    alone = certify_threshold(labels, choices, confidences, alpha=0.03,
                              delta=0.05 / len(FAST_GRID),
                              grid=THRESHOLD_GRID[THRESHOLD_GRID <= t_fast], check_size=False)
    assert result.walks[3].threshold == alone.threshold
    np.testing.assert_array_equal(result.walks[3].p_values, alone.p_values)


def test_the_choice_covers_most_among_certified_pairs() -> None:
    labels, fast, strong = _draw(np.random.default_rng(2), 5_000)
    result = certify_cascade(labels, fast, strong, alpha=0.03, delta=0.05)
    covered = [w.curve.n_clear - w.curve.clarify_unneeded[w.chosen]
               for w in result.walks if w.chosen is not None]
    walk = result.walk
    assert walk is not None and walk.chosen is not None
    assert walk.curve.n_clear - walk.curve.clarify_unneeded[walk.chosen] == max(covered)


def test_no_guarantee_when_no_pair_keeps_the_promise() -> None:
    rng = np.random.default_rng(3)
    n = 2_000
    labels = np.full(n, "refund")
    wrong = StageRows(np.where(rng.uniform(size=n) < 0.2, "account", "refund"),
                      rng.uniform(size=n))
    result = certify_cascade(labels, wrong, wrong, alpha=0.02, delta=0.05)
    assert not result.certified
    assert result.t_fast is None and result.upper_bound is None and result.routed == 0


def test_too_few_rows_are_refused_and_mismatched_stages_too() -> None:
    labels, fast, strong = _draw(np.random.default_rng(4), 40)
    with pytest.raises(CalibrationError, match="need at least 50"):
        certify_cascade(labels, fast, strong, alpha=0.02, delta=0.05)
    with pytest.raises(CalibrationError, match="one each per row"):
        certify_cascade(labels[:-1], fast, strong, alpha=0.02, delta=0.05, check_size=False)


def test_the_promise_holds_over_many_draws() -> None:
    """P(true misroute rate at the certified pair > α) ≤ δ, over repeated certify sets
    (the rate in closed form, `_true_rate`); a naive pick at the observed rate breaks it
    far more often, so the draws can tell the two apart."""
    rng = np.random.default_rng(11)
    alpha, delta, draws = 0.03, 0.1, 300
    broken = certified = naive_broken = 0
    for _ in range(draws):
        labels, fast, strong = _draw(rng, 3_000)
        result = certify_cascade(labels, fast, strong, alpha=alpha, delta=delta,
                                 check_size=False)
        naive_broken += _true_rate(*_naive_pair(result.walks, alpha)) > alpha
        if result.t_fast is None or result.t_strong is None:
            continue
        certified += 1
        broken += _true_rate(result.t_fast, result.t_strong) > alpha
    assert certified > draws * 0.9
    assert broken / draws <= delta
    assert naive_broken / draws > 2 * delta


def _naive_pair(walks: tuple, alpha: float) -> tuple[float, float]:
    """The pair routing the most rows whose *observed* rate is at most α (no test)."""
    best: tuple[int, float, float] = (-1, 1.0, 1.0)
    for t_fast, walk in zip(FAST_GRID, walks, strict=True):
        curve = walk.curve
        ok = curve.misroutes <= alpha * curve.routed
        for j in np.flatnonzero(ok & (curve.routed > 0)):
            if curve.routed[j] > best[0]:
                best = (int(curve.routed[j]), t_fast, float(curve.thresholds[j]))
    return best[1], best[2]

"""The default policy `train` writes: the loosest certified threshold and its guarantee."""

from __future__ import annotations

import os

import pytest

from router.app.training import (
    CROSS_FIT_METHOD,
    DEFAULT_DELTA,
    TrainResult,
    certify_default_threshold,
)
from router.contracts import ROUTES, RouteScores


def _scores(choice: str, p: float) -> RouteScores:
    rest = (1 - p) / 3
    return RouteScores.from_probabilities("m", {r: (p if r == choice else rest) for r in ROUTES})


LABELS = ["refund"] * 10 + ["unclear"] + ["account"] * 1000 + ["other"] * 50
PREDICTED = (
    [_scores("refund", 0.999)] * 10
    + [_scores("refund", 0.999)]  # the one confident misroute
    + [_scores("account", 0.95)] * 1000
    + [_scores("refund", 0.5)] * 50  # wrong, at confidence 1/3
)


def test_the_default_threshold_is_the_loosest_certified_one_and_carries_its_guarantee() -> None:
    """One confident misroute among many right answers still certifies; the low-confidence
    mistakes below it do not, so the walk stops just above them."""
    threshold, guarantee = certify_default_threshold(LABELS, PREDICTED)
    assert threshold == 0.34
    assert guarantee is not None
    assert (guarantee.alpha, guarantee.delta) == (0.02, DEFAULT_DELTA)
    assert guarantee.n_certify == len(LABELS)
    assert guarantee.misroutes == 1
    # The one-sided Clopper-Pearson bound for 1 misroute in 1,011 routed rows at 95%.
    assert guarantee.upper_bound == pytest.approx(0.00469, abs=5e-5)
    assert guarantee.method == CROSS_FIT_METHOD


@pytest.mark.parametrize("n", [11, 211], ids=["eleven-rows", "too-few-for-two-percent"])
def test_too_few_rows_give_the_strictest_threshold_and_no_guarantee(n: int) -> None:
    """Eleven rows with one misroute certify nothing; 211 rows observe 0.5% at 0.34 but
    are too few to promise 2%."""
    assert certify_default_threshold(LABELS[:n], PREDICTED[:n]) == (0.99, None)


def test_the_trained_policy_carries_the_drift_reference_of_its_threshold_rows(
        trained: TrainResult) -> None:
    """`train` summarises the out-of-fold decisions it certified the threshold on."""
    if os.environ.get("SUPPORT_ROUTER_TEST_TRAINED_DIR") and trained.policy.reference is None:
        pytest.skip("the reused model folder was trained before policies carried a reference")
    reference = trained.policy.reference
    assert reference is not None
    assert reference.n == trained.policy.data.n_certify
    assert 0 < reference.routed < reference.n
    assert len(reference.languages) >= 12  # every language of the routing data
    assert "out-of-fold" in reference.source

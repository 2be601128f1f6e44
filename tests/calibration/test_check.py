from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from calibration.check import (
    check_guarantee,
    expected_question_sha,
    format_check,
    model_mismatches,
)
from calibration.predictions import Predictions, local_question_sha
from router.contracts import Guarantee, Policy, PolicyModel
from router.errors import CalibrationError

MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="a" * 64)


def _policy(**extra: object) -> Policy:
    guarantee = Guarantee(alpha=0.05, delta=0.05, n_certify=500, misroutes=5, upper_bound=0.04)
    return Policy(version="v7", model=MODEL, threshold=0.5, guarantee=guarantee, **extra)


def _traffic(n_routed: int, misroutes: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows the policy routes (confidence 0.8 on refund); `misroutes` labelled other."""
    probabilities = np.tile([0.85, 0.05, 0.05, 0.05], (n_routed, 1))
    labels = np.array(["other"] * misroutes + ["refund"] * (n_routed - misroutes))
    return labels, probabilities


def test_check_holds_and_fails_with_the_exact_binomial_p_value() -> None:
    labels, probabilities = _traffic(200, 12)  # 6% observed vs alpha 5%: not significant
    result = check_guarantee(labels, probabilities, _policy())
    (test,) = result.tests
    assert (test.routed, test.misroutes) == (200, 12)
    assert test.p_value == pytest.approx(binom.sf(11, 200, 0.05))
    assert result.holds
    labels, probabilities = _traffic(200, 22)  # 11%: far too many
    result = check_guarantee(labels, probabilities, _policy())
    assert not result.holds
    text = format_check(result)
    assert "no longer holds" in text and "22 misroutes in 200 routed" in text


def test_per_route_check_splits_the_significance() -> None:
    labels, probabilities = _traffic(100, 2)
    policy = _policy(per_route_thresholds={"refund": 0.5, "account": 0.6, "other": 1.01})
    result = check_guarantee(labels, probabilities, policy, significance=0.06)
    assert [t.scope for t in result.tests] == ["refund", "account"]
    assert all(t.significance == pytest.approx(0.03) for t in result.tests)


def test_policy_without_guarantee() -> None:
    policy = Policy(version="plain", model=MODEL, threshold=0.5)
    with pytest.raises(CalibrationError, match="carries no guarantee"):
        check_guarantee(np.array(["refund"]), np.array([[0.7, 0.1, 0.1, 0.1]]), policy)


def test_model_and_question_mismatch_are_named() -> None:
    policy = _policy()
    assert expected_question_sha(policy) == local_question_sha("a" * 64)
    same = Predictions(np.array(["x"]), np.ones((1, 4)) / 4, MODEL.name,
                       local_question_sha("a" * 64))
    assert model_mismatches(policy, same) == []
    other = Predictions(np.array(["x"]), np.ones((1, 4)) / 4, "local-tfidf-lr@zzz", "q" * 64)
    problems = model_mismatches(policy, other)
    assert "local-tfidf-lr@zzz" in problems[0] and "question definition differs" in problems[1]

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from calibration.evaluation import evaluate
from calibration.metrics import (
    classification_summary,
    expected_calibration_error,
    outcomes,
    routed_mask,
    routing_summary,
)
from router.contracts import Policy, PolicyModel, RouteScores

LABELS = ["refund", "refund", "account", "unclear", "other", "unclear"]
CHOICES = ["refund", "account", "account", "refund", "other", "unclear"]
CONFIDENCES = [0.9, 0.8, 0.3, 0.95, 0.6, 0.99]


def test_routed_mask_and_outcomes_by_hand() -> None:
    routed = routed_mask(CHOICES, CONFIDENCES, 0.5)
    assert routed.tolist() == [True, True, False, True, True, False]
    assert outcomes(LABELS, CHOICES, routed).tolist() == [
        "correct", "misroute", "clarify_unneeded", "misroute", "correct", "clarify_needed",
    ]


def test_routing_summary_by_hand() -> None:
    summary = routing_summary(LABELS, outcomes(LABELS, CHOICES, routed_mask(CHOICES, CONFIDENCES, 0.5)))
    assert summary["routed"] == 4
    assert summary["misroute_rate_routed"] == pytest.approx(2 / 4)
    assert summary["misroute_rate"] == pytest.approx(2 / 6)
    # clear requests: rows 0,1,2,4; routed among them: 0,1,4
    assert summary["coverage"] == pytest.approx(3 / 4)
    assert summary["clarify_rate"] == pytest.approx(2 / 6)
    assert summary["unclear_recall"] == pytest.approx(1 / 2)
    assert summary["correct_outcome_rate"] == pytest.approx(3 / 6)


def test_per_route_threshold_and_margin() -> None:
    routed = routed_mask(CHOICES, CONFIDENCES, 0.5, per_route={"account": 0.2},
                         margins=[0.5, 0.1, 0.5, 0.5, 0.5, 0.5], min_margin=0.2)
    assert routed.tolist() == [True, False, True, True, True, False]


def test_classification_summary_matches_scikit_learn() -> None:
    summary = classification_summary(LABELS, CHOICES)
    assert summary["accuracy"] == pytest.approx(accuracy_score(LABELS, CHOICES))
    assert summary["macro_f1"] == pytest.approx(f1_score(LABELS, CHOICES, average="macro"))
    assert summary["per_route"]["refund"] == {"precision": 0.5, "recall": 0.5, "n": 2}


def test_ece_by_hand() -> None:
    # two bins used: top prob 0.9 (correct, wrong) and 0.6 (correct)
    probabilities = np.array([[0.9, 0.1], [0.9, 0.1], [0.4, 0.6]])
    y_true = np.array([0, 1, 1])
    expected = (2 * abs(0.5 - 0.9) + 1 * abs(1.0 - 0.6)) / 3
    assert expected_calibration_error(y_true, probabilities, n_bins=10) == pytest.approx(expected)


def test_evaluate_applies_the_policy() -> None:
    def scores(choice: str, p: float) -> RouteScores:
        rest = (1 - p) / 3
        probs = {r: (p if r == choice else rest) for r in ("refund", "account", "other", "unclear")}
        return RouteScores.from_probabilities("m", probs)

    batch = [scores("refund", 0.9), scores("account", 0.4), scores("other", 0.97)]
    policy = Policy(version="v", model=PolicyModel(backend="local", name="m"), threshold=0.5)
    result = evaluate(["refund", "account", "unclear"], batch, policy)
    assert (result["correct"], result["misroute"], result["clarify_unneeded"]) == (1, 1, 1)
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["policy_version"] == "v"

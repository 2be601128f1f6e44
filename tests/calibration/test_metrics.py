from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, brier_score_loss, f1_score, log_loss

from calibration.evaluation import evaluate
from calibration.metrics import (
    brier_loss,
    classification_summary,
    classwise_calibration_error,
    expected_calibration_error,
    negative_log_likelihood,
    outcomes,
    routed_mask,
    routing_rates,
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
        "correct",
        "misroute",
        "clarify_unneeded",
        "misroute",
        "correct",
        "clarify_needed",
    ]


def test_routing_summary_by_hand() -> None:
    routed = routed_mask(CHOICES, CONFIDENCES, 0.5)
    summary = routing_summary(LABELS, outcomes(LABELS, CHOICES, routed))
    assert summary["routed"] == 4
    assert summary["misroute_rate_routed"] == pytest.approx(2 / 4)
    assert summary["misroute_rate"] == pytest.approx(2 / 6)
    # clear requests: rows 0,1,2,4; routed among them: 0,1,4
    assert summary["coverage"] == pytest.approx(3 / 4)
    assert summary["clarify_rate"] == pytest.approx(2 / 6)
    assert summary["unclear_recall"] == pytest.approx(1 / 2)
    assert summary["correct_outcome_rate"] == pytest.approx(3 / 6)


def test_per_route_threshold_and_margin() -> None:
    routed = routed_mask(
        CHOICES,
        CONFIDENCES,
        0.5,
        per_route={"account": 0.2},
        margins=[0.5, 0.1, 0.5, 0.5, 0.5, 0.5],
        min_margin=0.2,
    )
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
    result = evaluate(["refund", "account", "unclear"], batch, policy,
                      tags=[["injection"], [], ["injection", "vague"]])
    assert (result["correct"], result["misroute"], result["clarify_unneeded"]) == (1, 1, 1)
    # injection rows: 0 (routed right) and 2 (an unclear row routed as other: a misroute)
    assert result["per_tag"]["injection"] == {
        "n": 2, "accuracy": 0.5, "correct_outcome_rate": 0.5, "misroutes": 1}
    assert result["per_tag"]["vague"]["n"] == 1
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["policy_version"] == "v"


def test_evaluate_gives_routing_figures_per_true_route_and_per_language() -> None:
    def scores(choice: str, p: float) -> RouteScores:
        rest = (1 - p) / 3
        probs = {r: (p if r == choice else rest) for r in ("refund", "account", "other", "unclear")}
        return RouteScores.from_probabilities("m", probs)

    # de: a refund routed right, an account request routed to refund (a misroute);
    # fr: a refund left to clarify (confidence 0.2 < 0.5), an unclear row clarified.
    labels = ["refund", "account", "refund", "unclear"]
    batch = [scores("refund", 0.9), scores("refund", 0.9), scores("refund", 0.4),
             scores("unclear", 0.9)]
    policy = Policy(version="v", model=PolicyModel(backend="local", name="m"), threshold=0.5)
    result = evaluate(labels, batch, policy, languages=["de", "de", "fr", "fr"])
    assert result["per_language"]["de"] == {
        "n": 2, "routed": 2, "misroute": 1, "coverage": 1.0, "misroute_rate_routed": 0.5,
        "correct_outcome_rate": 0.5}
    assert result["per_language"]["fr"] == {
        "n": 2, "routed": 0, "misroute": 0, "coverage": 0.0, "misroute_rate_routed": 0.0,
        "correct_outcome_rate": 0.5}
    refund = result["per_label"]["refund"]
    assert (refund["n"], refund["routed"], refund["coverage"]) == (2, 1, 0.5)
    assert result["per_label"]["account"]["misroute_rate_routed"] == 1.0
    assert result["per_label"]["unclear"]["correct_outcome_rate"] == 1.0
    assert evaluate(labels, batch, policy)["per_language"] == {}


# --- calibration figures and bootstrap intervals -------------------------------------


def _random_predictions(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    probabilities = rng.dirichlet([3.0, 1.0, 1.0, 1.0], size=n)
    return rng.integers(0, 4, size=n), probabilities


def test_equal_mass_ece_by_hand() -> None:
    # four rows, two equal-mass bins: {0.6, 0.7} and {0.8, 0.9}
    probabilities = np.array([[0.6, 0.4], [0.7, 0.3], [0.8, 0.2], [0.9, 0.1]])
    y_true = np.array([0, 1, 0, 0])
    expected = (2 * abs(0.5 - 0.65) + 2 * abs(1.0 - 0.85)) / 4
    assert expected_calibration_error(y_true, probabilities, n_bins=2, strategy="quantile") == (
        pytest.approx(expected)
    )


def test_classwise_ece_by_hand() -> None:
    probabilities = np.array([[0.8, 0.2], [0.3, 0.7]])
    y_true = np.array([0, 0])
    # class 0: bins 0.8 (hit) and 0.3 (hit) -> (|1-0.8| + |1-0.3|)/2 = 0.45
    # class 1: bins 0.2 (miss) and 0.7 (miss) -> (0.2 + 0.7)/2 = 0.45
    assert classwise_calibration_error(y_true, probabilities, n_bins=10) == pytest.approx(0.45)


def test_brier_and_nll_match_scikit_learn() -> None:
    y_true, probabilities = _random_predictions(500)
    assert brier_loss(y_true, probabilities) == pytest.approx(
        brier_score_loss(y_true, probabilities, labels=[0, 1, 2, 3], scale_by_half=False)
    )
    assert negative_log_likelihood(y_true, probabilities) == pytest.approx(
        log_loss(y_true, probabilities, labels=[0, 1, 2, 3])
    )
    # by hand for one row: p_true = 0.5 of [0.5, 0.25, 0.25, 0]
    one = np.array([[0.5, 0.25, 0.25, 0.0]])
    assert brier_loss(np.array([0]), one) == pytest.approx(0.25 + 0.0625 * 2)
    assert negative_log_likelihood(np.array([0]), one) == pytest.approx(np.log(2))


def test_top_label_ece_matches_scikit_learn_calibration_curve_in_binary_case() -> None:
    rng = np.random.default_rng(3)
    p1 = rng.uniform(0.5, 1.0, size=2000)  # top label is always class 1
    y = (rng.uniform(size=2000) < p1**1.5).astype(int)
    probabilities = np.column_stack([1 - p1, p1])
    prob_true, prob_pred = calibration_curve(y, p1, n_bins=15, strategy="uniform")
    counts = np.histogram(p1, bins=np.linspace(0, 1, 16))[0]
    expected = np.sum(counts[counts > 0] * np.abs(prob_true - prob_pred)) / len(y)
    assert expected_calibration_error(y, probabilities, n_bins=15) == pytest.approx(expected)


def test_routing_rates_from_cell_counts_by_hand() -> None:
    # correct 3, misroute (clear) 1, misroute (unclear) 1, clarify needed 2, unneeded 3
    rates = routing_rates(np.array([3, 1, 1, 2, 3]))
    assert rates["misroute_rate_routed"] == pytest.approx(2 / 5)
    assert rates["coverage"] == pytest.approx(4 / 7)
    assert rates["clarify_rate"] == pytest.approx(5 / 10)
    assert rates["unclear_recall"] == pytest.approx(2 / 3)

from __future__ import annotations

import numpy as np
import pytest

from calibration.intervals import CalibrationStats, bootstrap_calibration, bootstrap_routing
from calibration.metrics import (
    calibration_summary,
    negative_log_likelihood,
    outcomes,
    routed_mask,
    routing_summary,
)


def _random_predictions(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    probabilities = rng.dirichlet([3.0, 1.0, 1.0, 1.0], size=n)
    return rng.integers(0, 4, size=n), probabilities


@pytest.mark.parametrize("n", [7, 300])
def test_weighted_summary_equals_the_resampled_rows(n: int) -> None:
    y_true, probabilities = _random_predictions(n, seed=n)
    stats = CalibrationStats(y_true, probabilities)
    assert stats.summary() == pytest.approx(calibration_summary(y_true, probabilities))
    rng = np.random.default_rng(1)
    for _ in range(5):
        index = rng.integers(0, n, size=n)
        weights = np.bincount(index, minlength=n)
        resampled = calibration_summary(y_true[index], probabilities[index])
        assert stats.summary(weights) == pytest.approx(resampled, abs=1e-12)


def test_bootstrap_calibration_is_the_plain_row_bootstrap() -> None:
    y_true, probabilities = _random_predictions(120, seed=5)
    result = bootstrap_calibration(y_true, probabilities, n_boot=200, seed=9)
    rng = np.random.default_rng(9)
    draws = []
    for _ in range(200):
        index = rng.integers(0, 120, size=120)
        draws.append(calibration_summary(y_true[index], probabilities[index])["nll"])
    assert result["nll"]["value"] == pytest.approx(negative_log_likelihood(y_true, probabilities))
    assert result["nll"]["ci95"] == pytest.approx(list(np.percentile(draws, [2.5, 97.5])))


def test_bootstrap_routing_agrees_with_resampling_rows() -> None:
    rng = np.random.default_rng(2)
    labels = rng.choice(["refund", "account", "other", "unclear"], size=400)
    choices = np.where(rng.uniform(size=400) < 0.8, labels, "refund")
    routed = routed_mask(choices, rng.uniform(size=400), 0.3)
    outcome = outcomes(labels, choices, routed)
    result = bootstrap_routing(labels, outcome, n_boot=4000, seed=0)
    summary = routing_summary(labels, outcome)
    plain = []
    for _ in range(4000):
        index = rng.integers(0, 400, size=400)
        plain.append(routing_summary(labels[index], outcome[index])["misroute_rate_routed"])
    low, high = np.percentile(plain, [2.5, 97.5])
    interval = result["misroute_rate_routed"]
    assert interval["value"] == pytest.approx(summary["misroute_rate_routed"])
    assert interval["ci95"] == pytest.approx([low, high], abs=0.01)


def test_a_batch_of_weights_gives_each_summary() -> None:
    y_true, probabilities = _random_predictions(500, seed=11)
    stats = CalibrationStats(y_true, probabilities)
    rng = np.random.default_rng(3)
    weights = np.stack([np.bincount(rng.integers(0, 500, size=500), minlength=500)
                        for _ in range(6)])
    batch = stats.summaries(weights)
    for b in range(6):
        index = np.repeat(np.arange(500), weights[b])
        plain = calibration_summary(y_true[index], probabilities[index])
        assert {k: v[b] for k, v in batch.items()} == pytest.approx(plain, abs=1e-12)

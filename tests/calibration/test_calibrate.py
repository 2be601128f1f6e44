from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from scipy.special import softmax

from calibration.calibrate import CalibrateOptions, calibrate, score_with_policy
from calibration.splits import assign_parts
from router.contracts import NEVER_ROUTE, ROUTES, Policy, PolicyModel
from router.errors import CalibrationError

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)
MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="abc" * 10)


def synthetic(n: int, *, temperature: float = 1.5, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An over-confident model: probabilities softmax(z), labels from softmax(z / T)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=5.0, size=(n, 4))
    logits[:, 3] -= 3.0  # unclear is the rarest label
    truth = softmax(logits / temperature, axis=1)
    y = (rng.uniform(size=(n, 1)) > np.cumsum(truth, axis=1)).sum(axis=1)
    ids = np.array([f"req-{i}" for i in range(n)], dtype=object)
    return ids, np.asarray(ROUTES)[y], softmax(logits, axis=1)


def test_calibrate_writes_a_complete_policy() -> None:
    ids, labels, probs = synthetic(6000)
    options = CalibrateOptions(alpha=0.1, delta=0.05, recalibrate="temperature", n_boot=200)
    result = calibrate(ids, labels, probs, model=MODEL, options=options, now=NOW,
                       labels_sha="sha")
    policy = Policy.model_validate_json(result.policy.model_dump_json())
    assert policy.model == MODEL and policy.created_at == NOW
    assert policy.version.startswith("local-20260315T120000Z-")
    assert policy.calibrator.kind == "temperature"
    assert policy.calibrator.params["temperature"] == pytest.approx(1.5, rel=0.1)
    g = policy.guarantee
    assert (g.alpha, g.delta, g.n_certify) == (0.1, 0.05, len(result.parts.certify))
    assert g.upper_bound <= 0.1
    assert policy.data.n_fit + policy.data.n_certify + policy.data.n_test == 6000
    assert policy.data.labels_sha == "sha"
    metrics = policy.metrics_test
    assert metrics["n"] == len(result.parts.test)
    low, high = metrics["routing"]["misroute_rate_routed"]["ci95"]
    assert low <= metrics["routing"]["misroute_rate_routed"]["value"] <= high
    assert set(metrics["calibration"]) == {"ece_15_equal_width", "ece_15_equal_mass",
                                           "classwise_ece_15_equal_width", "brier", "nll"}
    assert result.after["nll"] < result.before["nll"]  # recalibration helped on test rows
    # the certified threshold, applied the way the gateway applies it
    certify = result.parts.certify
    scored = score_with_policy(probs[certify], policy)
    misroutes = int(np.sum(scored.routed & (scored.choices != labels[certify])))
    assert (int(scored.routed.sum()), misroutes) == (result.certifications["all"].routed,
                                                     g.misroutes)


def test_excluded_rows_are_not_used() -> None:
    ids, labels, probs = synthetic(3000, seed=1)
    excluded = np.zeros(3000, dtype=bool)
    excluded[::2] = True
    labels_poisoned = labels.copy()
    labels_poisoned[excluded] = "unclear"  # would wreck the certification if used
    options = CalibrateOptions(alpha=0.15, delta=0.1, n_boot=50)
    clean = calibrate(ids[~excluded], labels[~excluded], probs[~excluded], model=MODEL,
                      options=options, now=NOW)
    masked = calibrate(ids, labels_poisoned, probs, model=MODEL, options=options, now=NOW,
                       excluded=excluded)
    assert masked.policy.threshold == clean.policy.threshold
    assert masked.parts.n_excluded_train == 1500
    assert masked.policy.guarantee == clean.policy.guarantee


def test_per_route_and_min_margin() -> None:
    ids, labels, probs = synthetic(8000, seed=2)
    options = CalibrateOptions(alpha=0.1, delta=0.06, per_route=True, min_margin=0.05,
                               n_boot=50)
    result = calibrate(ids, labels, probs, model=MODEL, options=options, now=NOW)
    policy = result.policy
    assert set(policy.per_route_thresholds) == {"refund", "account", "other"}
    assert all(c.delta == pytest.approx(0.02) for c in result.certifications.values())
    assert "Bonferroni" in policy.guarantee.method
    assert policy.min_margin == 0.05
    assert policy.threshold == max(t for t in policy.per_route_thresholds.values()
                                   if t != NEVER_ROUTE)


def test_nothing_certifiable_says_how_many_rows_are_missing() -> None:
    ids, labels, probs = synthetic(600, seed=3)
    with pytest.raises(CalibrationError, match=r"no threshold certifies .* more labelled certify"
                       ) as info:
        calibrate(ids, labels, probs, model=MODEL, now=NOW,
                  options=CalibrateOptions(alpha=0.01, delta=0.05))
    assert info.value.code == "no_certified_threshold"


def test_too_few_certify_rows() -> None:
    ids, labels, probs = synthetic(60, seed=4)
    with pytest.raises(CalibrationError, match="certify rows; need at least 50"):
        calibrate(ids, labels, probs, model=MODEL, now=NOW, options=CalibrateOptions())


def test_isotonic_needs_a_thousand_fit_rows() -> None:
    ids, labels, probs = synthetic(3000, seed=5)
    n_fit = len(assign_parts(ids).fit)
    with pytest.raises(CalibrationError, match=f"{n_fit} fit rows; isotonic"):
        calibrate(ids, labels, probs, model=MODEL, now=NOW,
                  options=CalibrateOptions(alpha=0.1, recalibrate="isotonic"))
    ids, labels, probs = synthetic(4000, seed=5)
    result = calibrate(ids, labels, probs, model=MODEL, now=NOW,
                       options=CalibrateOptions(alpha=0.1, recalibrate="isotonic", n_boot=50))
    assert set(result.policy.calibrator.params) == set(ROUTES)


def test_the_policy_carries_the_drift_reference_of_its_certify_rows() -> None:
    ids, labels, probs = synthetic(3000)
    texts = [("Refund please. " if i % 3 else "Where is my parcel? ") * (1 + i % 7)
             for i in range(len(ids))]
    options = CalibrateOptions(alpha=0.1, delta=0.05, n_boot=50)
    result = calibrate(ids, labels, probs, model=MODEL, options=options, now=NOW, texts=texts)
    reference = result.policy.reference
    assert reference is not None and reference.n == len(result.parts.certify)
    certify = result.parts.certify
    scored = score_with_policy(probs[certify], result.policy)
    assert reference.routed == int(scored.routed.sum())  # decided as the gateway decides
    assert reference.languages == {"en": len(certify)}
    assert sum(reference.length) == len(certify)
    assert "certify rows" in reference.source
    without = calibrate(ids, labels, probs, model=MODEL, options=options, now=NOW)
    assert without.policy.reference is None

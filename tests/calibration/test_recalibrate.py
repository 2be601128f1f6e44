from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression

from calibration.metrics import negative_log_likelihood
from calibration.recalibrate import (
    MIN_ISOTONIC_FIT_ROWS,
    OneVsRestIsotonic,
    TemperatureScaling,
    apply_calibrator_array,
    choices_and_confidence,
    fit_calibrator,
    label_indices,
)
from router.contracts import ROUTES, Calibrator, RouteScores
from router.errors import CalibrationError
from router.routing.policy import apply_calibrator, top2_margin


def _overconfident(n: int, true_temperature: float, seed: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Model probabilities softmax(z) for labels drawn from softmax(z / T)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(n, 4))
    truth = softmax(logits / true_temperature, axis=1)
    labels = np.array([rng.choice(4, p=p) for p in truth])
    return softmax(logits, axis=1), labels


@pytest.mark.parametrize("true_temperature", [0.5, 2.0, 3.0])
def test_temperature_scaling_recovers_a_known_temperature(true_temperature: float) -> None:
    probabilities, labels = _overconfident(20_000, true_temperature)
    fitted = TemperatureScaling().fit(probabilities, labels)
    assert fitted.temperature_ == pytest.approx(true_temperature, rel=0.05)
    calibrator = fitted.to_calibrator()
    after = apply_calibrator_array(probabilities, calibrator)
    assert negative_log_likelihood(labels, after) < negative_log_likelihood(labels, probabilities)
    # one parameter: the argmax, i.e. the choice, never changes
    assert np.array_equal(after.argmax(axis=1), probabilities.argmax(axis=1))


def test_isotonic_breakpoints_reproduce_scikit_learn() -> None:
    probabilities, labels = _overconfident(3000, 2.0, seed=1)
    fitted = OneVsRestIsotonic().fit(probabilities, labels)
    grid = np.linspace(-0.1, 1.1, 301)
    for j, route in enumerate(ROUTES):
        reference = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
            probabilities[:, j], labels == j
        )
        x, y = fitted.breakpoints_[route]
        assert np.allclose(np.interp(grid, x, y), reference.predict(grid))
        assert np.all(np.diff(y) >= 0)


@pytest.mark.parametrize("kind", ["none", "temperature", "isotonic"])
def test_array_calibrator_is_the_gateway_calibrator(kind: str) -> None:
    probabilities, labels = _overconfident(1500, 2.0, seed=2)
    calibrator = (Calibrator(kind="none") if kind == "none" else
                  fit_calibrator(kind, *_overconfident(MIN_ISOTONIC_FIT_ROWS, 2.0, seed=3)))
    calibrator = Calibrator.model_validate_json(calibrator.model_dump_json())  # as stored
    batch = apply_calibrator_array(probabilities, calibrator)
    choices, confidence, margin = choices_and_confidence(batch)
    for i in range(0, 1500, 37):
        scores = RouteScores.from_probabilities("m", dict(zip(ROUTES, probabilities[i],
                                                              strict=True)))
        one = apply_calibrator(scores, calibrator)
        assert [one.probabilities[r] for r in ROUTES] == pytest.approx(batch[i], abs=1e-12)
        assert (one.choice, one.confidence) == (choices[i], pytest.approx(confidence[i]))
        assert top2_margin(one) == pytest.approx(margin[i])


def test_isotonic_is_refused_on_too_few_fit_rows() -> None:
    probabilities, labels = _overconfident(999, 2.0)
    with pytest.raises(CalibrationError, match="999 fit rows; isotonic .* at least 1,000"):
        fit_calibrator("isotonic", probabilities, labels)
    assert fit_calibrator("isotonic", *_overconfident(1000, 2.0)).kind == "isotonic"


def test_no_fit_rows() -> None:
    with pytest.raises(CalibrationError, match="no fit rows"):
        fit_calibrator("temperature", np.empty((0, 4)), np.empty(0, dtype=int))
    assert fit_calibrator("none", np.empty((0, 4)), np.empty(0, dtype=int)).kind == "none"


def test_label_indices() -> None:
    assert label_indices(["unclear", "refund", "other"]).tolist() == [3, 0, 2]


def test_the_tooling_uses_the_routers_own_maths() -> None:
    """One implementation each: certification applies the gateway's calibrator function
    and fits temperature like the trainers; confidence is the kernel's formula."""
    from calibration import recalibrate
    from router.contracts import choice_confidence
    from router.models import maths
    from router.routing import calibrators

    assert recalibrate.apply_calibrator_array is calibrators.apply_calibrator_array
    assert recalibrate.label_indices is maths.label_indices
    probabilities, labels = _overconfident(2000, 2.0, seed=4)
    fitted = TemperatureScaling().fit(probabilities, labels).temperature_
    assert fitted == maths.fit_temperature(np.log(probabilities), labels)
    _, confidence, _ = choices_and_confidence(probabilities)
    assert confidence.tolist() == [choice_confidence(p, len(ROUTES)) for p in probabilities.max(1)]

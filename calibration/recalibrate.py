"""Recalibrating a model's probabilities: temperature scaling and one-vs-rest isotonic.

Both are fitted on the **fit** part only and exported as a `router.contracts.Calibrator`.
Applying one is `router.routing.calibrators.apply_calibrator_array` (re-exported here),
the same function the gateway applies to one message (`router.routing.policy`), so the
threshold is certified on exactly the numbers the gateway will see.

- **temperature**: one parameter T, probabilities ∝ p^(1/T), chosen by minimising the
  negative log-likelihood. The argmax (the choice) never changes.
- **isotonic**: for each route, a monotone step function from that route's probability to
  how often it is the label (scikit-learn's `IsotonicRegression`), then renormalised.
  Flexible enough to overfit small data, so it is refused below 1,000 fit rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from router.contracts import ROUTES, Calibrator, CalibratorKind, choice_confidence_rows
from router.errors import CalibrationError
from router.models.maths import fit_temperature, label_indices
from router.routing.calibrators import apply_calibrator_array, log_probabilities

__all__ = [
    "MIN_ISOTONIC_FIT_ROWS",
    "OneVsRestIsotonic",
    "TemperatureScaling",
    "apply_calibrator_array",
    "choices_and_confidence",
    "fit_calibrator",
    "label_indices",
    "log_probabilities",
]

MIN_ISOTONIC_FIT_ROWS = 1000
N_ROUTES = len(ROUTES)


class TemperatureScaling:
    """One-parameter recalibration: ``softmax(log p / T)``; `temperature_` is set by `fit`.

    T is fitted by `router.models.maths.fit_temperature`, the trainers' own temperature
    fit, on the log-probabilities.
    """

    def fit(self, probabilities: np.ndarray, y_true: np.ndarray) -> TemperatureScaling:
        """Choose T minimising the NLL of `y_true` (shape (n,)) under `probabilities` (n, k)."""
        self.temperature_ = fit_temperature(log_probabilities(probabilities), np.asarray(y_true))
        return self

    def to_calibrator(self) -> Calibrator:
        return Calibrator(kind="temperature", params={"temperature": self.temperature_})


class OneVsRestIsotonic:
    """One isotonic step function per route; `breakpoints_` maps route → (x, y) arrays."""

    def fit(self, probabilities: np.ndarray, y_true: np.ndarray) -> OneVsRestIsotonic:
        """Fit route j's map from p_j to 1[y = j] on `probabilities` (n, k), `y_true` (n,)."""
        y_true = np.asarray(y_true)
        self.breakpoints_: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for j, route in enumerate(ROUTES):
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
            iso.fit(probabilities[:, j], (y_true == j).astype(float))
            self.breakpoints_[route] = (iso.X_thresholds_, iso.y_thresholds_)
        return self

    def to_calibrator(self) -> Calibrator:
        params = {r: {"x": x.tolist(), "y": y.tolist()} for r, (x, y) in self.breakpoints_.items()}
        return Calibrator(kind="isotonic", params=params)


def fit_calibrator(
    kind: CalibratorKind, probabilities: np.ndarray, y_true: np.ndarray
) -> Calibrator:
    """Fit a calibrator of the given kind on the fit part.

    Parameters
    ----------
    kind : {"none", "temperature", "isotonic"}
    probabilities : ndarray of shape (n, 4)
        The model's raw probabilities, columns in `router.contracts.ROUTES` order.
    y_true : ndarray of shape (n,)
        Index of each row's label in `ROUTES`.

    Returns
    -------
    Calibrator
        Ready for the policy artifact.

    Raises
    ------
    CalibrationError
        Isotonic with fewer than 1,000 fit rows, or any calibrator with no fit rows.
    """
    n = len(y_true)
    if kind == "none":
        return Calibrator(kind="none")
    if n == 0:
        raise CalibrationError(f"no fit rows to fit a {kind} calibrator on")
    if kind == "isotonic":
        if n < MIN_ISOTONIC_FIT_ROWS:
            raise CalibrationError(
                f"{n} fit rows; isotonic recalibration needs at least "
                f"{MIN_ISOTONIC_FIT_ROWS:,} (it overfits small data) — label more rows "
                "or use --recalibrate temperature"
            )
        return OneVsRestIsotonic().fit(probabilities, y_true).to_calibrator()
    if kind == "temperature":
        return TemperatureScaling().fit(probabilities, y_true).to_calibrator()
    raise CalibrationError(f"unknown calibrator {kind!r}; use none, temperature or isotonic")


def choices_and_confidence(probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Choice, confidence and top-2 margin per row, as `RouteScores` defines them.

    Parameters
    ----------
    probabilities : ndarray of shape (n, 4)

    Returns
    -------
    choices : ndarray of str, shape (n,)
        The argmax route (first in `ROUTES` order on ties, like `max`).
    confidence : ndarray of shape (n,)
        ``(p_max − 1/4) / (1 − 1/4)`` clipped to [0, 1].
    margin : ndarray of shape (n,)
        ``p_max − p_second``.
    """
    ordered = np.sort(probabilities, axis=1)
    top = ordered[:, -1]
    confidence = choice_confidence_rows(top, N_ROUTES)
    choices = np.asarray(ROUTES)[probabilities.argmax(axis=1)]
    return choices, confidence, top - ordered[:, -2]

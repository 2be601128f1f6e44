"""Recalibrating a model's probabilities: temperature scaling and one-vs-rest isotonic.

Both are fitted on the **fit** part only and exported as a `router.contracts.Calibrator`
that `router.routing.policy.apply_calibrator` applies to one message at serving time;
`apply_calibrator_array` here is the same computation over many rows (a test holds the
two equal), so the threshold is certified on exactly the numbers the gateway will see.

- **temperature**: one parameter T, probabilities ∝ p^(1/T), chosen by minimising the
  negative log-likelihood. The argmax (the choice) never changes.
- **isotonic**: for each route, a monotone step function from that route's probability to
  how often it is the label (scikit-learn's `IsotonicRegression`), then renormalised.
  Flexible enough to overfit small data, so it is refused below 1,000 fit rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from router.contracts import ROUTES, Calibrator, CalibratorKind
from router.errors import CalibrationError
from router.models.local.model import fit_temperature

MIN_ISOTONIC_FIT_ROWS = 1000
N_ROUTES = len(ROUTES)


def log_probabilities(probabilities: np.ndarray) -> np.ndarray:
    """Logits that give back the probabilities under softmax (clipped like the gateway)."""
    logits: np.ndarray = np.log(np.clip(probabilities, 1e-300, None))
    return logits


class TemperatureScaling:
    """One-parameter recalibration: ``softmax(log p / T)``; `temperature_` is set by `fit`."""

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


def apply_calibrator_array(probabilities: np.ndarray, calibrator: Calibrator) -> np.ndarray:
    """`router.routing.policy.apply_calibrator` over rows: shape (n, 4) in, shape (n, 4) out.

    Parameters
    ----------
    probabilities : ndarray of shape (n, 4)
    calibrator : Calibrator

    Returns
    -------
    ndarray of shape (n, 4)
        Recalibrated probabilities; each row sums to 1.
    """
    probabilities = np.asarray(probabilities, dtype=float)
    calibrated: np.ndarray
    if calibrator.kind == "none":
        calibrated = probabilities / probabilities.sum(axis=1, keepdims=True)
        return calibrated
    if calibrator.kind == "temperature":
        logp = log_probabilities(probabilities) / float(calibrator.params["temperature"])
        logp -= logp.max(axis=1, keepdims=True)
        calibrated = np.exp(logp)
    else:
        calibrated = np.column_stack([
            np.interp(probabilities[:, j], calibrator.params[r]["x"], calibrator.params[r]["y"])
            for j, r in enumerate(ROUTES)
        ])
        calibrated = np.clip(calibrated, 1e-12, None)
    calibrated = calibrated / calibrated.sum(axis=1, keepdims=True)
    return calibrated


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
    floor = 1.0 / N_ROUTES
    confidence = np.clip((top - floor) / (1.0 - floor), 0.0, 1.0)
    choices = np.asarray(ROUTES)[probabilities.argmax(axis=1)]
    return choices, confidence, top - ordered[:, -2]


def label_indices(labels: np.ndarray | list[str]) -> np.ndarray:
    """Index of each route label in `ROUTES`, shape (n,)."""
    lookup: dict[str, int] = {route: i for i, route in enumerate(ROUTES)}
    return np.fromiter((lookup[label] for label in labels), dtype=np.int64, count=len(labels))

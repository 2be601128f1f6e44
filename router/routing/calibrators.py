"""Applying a fitted calibrator to route probabilities: the one implementation.

The gateway (`router.routing.policy.apply_calibrator`, one message) and the calibration
tooling (`calibration.recalibrate`, many rows, where thresholds are certified) both call
`apply_calibrator_array`, so a threshold is certified on exactly the numbers the gateway
routes on. Fitting calibrators is the calibration tooling's job; this module only applies
their plain parameters.
"""

from __future__ import annotations

import numpy as np

from router.contracts import ROUTES, Calibrator


def log_probabilities(probabilities: np.ndarray) -> np.ndarray:
    """Logits that give back the probabilities under softmax (zeros clipped, not -inf)."""
    logits: np.ndarray = np.log(np.clip(probabilities, 1e-300, None))
    return logits


def apply_calibrator_array(probabilities: np.ndarray, calibrator: Calibrator) -> np.ndarray:
    """Recalibrated probabilities of rows, shape (n, len(ROUTES)) in and out.

    - `none`: the rows, normalised;
    - `temperature`: ``softmax(log p / T)`` (the argmax never changes);
    - `isotonic`: each route's step function (`params[route]["x"|"y"]`) applied to its
      column, then the rows renormalised.
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
        calibrated = np.column_stack(
            [
                np.interp(probabilities[:, j], calibrator.params[r]["x"], calibrator.params[r]["y"])
                for j, r in enumerate(ROUTES)
            ]
        )
        calibrated = np.clip(calibrated, 1e-12, None)
    calibrated = calibrated / calibrated.sum(axis=1, keepdims=True)
    return calibrated

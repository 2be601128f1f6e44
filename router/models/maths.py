"""Array maths the model trainers and the calibration tooling share.

Training only: serving never imports this module (it costs `scipy.optimize`).
`calibration.recalibrate.TemperatureScaling` fits its temperature with the same
`fit_temperature` the trainers use on their out-of-fold logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from router.contracts import ROUTES


def label_indices(labels: Sequence[str] | np.ndarray) -> np.ndarray:
    """Index of each route label in `ROUTES`, shape (n,), integers."""
    lookup: dict[str, int] = {route: i for i, route in enumerate(ROUTES)}
    return np.fromiter((lookup[label] for label in labels), dtype=np.int64, count=len(labels))


def mean_log_loss(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of `labels` (n,) under ``softmax(logits)`` (n, k)."""
    return float(-log_softmax(logits, axis=1)[np.arange(len(labels)), labels].mean())


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature T minimising the NLL of ``softmax(logits / T)`` on held-out rows.

    One parameter, so the argmax never changes; searched over log T in [-3, 3].
    """

    def nll(log_t: float) -> float:
        return mean_log_loss(logits / np.exp(log_t), labels)

    result = minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded")
    return float(np.exp(result.x))

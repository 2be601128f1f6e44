"""Try a policy on fixed messages before it becomes active: does it still route?

The contract (`router.contracts.Policy`) refuses parameters that are out of range; this
decides with the policy, the way the gateway will, and refuses it when a decision is not
made of probabilities: every calibrated probability finite and in [0, 1], summing to 1,
the confidence in [0, 1], or when deciding raises at all. Each message is scored by the
running model (`probe_scores`), and a few fixed distributions are added that no model
may produce today but a calibrator must survive: certainty with exact zeros, a uniform
answer, a tie, a near-certainty.

Pure: the scores come in, `InvalidPolicy` (422 `invalid_policy`) or nothing comes out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from router.contracts import ROUTES, Policy, RouteScores
from router.errors import InvalidPolicy
from router.models.base import DecisionModel
from router.routing.policy import decide

PROBE_MESSAGES: tuple[str, ...] = (
    "My teapot from order O-1001 arrived broken, please refund it.",
    "I forgot my password and cannot log in to my account.",
    "Do you ship to Norway?",
    "hello",
    "Mein Paket ist beschädigt angekommen, ich möchte mein Geld zurück.",
)
"""One message a route, and a vague one, as a customer would write them."""

PROBE_DISTRIBUTIONS: tuple[tuple[float, ...], ...] = (
    (1.0, 0.0, 0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0),
    (0.0, 0.0, 0.0, 1.0),
    (0.25, 0.25, 0.25, 0.25),
    (0.5, 0.5, 0.0, 0.0),
    (1.0 - 3e-12, 1e-12, 1e-12, 1e-12),
)
"""Probabilities in `ROUTES` order: the edges a calibrator is most likely to break at."""

TOLERANCE = 1e-6


def fixed_scores(model_name: str) -> list[RouteScores]:
    """`PROBE_DISTRIBUTIONS` as a model's scores: what can be checked without a model."""
    return [RouteScores.from_probabilities(model_name, dict(zip(ROUTES, row, strict=True)))
            for row in PROBE_DISTRIBUTIONS]


def probe_scores(model: DecisionModel, messages: Sequence[str] = PROBE_MESSAGES
                 ) -> list[RouteScores]:
    """The running model's scores of the probe messages, then the fixed distributions.

    Raises whatever the model raises (`ModelUnavailable` for a remote model that does
    not answer): a policy is not made active unchecked.
    """
    return [*(model.score(text) for text in messages), *fixed_scores(model.name)]


def _fault(calibrated: RouteScores) -> str | None:
    """What is wrong with one calibrated answer, or None."""
    probabilities = [float(calibrated.probabilities.get(route, math.nan)) for route in ROUTES]
    if not all(math.isfinite(p) and -TOLERANCE <= p <= 1.0 + TOLERANCE for p in probabilities):
        return f"gives probabilities {dict(zip(ROUTES, probabilities, strict=True))}"
    total = math.fsum(probabilities)
    if abs(total - 1.0) > TOLERANCE:
        return f"gives probabilities that sum to {total}"
    if not (math.isfinite(calibrated.confidence) and 0.0 <= calibrated.confidence <= 1.0):
        return f"gives confidence {calibrated.confidence}"
    return None


def check_policy(policy: Policy, scores: Iterable[RouteScores]) -> None:
    """Decide each of `scores` under `policy`; refuse the policy unless every decision is sound.

    Raises
    ------
    InvalidPolicy
        naming the field at fault (`calibrator`: it makes the numbers a decision is
        taken on) and the model's answer it failed on.
    """
    for scores_ in scores:
        shown = {route: round(float(p), 6) for route, p in scores_.probabilities.items()}
        try:
            # A calibrator that divides by zero or overflows is what this looks for:
            # its numbers are checked below, so numpy need not warn about them.
            with np.errstate(all="ignore"):
                decision = decide(scores_, policy, request_id="policy-check")
        except Exception as exc:  # noqa: BLE001 - any failure to decide refuses the policy
            raise InvalidPolicy(
                f"policy {policy.version}: field 'calibrator': deciding a message scored "
                f"{shown} failed ({type(exc).__name__}: {exc})") from None
        assert decision.scores is not None  # decide always keeps the calibrated scores
        fault = _fault(decision.scores)
        if fault is not None:
            raise InvalidPolicy(
                f"policy {policy.version}: field 'calibrator' {fault} for a message scored "
                f"{shown}; a decision needs finite probabilities in [0, 1] that sum to 1")

"""Deciding fixed messages with a policy before it becomes active.

The contract refuses the calibrators below; they are built past it (`model_construct`,
as a file written by an older version or by hand would be) to show that the check
refuses them on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from router.app.training import TrainResult
from router.contracts import ROUTES, Calibrator, Policy, PolicyModel, RouteScores
from router.errors import InvalidPolicy
from router.models.local.model import LocalRouteModel
from router.routing.policy_check import (
    PROBE_DISTRIBUTIONS,
    PROBE_MESSAGES,
    check_policy,
    fixed_scores,
    probe_scores,
)
from router.storage.policy_store import load_policy

POLICY = Policy(version="v1", model=PolicyModel(backend="local", name="m"), threshold=0.5)


def _with(kind: str, params: dict[str, Any]) -> Policy:
    return POLICY.model_copy(update={"calibrator": Calibrator.model_construct(
        kind=kind, params=params)})


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        (_with("temperature", {}), "KeyError"),
        (_with("temperature", {"temperature": 0.0}), "gives probabilities"),
        (_with("temperature", {"temperature": float("nan")}), "gives probabilities"),
        (_with("isotonic", {}), "KeyError"),
        (_with("isotonic", {r: {"x": [0.0, 1.0], "y": [0.0, float("nan")]} for r in ROUTES}),
         "gives probabilities"),
        (_with("isotonic", {r: {"x": [], "y": []} for r in ROUTES}), "ValueError"),
    ],
    ids=["temperature-without-params", "temperature-zero", "temperature-nan",
         "isotonic-empty", "isotonic-nan", "isotonic-no-knots"],
)
def test_a_calibrator_that_does_not_give_probabilities_is_refused(policy: Policy,
                                                                   says: str) -> None:
    with pytest.raises(InvalidPolicy, match="field 'calibrator'") as info:
        check_policy(policy, fixed_scores("m"))
    assert says in info.value.message
    assert info.value.code == "invalid_policy" and info.value.status_code == 422


def test_a_sound_policy_passes_every_fixed_distribution() -> None:
    check_policy(POLICY, fixed_scores("m"))
    check_policy(_with("temperature", {"temperature": 1e-3}), fixed_scores("m"))
    knots = {"x": [0.0, 1.0], "y": [0.0, 0.0]}  # every probability mapped to 0
    check_policy(_with("isotonic", {r: knots for r in ROUTES}), fixed_scores("m"))


def test_a_model_answer_it_cannot_decide_is_refused_even_if_the_edges_pass() -> None:
    """Only a model's answer trips this calibrator: between 0.6 and 0.8, where no fixed
    distribution has a probability, `numpy.interp` gives the NaN it was given."""
    knots = {"x": [0.0, 0.6, 0.7, 0.8, 1.0], "y": [0.0, 0.6, float("nan"), 0.8, 1.0]}
    policy = _with("isotonic", {r: knots for r in ROUTES})
    check_policy(policy, fixed_scores("m"))
    answer = RouteScores.from_probabilities("m", {"refund": 0.7, "account": 0.1, "other": 0.1,
                                                  "unclear": 0.1})
    with pytest.raises(InvalidPolicy, match="message scored {'refund': 0.7"):
        check_policy(policy, [*fixed_scores("m"), answer])


def test_the_probes_are_the_running_models_answers_then_the_edges(trained: TrainResult) -> None:
    model = LocalRouteModel.load(trained.model_path)
    scores = probe_scores(model)
    assert len(scores) == len(PROBE_MESSAGES) + len(PROBE_DISTRIBUTIONS)
    assert scores[: len(PROBE_MESSAGES)] == [model.score(text) for text in PROBE_MESSAGES]
    assert scores[0].choice == "refund"
    check_policy(load_policy(trained.policy_path), scores)

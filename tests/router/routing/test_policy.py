from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from router.contracts import ROUTES, Calibrator, Policy, PolicyModel, RouteScores
from router.errors import ArtifactError, InvalidPolicy
from router.routing.policy import apply_calibrator, decide
from router.storage.policy_store import load_policy, save_policy


def _scores(refund: float, account: float, other: float, unclear: float) -> RouteScores:
    probabilities = {"refund": refund, "account": account, "other": other, "unclear": unclear}
    return RouteScores.from_probabilities("m", probabilities)


def _policy(threshold: float = 0.5, **extra: object) -> Policy:
    return Policy(
        version="v1", model=PolicyModel(backend="local", name="m"), threshold=threshold, **extra
    )


def test_confidence_is_typesafe_choice_confidence() -> None:
    # (p_max - 1/n) / (1 - 1/n) with n = 4: (0.7 - 0.25) / 0.75 = 0.6
    assert _scores(0.7, 0.1, 0.1, 0.1).confidence == pytest.approx(0.6)
    assert _scores(0.25, 0.25, 0.25, 0.25).confidence == pytest.approx(0.0)


def test_scores_of_a_batch_equal_scores_row_by_row() -> None:
    """Ties go to the first route, unnormalised rows are normalised, as one by one."""
    rng = np.random.default_rng(3)
    rows = np.vstack(
        [
            rng.dirichlet([0.3] * len(ROUTES), size=2_000),
            [[0.25] * 4, [0.4, 0.4, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5], [2.0, 1.0, 1.0, 0.0]],
        ]
    )
    batch = RouteScores.from_probability_rows("m", rows)
    one_by_one = [
        RouteScores.from_probabilities("m", dict(zip(ROUTES, row, strict=True)))
        for row in rows.tolist()
    ]
    assert batch == one_by_one
    assert [s.choice for s in batch[-4:]] == ["refund", "refund", "other", "refund"]


def test_building_a_batch_leaves_the_garbage_collector_as_it_was() -> None:
    rows = np.full((3, len(ROUTES)), 0.25)
    assert gc.isenabled()
    RouteScores.from_probability_rows("m", rows)
    assert gc.isenabled()
    gc.disable()
    try:
        RouteScores.from_probability_rows("m", rows)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("scores", "threshold", "route", "reason"),
    [
        (_scores(0.7, 0.1, 0.1, 0.1), 0.6, "refund", "confident"),
        (_scores(0.7, 0.1, 0.1, 0.1), 0.61, "clarify", "below_threshold"),
        (_scores(0.1, 0.1, 0.1, 0.7), 0.0, "clarify", "unclear"),
        (_scores(0.1, 0.1, 0.79, 0.01), 0.7, "other", "confident"),
    ],
)
def test_decide(scores: RouteScores, threshold: float, route: str, reason: str) -> None:
    decision = decide(scores, _policy(threshold), request_id="r1")
    assert (decision.route, decision.reason) == (route, reason)
    assert decision.threshold == threshold
    assert decision.policy_version == "v1"


def test_per_route_threshold_and_min_margin() -> None:
    scores = _scores(0.6, 0.35, 0.03, 0.02)  # confidence 0.4667, margin 0.25
    assert (
        decide(scores, _policy(0.9, per_route_thresholds={"refund": 0.4}), request_id="r").route
        == "refund"
    )
    policy = _policy(0.4, min_margin=0.3)
    assert decide(scores, policy, request_id="r").reason == "below_threshold"


def test_model_unavailable_is_named_whatever_the_route() -> None:
    decision = decide(
        _scores(0.9, 0.05, 0.03, 0.02), _policy(), request_id="r", model_unavailable=True
    )
    assert (decision.route, decision.reason) == ("refund", "model_unavailable")


def test_temperature_calibrator_keeps_the_argmax_and_softens() -> None:
    scores = _scores(0.7, 0.1, 0.1, 0.1)
    softened = apply_calibrator(scores, Calibrator(kind="temperature", params={"temperature": 2.0}))
    assert softened.choice == "refund"
    # p_i^(1/T) renormalised: sqrt(.7) / (sqrt(.7) + 3 sqrt(.1))
    assert softened.probabilities["refund"] == pytest.approx(0.8367 / (0.8367 + 3 * 0.31623), 1e-3)


def test_policy_round_trip_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    save_policy(_policy(0.42), path)
    assert load_policy(path).threshold == 0.42
    path.write_text('{"version": 1}')
    with pytest.raises(InvalidPolicy, match="not a valid policy: field 'version'"):
        load_policy(path)
    with pytest.raises(ArtifactError, match="run `support-router train`"):
        load_policy(tmp_path / "missing.json")

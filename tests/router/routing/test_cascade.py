"""The cascade's stage selection (pure), its policy contract, and the router deciding
through a cascade of real models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from router.app.training import TrainResult
from router.contracts import NEVER_ROUTE, CascadeStage, Policy, PolicyModel, RouteScores
from router.errors import ArtifactError
from router.models.local.model import LocalRouteModel
from router.routing.cascade import (
    CascadeModel,
    answering_stage,
    answering_stage_rows,
    cascade_model,
    stage_routes,
)
from router.routing.rules import RouteRequest
from router.routing.service import BoundModel, decide_with
from router.storage.policy_store import load_policy, save_policy

FAST = PolicyModel(backend="local", name="local-tfidf-lr@aaaa", artifact_sha="a" * 64)
STRONG = PolicyModel(backend="e5", name="e5-tfidf-lr@bbbb", artifact_sha="b" * 64)


def _scores(choice: str, confidence: float) -> RouteScores:
    """Scores whose choice is `choice` at exactly `confidence` (n = 4)."""
    p_max = 0.25 + 0.75 * confidence
    rest = (1.0 - p_max) / 3
    probabilities = {r: (p_max if r == choice else rest)
                     for r in ("refund", "account", "other", "unclear")}
    return RouteScores.from_probabilities("m", probabilities)


def _policy(t_fast: float = 0.95, t_strong: float = 0.8, **extra: object) -> Policy:
    stages = [CascadeStage(model=FAST, threshold=t_fast),
              CascadeStage(model=STRONG, threshold=t_strong)]
    return Policy(version="c1", model=cascade_model([FAST, STRONG]), threshold=t_strong,
                  stages=stages, **extra)


@pytest.mark.parametrize(
    ("fast", "strong", "answers"),
    [
        # the fast stage is sure: it answers, the strong stage is never needed
        (("refund", 0.97), None, 0),
        (("refund", 0.95), None, 0),  # at the threshold counts as sure
        # the fast stage is unsure: the strong stage answers, routed or not
        (("refund", 0.94), ("refund", 0.90), 1),
        (("refund", 0.50), ("account", 0.10), 1),
        # a confident `unclear` of the fast stage defers rather than clarifies
        (("unclear", 0.99), ("account", 0.90), 1),
        (("unclear", 0.99), ("unclear", 0.99), 1),
    ],
)
def test_the_first_stage_that_routes_answers_else_the_last(
    fast: tuple[str, float], strong: tuple[str, float] | None, answers: int
) -> None:
    asked = [_scores(*fast)] + ([_scores(*strong)] if strong else [])
    assert answering_stage(asked, [0.95, 0.8]) == answers
    if strong:  # the same decision over arrays, as certification reads it
        rows = answering_stage_rows(np.array([[fast[0], strong[0]]]),
                                    np.array([[asked[0].confidence, asked[1].confidence]]),
                                    [0.95, 0.8])
        assert rows.tolist() == [answers]


@pytest.mark.parametrize(
    ("choice", "confidence", "threshold", "routes"),
    [("other", 0.8, 0.8, True), ("other", 0.79, 0.8, False), ("unclear", 1.0, 0.0, False),
     ("refund", 1.0, NEVER_ROUTE, False)],
)
def test_a_stage_routes_an_actionable_choice_at_or_above_its_threshold(
    choice: str, confidence: float, threshold: float, routes: bool
) -> None:
    assert stage_routes(_scores(choice, confidence), threshold) is routes


def test_rows_agree_with_one_message_at_a_time() -> None:
    rng = np.random.default_rng(5)
    routes = np.array(["refund", "account", "other", "unclear"])
    choices = routes[rng.integers(0, 4, size=(500, 3))]
    confidences = rng.uniform(size=(500, 3))
    thresholds = [0.9, 0.7, 0.5]
    one_by_one = [answering_stage([_scores(c, float(s)) for c, s in zip(cs, ss, strict=True)],
                                  thresholds)
                  for cs, ss in zip(choices, confidences, strict=True)]
    assert answering_stage_rows(choices, confidences, thresholds).tolist() == one_by_one


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stages": None}, "needs stages"),
        ({"t_fast": 0.7}, "must not increase"),
        ({"threshold": 0.9}, "not the last stage's"),
        ({"min_margin": 0.1}, "are its stages'"),
    ],
)
def test_an_inconsistent_cascade_policy_is_refused(change: dict[str, object],
                                                   message: str) -> None:
    data = _policy().model_dump()
    if "t_fast" in change:
        data["stages"][0]["threshold"] = change.pop("t_fast")
    data.update(change)
    with pytest.raises(ValidationError, match=message):
        Policy.model_validate(data)


def test_stages_on_a_single_model_policy_are_refused() -> None:
    with pytest.raises(ValidationError, match="only a cascade policy"):
        Policy(version="v", model=FAST, threshold=0.8,
               stages=[CascadeStage(model=FAST, threshold=0.9),
                       CascadeStage(model=STRONG, threshold=0.8)])


def test_a_cascade_policy_round_trips_and_a_plain_one_has_no_stages_field(
        tmp_path: Path) -> None:
    policy = _policy()
    save_policy(policy, tmp_path / "cascade.json")
    assert load_policy(tmp_path / "cascade.json") == policy
    save_policy(Policy(version="v", model=FAST, threshold=0.8), tmp_path / "plain.json")
    assert '"stages"' not in (tmp_path / "plain.json").read_text()


@pytest.fixture(scope="module")
def model(trained: TrainResult) -> LocalRouteModel:
    return LocalRouteModel.load(Path(trained.model_path))


def _same_model_cascade(model: LocalRouteModel, t_fast: float, t_strong: float
                        ) -> BoundModel:
    """The embedded model as both stages: which stage decided shows in the threshold."""
    identity = PolicyModel(backend="local", name=model.name, artifact_sha=model.artifact_sha)
    stages = [CascadeStage(model=identity, threshold=t_fast),
              CascadeStage(model=identity, threshold=t_strong)]
    policy = Policy(version="c1", model=cascade_model([identity, identity]),
                    threshold=t_strong, stages=stages)
    return BoundModel(CascadeModel([model, model], stages), policy)


def test_the_router_decides_through_the_stage_that_answered(model: LocalRouteModel) -> None:
    text = "My kettle arrived broken, please refund order O-1001."
    confidence = model.score(text).confidence
    assert 0.5 < confidence
    # sure enough for the fast stage: it decides, under its own threshold
    fast = decide_with(_same_model_cascade(model, 0.5, 0.3), RouteRequest(text=text), "r1", None)
    assert (fast.route, fast.threshold, fast.model) == ("refund", 0.5, model.name)
    # the fast stage never answers: the last stage decides under the last threshold
    strong = decide_with(_same_model_cascade(model, NEVER_ROUTE, 0.3), RouteRequest(text=text),
                         "r2", None)
    assert (strong.route, strong.threshold) == ("refund", 0.3)
    # nobody sure: the customer is asked
    asked = decide_with(_same_model_cascade(model, NEVER_ROUTE, 0.99), RouteRequest(text="hi"),
                        "r3", None)
    assert asked.route == "clarify"


def test_batch_answers_equal_one_message_at_a_time(model: LocalRouteModel) -> None:
    cascade = _same_model_cascade(model, 0.9, 0.6).model
    assert isinstance(cascade, CascadeModel)
    texts = ["refund my mug", "hi", "change my e-mail to a@b.c", "where is my parcel?",
             "I need help"]
    one_by_one = [cascade.answer(t) for t in texts]
    batch = cascade.answer_batch(texts)
    assert [(a.stage, a.scores.choice) for a in batch] == [
        (a.stage, a.scores.choice) for a in one_by_one]
    for a, b in zip(batch, one_by_one, strict=True):  # batched arithmetic, the same numbers
        assert a.scores.probabilities == pytest.approx(b.scores.probabilities, abs=1e-12)
    assert {a.stage for a in one_by_one} == {0, 1}


def test_a_cascade_refuses_a_policy_for_other_stage_models(model: LocalRouteModel) -> None:
    with pytest.raises(ArtifactError, match="certified for"):
        CascadeModel([model, model], _policy().stages or [])

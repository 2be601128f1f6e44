"""A cascade of decision models routed as one router.

The stages are tried in order, fast first: a stage answers when its (recalibrated)
choice is actionable and its confidence is at least its stage threshold; otherwise the
next stage is asked. The last stage's answer stands either way, under the last
threshold: routed when confident, else a clarifying question. So the fast model decides
where it is sure, the stronger model decides the rest, and what is still unsure is asked
about.

An `unclear` choice of an earlier stage defers rather than clarifies: the embedded
model's commonest error on other people's writing is a confident `unclear` for a
specific request, and asking the stronger model costs one call where a needless
clarification costs the customer a turn.

`answering_stage` and `answering_stage_rows` are the pure policy (one message, and many
rows as certification and evaluation read them); `CascadeModel` and `score_cascade` call
the stage models lazily, so the strong stage runs only for what the fast one defers.
The decision's `model` (and its scores' `model`) names the stage that answered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from router.contracts import CascadeStage, Policy, PolicyModel, RouteScores
from router.errors import ArtifactError
from router.models.base import DecisionModel
from router.routing.policy import apply_calibrator
from router.routing.rules import RouteRequest
from router.routing.scoring import score_request
from router.telemetry.metrics import time_model

CASCADE_PREFIX = "cascade:"


def stage_routes(scores: RouteScores, threshold: float) -> bool:
    """Whether a stage answers: an actionable choice at or above its threshold."""
    return scores.choice != "unclear" and scores.confidence >= threshold


def answering_stage(stage_scores: Sequence[RouteScores], thresholds: Sequence[float]) -> int:
    """Index of the stage whose answer decides, given the scores of the stages asked.

    The first stage that routes; when none of the given stages does, the last one given
    (the last stage decides whatever it says; an earlier one only when sure).
    """
    if not stage_scores:
        raise ValueError("no stage scores")
    for index, (scores, threshold) in enumerate(zip(stage_scores, thresholds, strict=False)):
        if stage_routes(scores, threshold):
            return index
    return len(stage_scores) - 1


def answering_stage_rows(choices: np.ndarray, confidences: np.ndarray,
                         thresholds: Sequence[float]) -> np.ndarray:
    """`answering_stage` of every row: choices and confidences of shape (n, k) for k
    stages (recalibrated), thresholds of shape (k,); returns stage indices, shape (n,)."""
    choices, confidences = np.asarray(choices), np.asarray(confidences, dtype=float)
    routes = (choices != "unclear") & (confidences >= np.asarray(thresholds, dtype=float))
    routes[:, -1] = True  # the last stage answers whatever the earlier ones left
    answered: np.ndarray = routes.argmax(axis=1)
    return answered


def cascade_name(stages: Sequence[PolicyModel]) -> str:
    """`cascade:<fast model>><strong model>`: what a cascade's predictions are named."""
    return CASCADE_PREFIX + ">".join(s.name for s in stages)


def cascade_sha(stages: Sequence[PolicyModel]) -> str:
    """One hash over the stages' artifact hashes, in order: the cascade's identity."""
    joined = "\x1f".join(f"{s.backend}:{s.name}:{s.artifact_sha or ''}" for s in stages)
    return hashlib.sha256(joined.encode()).hexdigest()


def cascade_model(stages: Sequence[PolicyModel]) -> PolicyModel:
    """The `Policy.model` of a cascade of these stage models."""
    return PolicyModel(backend="cascade", name=cascade_name(stages),
                       artifact_sha=cascade_sha(stages))


@dataclass(frozen=True)
class StageAnswer:
    """The answering stage's index and its recalibrated scores."""

    stage: int
    scores: RouteScores


class CascadeModel:
    """The stage models of a cascade, fast first; a `DecisionModel` whose answer is the
    answering stage's recalibrated scores (`scores.model` names that stage).

    Which stage answers depends on the stage thresholds, so they are passed with each
    call (`answer`): a published cascade policy with other thresholds takes effect at
    once. `score`/`score_batch` use the stages it was built with.
    """

    def __init__(self, models: Sequence[DecisionModel], stages: Sequence[CascadeStage]) -> None:
        if len(models) != len(stages):
            raise ArtifactError(f"{len(models)} models for {len(stages)} cascade stages")
        for model, stage in zip(models, stages, strict=True):
            if model.name != stage.model.name:
                raise ArtifactError(f"cascade stage is certified for {stage.model.name}, "
                                    f"but the loaded model is {model.name}")
        self.models = tuple(models)
        self.stages = tuple(stages)
        self._name = cascade_name([s.model for s in stages])

    @property
    def name(self) -> str:
        return self._name

    @property
    def artifact_sha(self) -> str:
        return cascade_sha([s.model for s in self.stages])

    def answer(self, text: str, stages: Sequence[CascadeStage] | None = None) -> StageAnswer:
        """The answering stage of one message, asking each stage only when needed."""
        return score_cascade(self, RouteRequest(text=text), stages or self.stages)

    def answer_batch(self, texts: Sequence[str],
                     stages: Sequence[CascadeStage] | None = None) -> list[StageAnswer]:
        """`answer` of every text, each stage scoring in one batch what is left to it."""
        stages = stages or self.stages
        answers: list[StageAnswer | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        for index, (model, stage) in enumerate(zip(self.models, stages, strict=True)):
            if not pending:
                break
            last = index == len(stages) - 1
            scored = model.score_batch([texts[i] for i in pending])
            deferred = []
            for row, raw in zip(pending, scored, strict=True):
                scores = apply_calibrator(raw, stage.calibrator)
                if last or stage_routes(scores, stage.threshold):
                    answers[row] = StageAnswer(index, scores)
                else:
                    deferred.append(row)
            pending = deferred
        return [a for a in answers if a is not None]

    def score(self, text: str) -> RouteScores:
        return self.answer(text).scores

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        return [a.scores for a in self.answer_batch(texts)]


def score_cascade(cascade: CascadeModel, request: RouteRequest,
                  stages: Sequence[CascadeStage]) -> StageAnswer:
    """The answering stage for one request, each stage scored as `score_request` scores
    a single model (an answer to a clarifying question read alone and after the earlier
    messages); later stages are not called once one answers. Each stage's call is timed
    under its own backend (the whole cascade under `cascade`, by the caller)."""

    if len(stages) != len(cascade.models):
        raise ArtifactError(f"a policy of {len(stages)} stages for a cascade of "
                            f"{len(cascade.models)} models")
    asked: list[RouteScores] = []
    thresholds = [s.threshold for s in stages]
    for model, stage in zip(cascade.models, stages, strict=True):
        with time_model(stage.model.backend):
            raw = score_request(model, request)
        asked.append(apply_calibrator(raw, stage.calibrator))
        if stage_routes(asked[-1], stage.threshold):
            break
    index = answering_stage(asked, thresholds)
    return StageAnswer(index, asked[index])


def stage_policy(policy: Policy, stage: int) -> Policy:
    """The view of a cascade policy one stage decides under: that stage's threshold, no
    further calibration (the stage's calibrator is already applied to its scores)."""
    if policy.stages is None:
        return policy
    return policy.model_copy(update={"threshold": policy.stages[stage].threshold,
                                     "stages": None})

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from calibration.data import LabelledRow
from calibration.predictions import (
    ScoreCache,
    backend_of,
    identify_backend,
    join_labels,
    local_question_sha,
    plan_scoring,
    policy_model_for,
    read_predictions,
    score_rows,
    write_predictions,
)
from router.contracts import RouteScores
from router.errors import CalibrationError, ModelUnavailable
from router.models.local.model import LocalRouteModel
from router.settings import Settings

ROWS = [LabelledRow(id=f"r{i}", text=text, label="refund") for i, text in enumerate([
    "my kettle broke, refund please", "stop the newsletter", "where is my parcel",
    "my kettle broke, refund please", "refund the lamp and change my address",
])]


class CountingModel:
    """A real backend (the local model) that counts what it is asked, and can fail."""

    def __init__(self, model: LocalRouteModel, *, fail_after: int | None = None) -> None:
        self.model, self.fail_after, self.asked = model, fail_after, []

    @property
    def name(self) -> str:
        return self.model.name

    def score(self, text: str) -> RouteScores:
        return self.score_batch([text])[0]

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            raise ModelUnavailable("the server went away")
        self.asked.extend(texts)
        return self.model.score_batch(texts)


@pytest.fixture
def local(settings: Settings) -> tuple[LocalRouteModel, object]:
    return LocalRouteModel.load(settings.local_model_path), identify_backend(settings, "local")


def test_local_identity(settings: Settings, local: tuple) -> None:
    model, identity = local
    assert identity.name == model.name and identity.artifact_sha == model.artifact_sha
    assert identity.question_sha == local_question_sha(model.artifact_sha)
    assert backend_of(identity.name) == "local"


@pytest.mark.parametrize(("name", "backend"), [
    ("local-tfidf-lr@025c7932587c", "local"), ("local-tfidf-e5-lr@c11ac2514530", "e5"),
    ("typesafe:jev-latest@1234abcd", "typesafe"),
    ("cascade:local-tfidf-lr@025c>local-tfidf-e5-lr@c11a", "cascade")])
def test_the_backend_of_each_model_name(name: str, backend: str) -> None:
    assert backend_of(name) == backend


def test_cache_makes_reruns_free_and_dedupes(tmp_path: Path, local: tuple) -> None:
    model, identity = local
    cache = ScoreCache(tmp_path / "cache.jsonl")
    counting = CountingModel(model)
    plan = plan_scoring([r.text for r in ROWS], identity, cache)
    assert (plan.n_rows, plan.n_unique, plan.n_calls) == (5, 4, 4)
    first = score_rows(ROWS, counting, identity, cache, batch_size=2)
    assert len(counting.asked) == 4  # the repeated text is asked once
    again = CountingModel(model)
    second = score_rows(ROWS, again, identity, ScoreCache(tmp_path / "cache.jsonl"))
    assert again.asked == [] and second == first
    assert plan_scoring([r.text for r in ROWS], identity, ScoreCache(tmp_path / "cache.jsonl")
                        ).n_calls == 0
    expected = model.score(ROWS[1].text)
    assert first[1].probabilities == pytest.approx(expected.probabilities)
    assert (first[1].choice, first[1].question_sha) == (expected.choice, identity.question_sha)


def test_an_interrupted_run_resumes_without_asking_again(tmp_path: Path, local: tuple) -> None:
    model, identity = local
    path = tmp_path / "cache.jsonl"
    failing = CountingModel(model, fail_after=2)
    with pytest.raises(ModelUnavailable):
        score_rows(ROWS, failing, identity, ScoreCache(path), batch_size=2)
    assert len(failing.asked) == 2
    with path.open("a") as handle:
        handle.write('{"key": "torn')  # a write cut short by the crash
    resumed = CountingModel(model)
    score_rows(ROWS, resumed, identity, ScoreCache(path), batch_size=2)
    assert sorted(resumed.asked) == sorted({r.text for r in ROWS} - set(failing.asked))
    assert len(ScoreCache(path)) == 4


def test_prediction_files_round_trip_and_join(tmp_path: Path, local: tuple) -> None:
    model, identity = local
    rows = score_rows(ROWS, model, identity, ScoreCache(None))
    path = tmp_path / "pred.jsonl"
    assert write_predictions(rows, path) == 5
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"id", "probabilities", "choice", "confidence", "model", "question_sha"}
    predictions = read_predictions(path)
    assert predictions.model == model.name and len(predictions) == 5
    joined, probabilities = join_labels(list(reversed(ROWS)), predictions)
    assert probabilities[0] == pytest.approx(list(rows[4].probabilities.values()))
    with pytest.raises(CalibrationError, match="1 labelled rows have no prediction"):
        join_labels([*ROWS, LabelledRow(id="zz", text="x", label="other")], predictions)


def test_mixed_models_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pred.jsonl"
    probs = {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1}
    lines = [{"id": "a", "probabilities": probs, "model": "local-x", "question_sha": "q"},
             {"id": "b", "probabilities": probs, "model": "typesafe:y@1", "question_sha": "q"}]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(CalibrationError, match="mixes predictions of several models"):
        read_predictions(path)


def test_policy_model_for_local_and_typesafe(tmp_path: Path, settings: Settings,
                                             local: tuple) -> None:
    model, identity = local
    path = tmp_path / "pred.jsonl"
    write_predictions(score_rows(ROWS, model, identity, ScoreCache(None)), path)
    bound = policy_model_for(read_predictions(path), settings)
    assert (bound.backend, bound.artifact_sha) == ("local", model.artifact_sha)
    text = path.read_text().replace(model.name, "local-tfidf-lr@000000000000")
    path.write_text(text)
    with pytest.raises(CalibrationError, match="score again"):
        policy_model_for(read_predictions(path), settings)
    typesafe = identify_backend(settings, "typesafe", "jev-small")
    assert typesafe.name.startswith("typesafe:jev-small@")
    path.write_text(text.replace("local-tfidf-lr@000000000000", typesafe.name).replace(
        identity.question_sha, typesafe.question_sha))
    bound = policy_model_for(read_predictions(path), settings)
    assert (bound.backend, bound.artifact_sha) == ("typesafe", typesafe.question_sha)
    assert np.isclose(read_predictions(path).probabilities.sum(axis=1), 1).all()

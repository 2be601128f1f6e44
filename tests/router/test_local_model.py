from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from calibration.data import load_labelled, select_split
from router.contracts import ROUTES
from router.errors import ArtifactError
from router.models.linear import LinearRouteScorer, artifact_from_fitted, save_artifact
from router.models.local import (
    LocalRouteModel,
    TrainOptions,
    build_pipeline,
    fit_temperature,
    label_indices,
    train_artifact,
)
from router.settings import PROJECT_ROOT
from router.training import TrainResult

ROWS = load_labelled(PROJECT_ROOT / "datasets" / "routes")
ODD_TEXTS = [
    "",
    "a",
    "  lots   of\tspaces\n\nand lines  ",
    "Ünïcödé àccents — Gdańsk, Schönhauser Allee; ёлка",
    "ok",
    "x" * 3000,
    "€15 $20 #O-1001 ana.novak@example.com 😀",
]


@pytest.fixture(scope="module")
def fitted() -> tuple:
    train = select_split(ROWS, "train")
    pipeline = build_pipeline(TrainOptions())
    pipeline.fit([r.text for r in train], label_indices([r.label for r in train]))
    fitted = artifact_from_fitted(
        pipeline.named_steps["features"],
        pipeline.named_steps["classifier"],
        temperature=1.7,
        meta={},
    )
    artifact = json.loads(json.dumps(fitted, sort_keys=True))
    return pipeline, LinearRouteScorer(artifact)


def test_fast_path_equals_the_scikit_learn_pipeline(fitted: tuple) -> None:
    pipeline, scorer = fitted
    texts = [r.text for r in ROWS] + ODD_TEXTS
    reference_logits = pipeline.decision_function(texts)
    fast_logits = np.array([scorer.logits(t) for t in texts])
    np.testing.assert_allclose(fast_logits, reference_logits, rtol=0, atol=1e-9)
    fast_probabilities = np.array([softmax(scorer.logits(t)) for t in texts])
    np.testing.assert_allclose(fast_probabilities, pipeline.predict_proba(texts), rtol=0, atol=1e-9)


def test_temperature_is_applied_to_the_logits(fitted: tuple) -> None:
    pipeline, scorer = fitted
    text = ROWS[0].text
    expected = softmax(pipeline.decision_function([text])[0] / 1.7)
    np.testing.assert_allclose(scorer.probabilities(text), expected, atol=1e-12)


def test_fit_temperature_recovers_a_known_temperature() -> None:
    rng = np.random.default_rng(7)
    true_logits = rng.normal(scale=3.0, size=(20000, 4))
    labels = np.array([rng.choice(4, p=softmax(row)) for row in true_logits])
    assert fit_temperature(true_logits * 2.5, labels) == pytest.approx(2.5, rel=0.05)


def test_same_data_gives_the_same_artifact(tmp_path: Path) -> None:
    rows = ROWS[::4]
    args = (
        [r.text for r in rows],
        [r.label for r in rows],
        [r.text for r in rows[:50]],
        [r.label for r in rows[:50]],
    )
    sha_a = save_artifact(train_artifact(*args, data_sha="x"), tmp_path / "a.json")
    sha_b = save_artifact(train_artifact(*args, data_sha="x"), tmp_path / "b.json")
    assert sha_a == sha_b
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_artifact_round_trip_scores_like_the_trained_model(trained: TrainResult) -> None:
    model = LocalRouteModel.load(trained.model_path)
    assert trained.artifact_sha.startswith(model.name.split("@")[1])
    scores = model.score("my teapot arrived broken, I want my money back")
    assert set(scores.probabilities) == set(ROUTES)
    assert sum(scores.probabilities.values()) == pytest.approx(1.0)
    assert scores.choice == "refund"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"format": "something-else"}', "not a local route model"),
        (b'{"format": "support-router/local-route-model", "format_version": 99}', "retrain"),
    ],
)
def test_bad_artifacts_are_refused_with_a_clear_message(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "model.json"
    path.write_bytes(content)
    with pytest.raises(ArtifactError, match=message):
        LocalRouteModel.load(path)

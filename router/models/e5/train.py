"""Training the `[e5]` backend: the local model's cross-fitting with embedding columns.

Each text is embedded once; the embedding columns are appended after the TF-IDF blocks,
scaled by a factor picked on held-out rows (`SCALE_GRID`). The folds, the fold C and
the second stage are the local model's (`router.models.crossfit`,
`router.models.local.train`), so both backends are trained, calibrated and compared the
same way. Training only: `router.models.e5.model` scores the artifact without
scikit-learn.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
from joblib import Parallel, delayed
from scipy.sparse import csr_matrix, hstack
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion

from router.contracts import ROUTES
from router.models.crossfit import (
    CROSS_FIT_FOLDS,
    cross_fit,
    parallel_jobs,
    stratified_folds,
)
from router.models.e5.embeddings import E5Embedder
from router.models.local.classes import LINEAR_CLASSES, linear_targets, route_logits
from router.models.local.fitted import artifact_from_fitted
from router.models.local.linear import LinearRouteScorer
from router.models.local.model import PreparedText, second_stage_features
from router.models.local.train import (
    TrainOptions,
    add_second_stage,
    build_pipeline,
    fold_options,
)
from router.models.maths import fit_temperature, label_indices

SCALE_GRID = (1.0, 2.0, 4.0)


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
    local model (`router.models.local.train.train_artifact`).

    The texts come already prepared (`prepare_cuts` of the steering detector's
    out-of-fold cuts). Each text is embedded once; every fold's linear model reads the
    embeddings of its own rows. The embedding scale is picked on the first fold (three
    fits instead of fifteen), then each fold's whole-message logits (with embeddings)
    and clause logits (TF-IDF part only) come from a model fitted on the other folds, and
    the temperature and the second stage are fitted on those out-of-fold features.

    Measured on the calibration split with the train split as the only training data
    (the README has the figures), cross-fitting was better on every figure than fitting
    the linear model on the train split and the second stage on the calibration split.
    """
    options = options or TrainOptions()
    whole = [p.whole for p in prepared]
    dense = embedder.embed(whole)
    y = label_indices(labels)
    targets = linear_targets(labels, tags)
    folds = stratified_folds(targets)
    fit_rows, held_rows = folds[0]
    accuracies = Parallel(n_jobs=parallel_jobs(len(SCALE_GRID)))(
        delayed(_scale_accuracy)(whole, dense, targets, y, fit_rows, held_rows, scale, options)
        for scale in SCALE_GRID
    )
    scale = SCALE_GRID[int(np.argmax(accuracies))]
    identity = embedder.identity.as_dict()
    features = cross_fit(
        partial(_out_of_fold_features, prepared, dense, targets, scale, identity, options),
        folds,
        n_rows=len(y),
        n_jobs=parallel_jobs(CROSS_FIT_FOLDS),
    )
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
        fold_options(options, len(texts), len(fit_rows)),
    )
    held = _combine(union.transform([texts[i] for i in held_rows]), dense[held_rows], scale)
    logits = classifier.decision_function(held)
    return float(np.mean(route_logits(logits).argmax(axis=1) == y[held_rows]))


def _out_of_fold_features(
    prepared: Sequence[PreparedText],
    dense: np.ndarray,
    targets: np.ndarray,
    scale: float,
    identity: dict,
    options: TrainOptions,
    fit_rows: np.ndarray,
    held_rows: np.ndarray,
) -> np.ndarray:
    """Second-stage features of `held_rows` from a model fitted on `fit_rows`."""
    union, classifier = _fit(
        [prepared[i].whole for i in fit_rows], dense[fit_rows], targets[fit_rows], scale,
        fold_options(options, len(prepared), len(fit_rows)),
    )
    fold = artifact_from_fitted(
        union, classifier, temperature=1.0, classes=LINEAR_CLASSES, meta={},
        dense=_dense_spec(dense.shape[1], scale, identity),
    )
    held = [prepared[i] for i in held_rows]
    return second_stage_features(LinearRouteScorer(fold), held, dense[held_rows])


def _dense_spec(dim: int, scale: float, identity: dict) -> dict:
    return {"kind": "e5", "dim": int(dim), "scale": scale, "identity": identity}


def _combine(sparse: csr_matrix, dense: np.ndarray, scale: float) -> csr_matrix:
    return hstack([sparse, csr_matrix(dense * scale)]).tocsr()

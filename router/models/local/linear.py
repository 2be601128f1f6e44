"""A fitted linear route model as a plain-JSON artifact, and its scikit-learn-free scorer.

The artifact holds the TF-IDF vocabularies and idf weights, the logistic-regression
weights, the temperature and, for the e5 backend, how dense embedding features were
appended. Training writes it (`router.models.local.fitted`); `LinearRouteScorer`
evaluates it directly (`router.models.local.kernels.features`), so serving never imports
scikit-learn, scoring costs microseconds and loading never unpickles anything. The same
data and settings give byte-identical files, and `artifact_sha` names exactly one model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from router.contracts import ROUTES
from router.errors import ArtifactError
from router.models.local.classes import route_logits
from router.models.local.clauses import SECOND_STAGE_FEATURES, softmax_rows
from router.models.local.kernels.features import TfidfSpace

ARTIFACT_FORMAT = "support-router/local-route-model"
# 4: the linear model splits unclear into vague and two-request classes;
# 5: a learned steering detector runs before instruction stripping;
# 6: its loose cut and kept score feed the second stage.
ARTIFACT_VERSION = 6


def save_artifact(artifact: dict, path: Path) -> str:
    """Write the artifact deterministically and return its sha256."""
    payload = json.dumps(artifact, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    data = payload.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return hashlib.sha256(data).hexdigest()


class LinearRouteScorer:
    """The fitted model evaluated directly from its vocabulary and weights."""

    def __init__(self, artifact: dict) -> None:
        if artifact.get("format") != ARTIFACT_FORMAT:
            raise ArtifactError("not a local route model artifact")
        if artifact.get("format_version") != ARTIFACT_VERSION:
            raise ArtifactError(
                f"artifact format {artifact.get('format_version')}; this build reads "
                f"{ARTIFACT_VERSION} — retrain with `support-router train`"
            )
        coef = np.asarray(artifact["coef"], dtype=float)
        self.intercept = np.asarray(artifact["intercept"], dtype=float)
        self.temperature = float(artifact["temperature"])
        self.space = TfidfSpace(artifact["blocks"])
        offset = self.space.n_features
        # One row per feature, so gathering a message's few hundred features is cheap.
        self.table = self.space.scoring_table(coef[:, :offset].T)
        self.dense = artifact.get("dense")
        self.dense_weights: np.ndarray | None = None
        if self.dense:
            # Scale folded into the weights: features are `scale * embedding`.
            dense_coef = coef[:, offset : offset + int(self.dense["dim"])]
            self.dense_weights = np.ascontiguousarray(dense_coef.T) * float(self.dense["scale"])
            offset += int(self.dense["dim"])
        if offset != coef.shape[1]:
            raise ArtifactError("artifact weights do not match its vocabulary")
        # Compiles the numba kernels (or loads them from numba's cache) now, while the
        # gateway starts, instead of on the first customer's request: seconds on a fresh
        # checkout. A non-ASCII text compiles the accent kernel too.
        self.sparse_logits(["warm up", "réchauffer"])

    def logits(self, text: str, dense: np.ndarray | None = None) -> np.ndarray:
        """Raw decision function (before temperature) for one already-stripped text."""
        return self.sparse_logits([text])[0] + self._dense_logits(dense)

    def logits_batch(self, texts: Sequence[str], dense: np.ndarray | None = None) -> np.ndarray:
        """Raw decision function of many texts, shape (n, classes)."""
        return self.sparse_logits(texts) + self._dense_logits(dense)

    def sparse_logits(self, texts: Sequence[str]) -> np.ndarray:
        """The TF-IDF part of the decision function only (no dense columns), shape (n, classes).

        Equal to `logits_batch` for a model without dense features; for the e5 model it
        scores clauses without embedding each of them.
        """
        return self.intercept + self.space.logits(self.table, texts)

    def _dense_logits(self, dense: np.ndarray | None) -> np.ndarray | float:
        if self.dense_weights is None:
            return 0.0
        if dense is None:
            raise ArtifactError("this model needs dense (embedding) features for every text")
        return dense @ self.dense_weights

    def probabilities(self, text: str, dense: np.ndarray | None = None) -> np.ndarray:
        """Route probabilities (unclear classes merged; temperature on the route logits)."""
        return softmax_rows(route_logits(self.logits(text, dense)) / self.temperature)

    def probabilities_batch(
        self, texts: Sequence[str], dense: np.ndarray | None = None
    ) -> np.ndarray:
        return softmax_rows(route_logits(self.logits_batch(texts, dense)) / self.temperature)


class SecondStage:
    """The second-stage model: standardised clause features → multinomial logits.

    Stored in the artifact as plain numbers (`router.models.local.fitted`), evaluated here
    with one matrix product; a test proves it equals the scikit-learn pipeline it came
    from.
    """

    def __init__(self, spec: dict) -> None:
        self.features: list[str] = list(spec["features"])
        if self.features != list(SECOND_STAGE_FEATURES):
            raise ArtifactError(
                "the model's second stage was trained on other features than this "
                "build computes — retrain with `support-router train`"
            )
        self.mean = np.asarray(spec["mean"], dtype=float)
        self.scale = np.asarray(spec["scale"], dtype=float)
        # Standardisation folded into the weights: (x - mean) / scale @ W = x @ W' + b'.
        coef = np.asarray(spec["coef"], dtype=float)
        self.coef = np.ascontiguousarray((coef / self.scale).T)
        intercept = np.asarray(spec["intercept"], dtype=float)
        self.intercept = intercept - (self.mean / self.scale) @ coef.T
        self.temperature = float(spec["temperature"])
        if self.coef.shape != (len(self.features), len(ROUTES)):
            raise ArtifactError("second-stage weights do not match its feature list")

    def logits(self, features: np.ndarray) -> np.ndarray:
        return features @ self.coef + self.intercept

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Rows of route probabilities (temperature applied) for rows of features."""
        return softmax_rows(self.logits(np.atleast_2d(features)) / self.temperature)


def load_artifact(path: Path) -> tuple[dict, str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ArtifactError(f"no model at {path}; run `support-router train`") from exc
    try:
        return json.loads(data), hashlib.sha256(data).hexdigest()
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"model artifact {path} is not valid JSON") from exc

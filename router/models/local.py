"""The embedded decision model: TF-IDF + multinomial logistic regression + temperature.

Training uses scikit-learn; serving evaluates the fitted linear model straight from the
saved vocabulary and weights (`router.models.features`), so scoring one message costs
microseconds and loading never unpickles anything. The artifact is plain JSON: the same
data and settings give byte-identical files, and `artifact_sha` names exactly one model.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy
import sklearn
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline

from router.contracts import ROUTES, RouteScores
from router.errors import ArtifactError
from router.models.features import TfidfBlock, preprocess
from router.models.clauses import UNCLEAR, shift_to_unclear, split_clauses
from router.models.instructions import strip_instructions

ARTIFACT_FORMAT = "support-router/local-route-model"
ARTIFACT_VERSION = 2
WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 5)
TWO_REQUEST_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass(frozen=True)
class TrainOptions:
    c: float = 10.0
    char_min_df: int = 2
    max_iter: int = 5000


def build_pipeline(options: TrainOptions) -> Pipeline:
    """The reference scikit-learn pipeline; the fast path must agree with it exactly."""
    common = {"sublinear_tf": True, "strip_accents": "unicode", "lowercase": True}
    features = FeatureUnion(
        [
            ("word", TfidfVectorizer(analyzer="word", ngram_range=WORD_NGRAMS, **common)),
            (
                "char",
                TfidfVectorizer(
                    analyzer="char_wb",
                    ngram_range=CHAR_NGRAMS,
                    min_df=options.char_min_df,
                    **common,
                ),
            ),
        ]
    )
    classifier = LogisticRegression(C=options.c, max_iter=options.max_iter, tol=1e-8)
    return Pipeline([("features", features), ("classifier", classifier)])


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature minimising NLL on held-out logits (one parameter, argmax unchanged)."""

    def nll(log_t: float) -> float:
        logp = log_softmax(logits / np.exp(log_t), axis=1)
        return float(-logp[np.arange(len(labels)), labels].mean())

    result = minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded")
    return float(np.exp(result.x))


def _label_indices(labels: Sequence[str]) -> np.ndarray:
    return np.array([ROUTES.index(label) for label in labels])  # type: ignore[arg-type]


def train_artifact(
    train_texts: Sequence[str],
    train_labels: Sequence[str],
    held_out_texts: Sequence[str],
    held_out_labels: Sequence[str],
    *,
    options: TrainOptions = TrainOptions(),
    data_sha: str = "",
) -> dict:
    """Fit the pipeline on train rows and the temperature on held-out rows; return the artifact."""
    pipeline = build_pipeline(options)
    pipeline.fit([strip_instructions(t) for t in train_texts], _label_indices(train_labels))
    held_out = [strip_instructions(t) for t in held_out_texts]
    held_out_y = _label_indices(held_out_labels)
    temperature = fit_temperature(pipeline.decision_function(held_out), held_out_y)
    artifact = artifact_from_pipeline(
        pipeline,
        temperature=temperature,
        meta={
            "data_sha": data_sha,
            "n_train": len(train_texts),
            "n_held_out": len(held_out_texts),
            "options": options.__dict__,
        },
    )
    artifact["two_request"] = _tune_two_request_detector(
        LinearRouteScorer(artifact), held_out, held_out_y
    )
    return artifact


def _tune_two_request_detector(
    scorer: LinearRouteScorer, texts: Sequence[str], y: np.ndarray
) -> dict | None:
    """The clause confidence that most improves held-out accuracy, or None if none does."""
    base = scorer.probabilities_batch(texts)
    clauses = _clause_probabilities(scorer, texts)
    best_accuracy, best = float(np.mean(base.argmax(axis=1) == y)), None
    for min_confidence in TWO_REQUEST_GRID:
        detected = _detect_two_requests(base, clauses, min_confidence)
        accuracy = float(np.mean(detected.argmax(axis=1) == y))
        if accuracy > best_accuracy:
            best_accuracy, best = accuracy, {"min_confidence": min_confidence}
    return best


def _clause_probabilities(scorer: LinearRouteScorer, texts: Sequence[str]) -> list[np.ndarray]:
    """Per text, one probability row per clause — all clauses scored in one batch."""
    per_text = [split_clauses(text) for text in texts]
    flat = [clause for clauses in per_text for clause in clauses]
    scored = scorer.probabilities_batch(flat) if flat else np.zeros((0, len(ROUTES)))
    bounds = np.cumsum([0] + [len(clauses) for clauses in per_text])
    return [scored[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]


def _detect_two_requests(
    probabilities: np.ndarray, clauses: list[np.ndarray], min_confidence: float
) -> np.ndarray:
    return np.array([
        shift_to_unclear(row, clause_rows, min_confidence=min_confidence)
        for row, clause_rows in zip(probabilities, clauses, strict=True)
    ])


def artifact_from_pipeline(pipeline: Pipeline, *, temperature: float, meta: dict) -> dict:
    union: FeatureUnion = pipeline.named_steps["features"]
    classifier: LogisticRegression = pipeline.named_steps["classifier"]
    if list(classifier.classes_) != list(range(len(ROUTES))):
        raise ArtifactError("training data must contain every route")
    blocks = []  # a list: its order is the column order of `coef`
    for name, vectorizer in union.transformer_list:
        terms = [""] * len(vectorizer.vocabulary_)
        for term, column in vectorizer.vocabulary_.items():
            terms[column] = term
        blocks.append({
            "name": name,
            "analyzer": vectorizer.analyzer,
            "ngram_range": list(vectorizer.ngram_range),
            "terms": terms,
            "idf": vectorizer.idf_.tolist(),
        })
    return {
        "format": ARTIFACT_FORMAT,
        "format_version": ARTIFACT_VERSION,
        "classes": list(ROUTES),
        "blocks": blocks,
        "coef": classifier.coef_.tolist(),
        "intercept": classifier.intercept_.tolist(),
        "temperature": temperature,
        "training": meta,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
        },
    }


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
        self.blocks: list[tuple[TfidfBlock, np.ndarray]] = []
        offset = 0
        for block in artifact["blocks"]:
            tfidf = TfidfBlock(
                block["analyzer"],
                tuple(block["ngram_range"]),
                block["terms"],
                np.asarray(block["idf"], dtype=float),
            )
            # One row per feature, so gathering a message's few hundred features is cheap.
            weights = np.ascontiguousarray(coef[:, offset : offset + tfidf.n_features].T)
            self.blocks.append((tfidf, weights))
            offset += tfidf.n_features
        if offset != coef.shape[1]:
            raise ArtifactError("artifact weights do not match its vocabulary")

    def logits(self, text: str) -> np.ndarray:
        """Raw decision function (before temperature) for one already-stripped text."""
        preprocessed = preprocess(text)
        total = self.intercept.copy()
        for tfidf, weights in self.blocks:
            columns, values = tfidf.transform(preprocessed)
            total += values @ weights[columns]
        return total

    def logits_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Raw decision function of many texts, shape (n, routes), via sparse products."""
        preprocessed = [preprocess(text) for text in texts]
        total = np.tile(self.intercept, (len(texts), 1))
        for tfidf, weights in self.blocks:
            total += tfidf.transform_batch(preprocessed) @ weights
        return total

    def probabilities_batch(self, texts: Sequence[str]) -> np.ndarray:
        return softmax(self.logits_batch(texts) / self.temperature, axis=1)

    def probabilities(self, text: str) -> np.ndarray:
        return softmax(self.logits(text) / self.temperature)


def load_artifact(path: Path) -> tuple[dict, str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ArtifactError(f"no model at {path}; run `support-router train`") from exc
    try:
        return json.loads(data), hashlib.sha256(data).hexdigest()
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"model artifact {path} is not valid JSON") from exc


class LocalRouteModel:
    """The embedded default backend: strip instructions, score, then look for two requests."""

    def __init__(self, artifact: dict, artifact_sha: str) -> None:
        self._scorer = LinearRouteScorer(artifact)
        detector = artifact.get("two_request")
        self._two_request_confidence = detector["min_confidence"] if detector else None
        self.artifact_sha = artifact_sha
        self._name = f"local-tfidf-lr@{artifact_sha[:12]}"

    @classmethod
    def load(cls, path: Path) -> LocalRouteModel:
        artifact, sha = load_artifact(path)
        return cls(artifact, sha)

    @property
    def name(self) -> str:
        return self._name

    def score(self, text: str) -> RouteScores:
        """One message on the fast path (no sparse-matrix set-up)."""
        stripped = strip_instructions(text)
        probabilities = self._scorer.probabilities(stripped)
        if self._two_request_confidence is not None and probabilities.argmax() != UNCLEAR:
            clauses = split_clauses(stripped)
            if len(clauses) >= 2:
                clause_rows = np.array([self._scorer.probabilities(c) for c in clauses])
                probabilities = shift_to_unclear(
                    probabilities, clause_rows, min_confidence=self._two_request_confidence
                )
        return self._to_scores(probabilities)

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        stripped = [strip_instructions(text) for text in texts]
        probabilities = self._scorer.probabilities_batch(stripped)
        if self._two_request_confidence is not None:
            clauses = _clause_probabilities(self._scorer, stripped)
            probabilities = _detect_two_requests(
                probabilities, clauses, self._two_request_confidence
            )
        return [self._to_scores(row) for row in probabilities]

    def _to_scores(self, probabilities: np.ndarray) -> RouteScores:
        return RouteScores.from_probabilities(self._name, dict(zip(ROUTES, probabilities, strict=True)))

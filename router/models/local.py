"""The embedded decision model: TF-IDF + multinomial logistic regression + temperature.

Training uses scikit-learn; serving uses the JSON artifact and scorer of
`router.models.linear`. Around the linear model: instruction stripping before scoring,
and the two-request detector after it, both measured on held-out data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline

from router.contracts import ROUTES, RouteScores
from router.models.clauses import UNCLEAR, shift_to_unclear, split_clauses
from router.models.entities import normalise_entities
from router.models.instructions import strip_instructions
from router.models.linear import LinearRouteScorer, artifact_from_fitted, load_artifact

WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 5)
MODEL_NAME_PREFIX = "local-tfidf-lr"
TWO_REQUEST_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def prepare_text(text: str) -> str:
    """What the linear model sees: instructions removed, then entities replaced."""
    return normalise_entities(strip_instructions(text))


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


def label_indices(labels: Sequence[str]) -> np.ndarray:
    return np.array([ROUTES.index(label) for label in labels])  # type: ignore[arg-type]


def train_artifact(
    train_texts: Sequence[str],
    train_labels: Sequence[str],
    held_out_texts: Sequence[str],
    held_out_labels: Sequence[str],
    *,
    options: TrainOptions | None = None,
    data_sha: str = "",
) -> dict:
    """Fit the pipeline on train rows and the temperature on held-out rows; return the artifact."""
    options = options or TrainOptions()
    pipeline = build_pipeline(options)
    pipeline.fit([prepare_text(t) for t in train_texts], label_indices(train_labels))
    held_out = [prepare_text(t) for t in held_out_texts]
    held_out_y = label_indices(held_out_labels)
    temperature = fit_temperature(pipeline.decision_function(held_out), held_out_y)
    artifact = artifact_from_fitted(
        pipeline.named_steps["features"],
        pipeline.named_steps["classifier"],
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
    return np.array(
        [
            shift_to_unclear(row, clause_rows, min_confidence=min_confidence)
            for row, clause_rows in zip(probabilities, clauses, strict=True)
        ]
    )


class LocalRouteModel:
    """The embedded default backend: strip instructions, score, then look for two requests."""

    def __init__(self, artifact: dict, artifact_sha: str) -> None:
        self._scorer = LinearRouteScorer(artifact)
        detector = artifact.get("two_request")
        self._two_request_confidence = detector["min_confidence"] if detector else None
        self.artifact_sha = artifact_sha
        self._name = f"{MODEL_NAME_PREFIX}@{artifact_sha[:12]}"

    @classmethod
    def load(cls, path: Path) -> LocalRouteModel:
        """Load an artifact; the same unchanged file is parsed once per process."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            stat = None
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size) if stat else None
        return _load_cached(path, key) if key else cls(*load_artifact(path))

    @property
    def name(self) -> str:
        return self._name

    def score(self, text: str) -> RouteScores:
        """One message on the fast path (no sparse-matrix set-up)."""
        stripped = prepare_text(text)
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
        stripped = [prepare_text(text) for text in texts]
        probabilities = self._scorer.probabilities_batch(stripped)
        if self._two_request_confidence is not None:
            clauses = _clause_probabilities(self._scorer, stripped)
            probabilities = _detect_two_requests(
                probabilities, clauses, self._two_request_confidence
            )
        return [self._to_scores(row) for row in probabilities]

    def _to_scores(self, probabilities: np.ndarray) -> RouteScores:
        probs = dict(zip(ROUTES, probabilities, strict=True))
        return RouteScores.from_probabilities(self._name, probs)


@lru_cache(maxsize=4)
def _load_cached(path: Path, key: tuple[str, int, int]) -> LocalRouteModel:
    """`key` (path, mtime, size) makes a rewritten artifact a cache miss."""
    return LocalRouteModel(*load_artifact(path))

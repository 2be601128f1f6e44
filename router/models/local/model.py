"""The embedded decision model: TF-IDF + multinomial logistic regression, then a second stage.

Training uses scikit-learn; serving uses the JSON artifact and scorer of
`router.models.local.linear`. Around the linear model: instruction stripping before scoring;
after it, every clause of the message is scored too and a small second-stage logistic
regression over [whole-message logits + clause features] (`router.models.local.clauses`) and
the steering detector's kept score gives the final probabilities (with its own
temperature). The clauses come from the text the detector cut more loosely
(`SteeringCut`), so a clause that looks like steering is not taken for a second request.
Both stages are cross-fitted over the same rows (`train_artifact`), so every labelled
row trains the linear model and the second stage only ever sees logits of rows the linear
model did not fit. A fixed two-request rule could only move probability towards
`unclear`; the second stage learns from held-out data how much a second confident
intent, a one-word message or a low-confidence clause should count, in either direction.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import StandardScaler

from router.collector import collector_paused
from router.contracts import ROUTES, RouteScores
from router.errors import ArtifactError
from router.models.local.classes import LINEAR_CLASSES, linear_targets
from router.models.local.clauses import (
    CLAUSE_FEATURES,
    SECOND_STAGE_FEATURES,
    clause_features,
    clause_features_batch,
    split_clauses,
)
from router.models.local.linear import (
    LinearRouteScorer,
    SecondStage,
    artifact_from_fitted,
    load_artifact,
    second_stage_artifact,
)
from router.models.local.steering import SteeringCut, SteeringDetector, fit_steering_detector, uncut
from router.models.local.text.entities import normalise_entities
from router.models.local.text.instructions import strip_instructions

WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 5)
MODEL_NAME_PREFIX = "local-tfidf-lr"
SECOND_STAGE_C_GRID = (0.1, 0.3, 1.0)
SECOND_STAGE_FOLDS = 5
CROSS_FIT_FOLDS = 5


def prepare_text(text: str) -> str:
    """What the linear model sees: instructions removed, then entities replaced."""
    return normalise_entities(strip_instructions(text))


@dataclass(frozen=True)
class PreparedText:
    """A message as the two stages read it."""

    whole: str  # the strict steering cut, prepared: what the linear model scores
    clause_source: str  # the loose cut, prepared: what the clause features are read from
    kept_steering: float  # `SteeringCut.kept`


def prepare_cuts(cuts: Sequence[SteeringCut]) -> list[PreparedText]:
    prepared = []
    for cut in cuts:
        whole = prepare_text(cut.text)
        source = whole if cut.loose_text == cut.text else prepare_text(cut.loose_text)
        prepared.append(PreparedText(whole, source, cut.kept))
    return prepared


def prepare_texts(
    texts: Sequence[str], steering: SteeringDetector | None
) -> list[PreparedText]:
    """`prepare_text` after the learned steering detector (when the model has one)."""
    return prepare_cuts(uncut(texts) if steering is None else steering.cut_batch(texts))


@dataclass(frozen=True)
class TrainOptions:
    c: float = 10.0
    char_min_df: int = 2
    max_iter: int = 5000
    # 1e-4 rather than 1e-8: much faster to fit, and the extra digits of the optimum do
    # not change the choices; the fast path matches whatever was fitted.
    tol: float = 1e-4


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
    classifier = LogisticRegression(C=options.c, max_iter=options.max_iter, tol=options.tol)
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
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    tags: Sequence[Sequence[str]],
    steering: Sequence[Sequence[str] | None] | None = None,
    extra_segments: Sequence[tuple[str, bool]] = (),
    options: TrainOptions | None = None,
    data_sha: str = "",
) -> tuple[dict, np.ndarray]:
    """The artifact, and out-of-fold probabilities of every row, from one set of rows.

    With `steering` (each row's marked spans, `calibration.data.steering_marks`) a
    steering detector is fitted first (`router.models.local.steering`) and every later step
    learns from the texts it leaves, cleaned out of fold.

    Cross-fitting, so both stages learn from every row: the rows are split into
    `CROSS_FIT_FOLDS` folds, and each fold's whole-message and clause logits come from a
    linear model fitted on the other folds. The linear temperature and the second stage
    are fitted on those out-of-fold features (the second stage cross-fitted again inside
    `fit_second_stage`); the final linear model is fitted on all rows. The returned
    probabilities are out-of-fold at both levels: what the default threshold is picked on.
    `tags` tell the linear model's two unclear classes apart (`router.models.local.classes`).

    Holding rows out for the second stage alone would leave them out of the linear
    model; cross-fitting gives every labelled row to both stages.
    """
    options = options or TrainOptions()
    detector, cuts = (
        (None, uncut(texts))
        if steering is None
        else fit_steering_detector(texts, steering, extra_segments=extra_segments)
    )
    prepared = prepare_cuts(cuts)
    stripped = [p.whole for p in prepared]
    y = label_indices(labels)
    targets = linear_targets(labels, tags)
    folds = StratifiedKFold(CROSS_FIT_FOLDS, shuffle=True, random_state=0).split(
        stripped, targets
    )
    features = np.zeros((len(y), len(SECOND_STAGE_FEATURES)))
    fold_results = Parallel(n_jobs=min(CROSS_FIT_FOLDS, os.cpu_count() or 1))(
        delayed(_out_of_fold_features)(prepared, targets, fit_rows, held_rows, options)
        for fit_rows, held_rows in folds
    )
    for held_rows, held_features in fold_results:
        features[held_rows] = held_features
    whole_logits = features[:, : len(ROUTES)]  # merged over routes (`clause_features`)
    pipeline = build_pipeline(options).fit(stripped, targets)
    artifact = artifact_from_fitted(
        pipeline.named_steps["features"],
        pipeline.named_steps["classifier"],
        temperature=fit_temperature(whole_logits, y),
        classes=LINEAR_CLASSES,
        meta={
            "data_sha": data_sha,
            "n_rows": len(texts),
            "cross_fit_folds": CROSS_FIT_FOLDS,
            "options": options.__dict__,
        },
    )
    artifact["steering"] = detector
    return artifact, add_second_stage(artifact, features, y)


def add_second_stage(artifact: dict, features: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Fit the second stage on out-of-fold `features` into `artifact` (None when it does not
    beat the linear model); the out-of-fold probabilities of whichever stage scores last."""
    whole_logits = features[:, : len(ROUTES)]  # merged over routes (`clause_features`)
    linear_accuracy = float(np.mean(whole_logits.argmax(axis=1) == y))
    artifact["second_stage"], probabilities = fit_second_stage(
        features, y, baseline_accuracy=linear_accuracy
    )
    if probabilities is None:
        probabilities = softmax(whole_logits / artifact["temperature"], axis=1)
    return probabilities


def _out_of_fold_features(
    prepared: Sequence[PreparedText],
    targets: np.ndarray,
    fit_rows: np.ndarray,
    held_rows: np.ndarray,
    options: TrainOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """Second-stage features of `held_rows` from a linear model fitted on `fit_rows`.

    The fold's C is scaled by all rows / fitted rows, so its penalty per row is the final
    model's: with the same C a model fitted on fewer rows is regularised harder and less
    confident than the final one, and a threshold certified on its scores would route
    more on new data than the certificate assumes.
    """
    options = replace(options, c=options.c * len(prepared) / len(fit_rows))
    pipeline = build_pipeline(options).fit(
        [prepared[i].whole for i in fit_rows], targets[fit_rows]
    )
    fold = artifact_from_fitted(
        pipeline.named_steps["features"],
        pipeline.named_steps["classifier"],
        temperature=1.0,
        classes=LINEAR_CLASSES,
        meta={},
    )
    held = [prepared[i] for i in held_rows]
    return held_rows, second_stage_features(LinearRouteScorer(fold), held)


def fit_second_stage(
    features: np.ndarray, y: np.ndarray, *, baseline_accuracy: float | None = None
) -> tuple[dict | None, np.ndarray | None]:
    """Fit the second stage on held-out features, choosing C by out-of-fold log loss.

    Returns its artifact part and the out-of-fold probabilities (temperature applied),
    or (None, None) when the held-out rows are too few to cross-fit (a route with fewer
    than two rows), or when its out-of-fold accuracy is below `baseline_accuracy` (the
    linear model's own accuracy on the same rows): the model then scores with the linear
    model alone.
    """
    counts = np.bincount(y, minlength=len(ROUTES))
    n_splits = int(min(SECOND_STAGE_FOLDS, counts.min()))
    if n_splits < 2:
        return None, None
    folds = list(StratifiedKFold(n_splits, shuffle=True, random_state=0).split(features, y))
    best: tuple[float, float, np.ndarray] | None = None
    for c in SECOND_STAGE_C_GRID:
        out_of_fold = np.zeros((len(y), len(ROUTES)))
        for fit_rows, score_rows in folds:
            model = _second_stage_pipeline(c).fit(features[fit_rows], y[fit_rows])
            out_of_fold[score_rows] = model.decision_function(features[score_rows])
        loss = float(-log_softmax(out_of_fold, axis=1)[np.arange(len(y)), y].mean())
        if best is None or loss < best[0] - 1e-12:
            best = (loss, c, out_of_fold)
    assert best is not None
    loss, c, out_of_fold = best
    accuracy = float(np.mean(out_of_fold.argmax(axis=1) == y))
    if baseline_accuracy is not None and accuracy < baseline_accuracy:
        return None, None
    temperature = fit_temperature(out_of_fold, y)
    final = _second_stage_pipeline(c).fit(features, y)
    spec = second_stage_artifact(
        final,
        SECOND_STAGE_FEATURES,
        temperature=temperature,
        meta={
            "c": c,
            "folds": n_splits,
            "n": len(y),
            "out_of_fold_log_loss": round(loss, 6),
            "out_of_fold_accuracy": round(accuracy, 6),
            "linear_accuracy": None if baseline_accuracy is None else round(baseline_accuracy, 6),
        },
    )
    return spec, softmax(out_of_fold / temperature, axis=1)


def _second_stage_pipeline(c: float) -> Pipeline:
    return Pipeline(
        [
            ("scaler", StandardScaler()),
            ("classifier", LogisticRegression(C=c, max_iter=5000, tol=1e-10)),
        ]
    )


def clause_split(sources: Sequence[str]) -> tuple[list[str], list[int], list[int]]:
    """Every text's clauses (flattened), the number of clauses and of tokens per text."""
    per_text = [split_clauses(text) for text in sources]
    flat = [clause for clauses in per_text for clause in clauses]
    return flat, [len(c) for c in per_text], [len(text.split()) for text in sources]


_ACTIONABLE_SECOND = CLAUSE_FEATURES.index("actionable_second")


def with_steering_features(
    clause_part: np.ndarray, prepared: Sequence[PreparedText]
) -> np.ndarray:
    """`SECOND_STAGE_FEATURES` rows: the clause features, then the kept steering score
    alone and times the second actionable route (a second request next to a clause that
    looks like steering is weaker evidence of two requests)."""
    kept = np.array([p.kept_steering for p in prepared])
    return np.column_stack([clause_part, kept, kept * clause_part[:, _ACTIONABLE_SECOND]])


def second_stage_features(
    scorer: LinearRouteScorer,
    prepared: Sequence[PreparedText],
    dense: np.ndarray | None = None,
) -> np.ndarray:
    """Second-stage features of prepared texts, in batch.

    Without dense features the whole texts and their clauses are scored in one pass;
    with them (e5) the clauses are scored by the TF-IDF part only.
    """
    stripped = [p.whole for p in prepared]
    clauses, clause_counts, token_counts = clause_split([p.clause_source for p in prepared])
    if dense is None:
        # Each text followed by its clauses: their n-grams are mostly the text's, so their
        # lookups find the tables' rows still in the CPU cache.
        is_whole = np.zeros(len(stripped) + len(clauses), dtype=bool)
        is_whole[np.cumsum([0, *clause_counts[:-1]]) + np.arange(len(stripped))] = True
        pieces = iter(clauses)
        grouped = [
            piece
            for text, count in zip(stripped, clause_counts, strict=True)
            for piece in (text, *islice(pieces, count))
        ]
        logits = scorer.logits_batch(grouped)
        whole, clause_logits = logits[is_whole], logits[~is_whole]
    else:
        whole = scorer.logits_batch(stripped, dense)
        clause_logits = scorer.sparse_logits(clauses)
    clause_part = clause_features_batch(
        whole, clause_logits, clause_counts, token_counts, [len(c.split()) for c in clauses]
    )
    return with_steering_features(clause_part, prepared)


class LocalRouteModel:
    """The embedded default backend: strip instructions, score the message and its clauses."""

    def __init__(self, artifact: dict, artifact_sha: str, path: Path | None = None) -> None:
        self._scorer = LinearRouteScorer(artifact)
        self._path = path
        steering = artifact.get("steering")
        self._steering = SteeringDetector(steering) if steering else None
        spec = artifact.get("second_stage")
        # None when training had too few rows to fit it: the linear model scores alone.
        self._second_stage = SecondStage(spec) if spec else None
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
        return _load_cached(path, key) if key else cls(*load_artifact(path), path)

    @property
    def name(self) -> str:
        return self._name

    def score(self, text: str) -> RouteScores:
        """One message on the fast path (no sparse-matrix set-up)."""
        return self._to_scores(self.probabilities(text))

    def probabilities(self, text: str) -> np.ndarray:
        prepared = prepare_texts([text], self._steering)
        if self._second_stage is None:
            return self._scorer.probabilities(prepared[0].whole)
        source = prepared[0].clause_source
        clauses = split_clauses(source)
        logits = self._scorer.sparse_logits([prepared[0].whole, *clauses])
        whole, clause_logits = logits[0], logits[1:]
        features = clause_features(
            whole, clause_logits, len(source.split()), [len(c.split()) for c in clauses]
        )
        return self._second_stage.probabilities(
            with_steering_features(features[None, :], prepared)
        )[0]

    def probabilities_batch(self, texts: Sequence[str], *, processes: int = 1) -> np.ndarray:
        """Probabilities of many messages, shape (n, routes).

        `processes > 1` splits a large batch (at least `PARALLEL_MIN_BATCH` texts) over a
        persistent pool of that many worker processes (spawned, not forked; each loads
        this artifact from its file once and checks its sha256). Results are identical
        to the in-process path; the first parallel call pays the workers' start-up.
        """
        if processes > 1 and len(texts) >= PARALLEL_MIN_BATCH and self._path is not None:
            return _parallel_probabilities(self, list(texts), processes)
        with collector_paused():
            prepared = prepare_texts(texts, self._steering)
            if self._second_stage is None:
                return self._scorer.probabilities_batch([p.whole for p in prepared])
            return self._second_stage.probabilities(second_stage_features(self._scorer, prepared))

    def score_batch(self, texts: Sequence[str], *, processes: int = 1) -> list[RouteScores]:
        return RouteScores.from_probability_rows(
            self._name, self.probabilities_batch(texts, processes=processes)
        )

    def _to_scores(self, probabilities: np.ndarray) -> RouteScores:
        probs = dict(zip(ROUTES, probabilities.tolist(), strict=True))
        return RouteScores.from_probabilities(self._name, probs)


@lru_cache(maxsize=4)
def _load_cached(path: Path, key: tuple[str, int, int]) -> LocalRouteModel:
    """`key` (path, mtime, size) makes a rewritten artifact a cache miss."""
    return LocalRouteModel(*load_artifact(path), path)


PARALLEL_MIN_BATCH = 2_000
_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(processes: int) -> ProcessPoolExecutor:
    with _pools_lock:
        pool = _pools.get(processes)
        if pool is None:
            context = multiprocessing.get_context("spawn")
            pool = _pools[processes] = ProcessPoolExecutor(processes, mp_context=context)
        return pool


def _parallel_probabilities(
    model: LocalRouteModel, texts: list[str], processes: int
) -> np.ndarray:
    assert model._path is not None
    bounds = np.linspace(0, len(texts), processes + 1).astype(int)
    futures = [
        _pool(processes).submit(
            _score_chunk, str(model._path), model.artifact_sha, texts[start:end]
        )
        for start, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return np.vstack([future.result() for future in futures])


def _score_chunk(path: str, artifact_sha: str, texts: list[str]) -> np.ndarray:
    """In a worker process: score with the artifact at `path`, refusing a changed file."""
    model = LocalRouteModel.load(Path(path))
    if model.artifact_sha != artifact_sha:
        raise ArtifactError(f"{path} changed since the batch started; score it again")
    return model.probabilities_batch(texts)

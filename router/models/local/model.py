"""The embedded decision model as it serves: prepare the text, score it and its clauses.

Around the linear model (`router.models.local.linear`): the learned steering detector
and instruction stripping before scoring; after it, every clause of the message is
scored too and the second stage (`SecondStage`) reads [whole-message logits + clause
features] (`router.models.local.clauses`) and the steering detector's kept score to give
the final probabilities. The clauses come from the text the detector cut more loosely
(`SteeringCut`), so a clause that looks like steering is not taken for a second request.
`router.models.local.train` fits all of it; nothing here imports scikit-learn, SciPy or
joblib.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import islice
from pathlib import Path

import numpy as np

from router.collector import collector_paused
from router.contracts import ROUTES, RouteScores
from router.errors import ArtifactError
from router.models.local.clauses import (
    CLAUSE_FEATURES,
    clause_features,
    clause_features_batch,
    split_clauses,
)
from router.models.local.linear import LinearRouteScorer, SecondStage, load_artifact
from router.models.local.pool import map_chunks
from router.models.local.steering import SteeringCut, SteeringDetector, uncut
from router.models.local.text.entities import normalise_entities
from router.models.local.text.instructions import strip_instructions
from router.models.message_body import strip_email_quoting

MODEL_NAME_PREFIX = "local-tfidf-lr"
# Smaller batches are scored in-process: the pool's pickling costs more than it saves.
PARALLEL_MIN_BATCH = 2_000


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
    """`prepare_text` after an e-mail's quoting is set aside (`strip_email_quoting`) and
    the learned steering detector has cut (when the model has one).

    Training reads its rows as they are (the few it would change are injection attempts
    quoting a fake classification), so the trained artifact stays the one its policy
    certified; scoring, evaluation and certification all pass through here.
    """
    texts = [strip_email_quoting(text) for text in texts]
    return prepare_cuts(uncut(texts) if steering is None else steering.cut_batch(texts))


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
        # Resolved: one artifact reached by two paths (a symlink, an experiment variant
        # naming the served model) is parsed once.
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size) if stat else None
        return _load_cached(path.resolve(), key) if key else cls(*load_artifact(path), path)

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
            chunk = partial(_score_chunk, str(self._path), self.artifact_sha)
            return map_chunks(chunk, texts, processes)
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


def _score_chunk(path: str, artifact_sha: str, texts: list[str]) -> np.ndarray:
    """In a worker process: score with the artifact at `path`, refusing a changed file."""
    model = LocalRouteModel.load(Path(path))
    if model.artifact_sha != artifact_sha:
        raise ArtifactError(f"{path} changed since the batch started; score it again")
    return model.probabilities_batch(texts)

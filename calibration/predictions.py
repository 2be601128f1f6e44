"""Prediction files, and the score cache that makes re-scoring free and resumable.

A prediction file has one JSON line per labelled request::

    {"id", "probabilities": {route: p}, "choice", "confidence", "model", "question_sha"}

`model` names the exact model (backend, version, artifact hash prefix) and
`question_sha` the exact question it answered: TypeSafe's hash of the route question,
or for the local model a constant derived from its artifact hash (it has no question;
its "question" is the artifact). Calibrators and thresholds are only valid for the pair.

The cache is an append-only JSONL file keyed by text hash + model + question hash, so
a paid backend is never asked twice for the same thing: an interrupted `score` run
keeps every batch it finished, and the next run asks only for what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from calibration.data import LabelledRow, iter_jsonl
from router.contracts import ROUTES, Backend, PolicyModel, Route, RouteScores
from router.errors import CalibrationError, InvalidInput
from router.models.base import DecisionModel
from router.settings import Settings
from router.storage.decision_log import text_sha

LOCAL_QUESTION_PREFIX = "local-route-model"


class PredictionRow(BaseModel):
    """One line of a prediction file."""

    id: str
    probabilities: dict[Route, float]
    choice: Route
    confidence: float
    model: str
    question_sha: str


@dataclass(frozen=True)
class ModelIdentity:
    """What a prediction, a calibrator and a policy are bound to."""

    backend: Backend
    name: str
    question_sha: str
    artifact_sha: str | None


@dataclass(frozen=True)
class Predictions:
    """A prediction file in columns: ids of shape (n,), probabilities of shape (n, 4)."""

    ids: np.ndarray
    probabilities: np.ndarray
    model: str
    question_sha: str

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class ScorePlan:
    """How much of a scoring run the cache already answers."""

    n_rows: int
    n_unique: int
    n_cached: int

    @property
    def n_calls(self) -> int:
        return self.n_unique - self.n_cached


LOCAL_BACKENDS = {
    "local": lambda settings: settings.local_model_path,
    "e5": lambda settings: settings.e5_model_path,
}


def local_question_sha(artifact_sha: str) -> str:
    """The local model's stand-in for a question hash: it changes exactly with the artifact."""
    return hashlib.sha256(f"{LOCAL_QUESTION_PREFIX}:{artifact_sha}".encode()).hexdigest()


def cache_key(text_hash: str, model: str, question_sha: str) -> str:
    """The cache key of one (text, model, question) triple."""
    return hashlib.sha256(f"{text_hash}\x1f{model}\x1f{question_sha}".encode()).hexdigest()


class ScoreCache:
    """Append-only JSONL cache of probabilities; `path=None` keeps it in memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, dict[str, float]] = {}
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                    self._entries[entry["key"]] = entry["probabilities"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line torn by an interrupted run; its batch is asked again

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> dict[str, float] | None:
        return self._entries.get(key)

    def put_many(self, entries: Iterable[dict[str, Any]]) -> None:
        """Store entries `{key, model, question_sha, text_sha, probabilities}` durably."""
        entries = list(entries)
        for entry in entries:
            self._entries[entry["key"]] = entry["probabilities"]
        if self.path is None or not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(
            self.path
        )
        with self.path.open("a", encoding="utf-8") as handle:
            if torn:
                handle.write("\n")
            handle.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
            handle.flush()
            os.fsync(handle.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def plan_scoring(texts: Sequence[str], identity: ModelIdentity, cache: ScoreCache) -> ScorePlan:
    """Count the model calls a scoring run would make (what `score --dry-run` prints)."""
    keys = {cache_key(text_sha(t), identity.name, identity.question_sha) for t in texts}
    return ScorePlan(len(texts), len(keys), sum(key in cache for key in keys))


def score_rows(
    rows: Sequence[LabelledRow],
    model: DecisionModel,
    identity: ModelIdentity,
    cache: ScoreCache,
    *,
    batch_size: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> list[PredictionRow]:
    """Score labelled rows through the cache; only texts it has not seen reach the model.

    Parameters
    ----------
    rows : sequence of LabelledRow
        Requests to score (their `id` becomes the prediction's id).
    model : DecisionModel
        The backend; its `name` must be `identity.name`.
    identity : ModelIdentity
        Model and question the cache entries are keyed on.
    cache : ScoreCache
        Read first, written after every batch (so an interrupted run resumes).
    batch_size : int
        Texts per `score_batch` call.
    on_progress : callable, optional
        Called with the number of texts just scored.

    Returns
    -------
    list of PredictionRow
        One per input row, in input order.
    """
    if model.name != identity.name:
        raise CalibrationError(f"model {model.name!r} is not the expected {identity.name!r}")
    keys = [cache_key(text_sha(r.text), identity.name, identity.question_sha) for r in rows]
    missing: dict[str, str] = {}
    for key, row in zip(keys, rows, strict=True):
        if key not in cache and key not in missing:
            missing[key] = row.text
    pending = list(missing.items())
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        scores = model.score_batch([text for _, text in batch])
        cache.put_many(
            {
                "key": key,
                "model": identity.name,
                "question_sha": identity.question_sha,
                "text_sha": text_sha(text),
                "probabilities": dict(s.probabilities),
            }
            for (key, text), s in zip(batch, scores, strict=True)
        )
        if on_progress is not None:
            on_progress(len(batch))
    out = []
    for key, row in zip(keys, rows, strict=True):
        answer = RouteScores.from_probabilities(identity.name, cache.get(key) or {})
        out.append(PredictionRow(id=row.id, question_sha=identity.question_sha,
                                 **answer.model_dump()))
    return out


def write_predictions(rows: Iterable[PredictionRow], path: Path) -> int:
    """Write a prediction file atomically; return the number of rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(row.model_dump_json() + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_predictions(path: Path) -> Predictions:
    """Read a prediction file into columns, refusing a file that mixes models or questions.

    Files written by `eval --predictions-out` have no `question_sha`; it reads as "".

    Raises
    ------
    CalibrationError
        When rows come from more than one model or question, or an id repeats.
    InvalidInput
        When a row lacks a field or is not JSON.
    """
    ids: list[str] = []
    probabilities: list[list[float]] = []
    models: set[tuple[str, str]] = set()
    for number, obj in enumerate(iter_jsonl(path), start=1):
        try:
            ids.append(str(obj["id"]))
            probabilities.append([float(obj["probabilities"][r]) for r in ROUTES])
            models.add((str(obj["model"]), str(obj.get("question_sha") or "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"{path} row {number}: not a prediction row ({exc!r})",
                               code="bad_prediction_row") from exc
    if not ids:
        raise CalibrationError(f"{path} holds no predictions")
    if len(models) > 1:
        names = ", ".join(sorted(f"{m} (question {q[:8]})" for m, q in models))
        raise CalibrationError(f"{path} mixes predictions of several models: {names}")
    if len(set(ids)) != len(ids):
        raise CalibrationError(f"{path} repeats ids; one prediction per request")
    probs = np.asarray(probabilities, dtype=float)
    probs /= probs.sum(axis=1, keepdims=True)
    (model, question), = models
    return Predictions(np.asarray(ids, dtype=object), probs, model, question)


def join_labels(
    labels: Sequence[LabelledRow], predictions: Predictions
) -> tuple[list[LabelledRow], np.ndarray]:
    """Labelled rows and their predicted probabilities, shape (n, 4), matched by id.

    Raises
    ------
    CalibrationError
        When a labelled row has no prediction (score it first).
    """
    index = {row_id: i for i, row_id in enumerate(predictions.ids)}
    missing = [row.id for row in labels if row.id not in index]
    if missing:
        raise CalibrationError(
            f"{len(missing)} labelled rows have no prediction (first: {missing[0]!r}); "
            "run `support-router score` on the same labels"
        )
    rows = list(labels)
    return rows, predictions.probabilities[[index[row.id] for row in rows]]


def identify_backend(settings: Settings, backend: str, model: str | None = None) -> ModelIdentity:
    """The identity of a configured backend, without calling it (no network, no key).

    For `local` and `e5`, `model` is an artifact path (default: the configured model); for
    `typesafe`, a model name on the Jev-compatible server (default: the configured one).
    """
    if backend in LOCAL_BACKENDS:
        from router.models.e5.model import MODEL_NAME_PREFIX as E5_PREFIX
        from router.models.local.linear import load_artifact
        from router.models.local.model import MODEL_NAME_PREFIX as LOCAL_PREFIX

        path = Path(model) if model else LOCAL_BACKENDS[backend](settings)
        _, sha = load_artifact(path)
        kind: Backend = "local" if backend == "local" else "e5"
        prefix = LOCAL_PREFIX if kind == "local" else E5_PREFIX
        name = f"{prefix}@{sha[:12]}"
        return ModelIdentity(kind, name, local_question_sha(sha), sha)
    if backend == "typesafe":
        from router.models.typesafe import question_sha

        question = question_sha()
        name = f"typesafe:{model or settings.typesafe_model}@{question[:8]}"
        return ModelIdentity("typesafe", name, question, question)
    raise InvalidInput(f"backend {backend!r}; score supports local, e5 and typesafe",
                       code="unknown_backend")


def build_scorer(settings: Settings, backend: str, model: str | None = None) -> DecisionModel:
    """The backend itself, unguarded: a failing remote model stops the run (the cache keeps
    what was scored) rather than silently falling back to another model."""
    if backend == "local":
        from router.models.local.model import LocalRouteModel

        return LocalRouteModel.load(Path(model) if model else settings.local_model_path)
    if backend == "e5":
        from router.models.e5.model import E5RouteModel

        return E5RouteModel.load(Path(model) if model else settings.e5_model_path)
    if backend != "typesafe":
        raise InvalidInput(f"backend {backend!r}; score supports local, e5 and typesafe",
                           code="unknown_backend")
    from router.models.typesafe import build_typesafe_model

    chosen = settings.model_copy(update={"typesafe_model": model}) if model else settings
    return build_typesafe_model(chosen)


def backend_of(model_name: str) -> Backend:
    """The backend a prediction's model name belongs to (`local-…`, `typesafe:…`, `e5…`,
    `cascade:…`)."""
    if model_name.startswith("typesafe:"):
        return "typesafe"
    if model_name.startswith("cascade:"):
        return "cascade"
    # The e5 model's names start `local-tfidf-e5-lr@` (`router.models.e5.model`): tested
    # before the plain local prefix, which they share.
    if model_name.startswith(("e5", "local-tfidf-e5-")):
        return "e5"
    if model_name.startswith("local-"):
        return "local"
    raise CalibrationError(f"cannot tell the backend of model {model_name!r}")


def policy_model_for(predictions: Predictions, settings: Settings, model: str | None = None
                     ) -> PolicyModel:
    """The model a policy calibrated on these predictions must be bound to.

    For the local backend the configured artifact (or `model`, a path) must be the one
    that made the predictions: its full hash goes into the policy. For TypeSafe the
    question hash plays the artifact's part.

    Raises
    ------
    CalibrationError
        When the local predictions came from another artifact.
    """
    backend = backend_of(predictions.model)
    if backend == "cascade":
        raise CalibrationError("a cascade's thresholds are certified together, from its "
                               "stages' scores: `support-router certify-cascade`",
                               code="cascade_policy")
    if backend == "local":
        identity = identify_backend(settings, "local", model)
        question_differs = bool(predictions.question_sha) and (
            predictions.question_sha != identity.question_sha)
        if predictions.model != identity.name or question_differs:
            raise CalibrationError(
                f"predictions come from {predictions.model} but the local model is "
                f"{identity.name}; score again with this model, or pass its artifact as --model",
                code="model_mismatch",
            )
        return PolicyModel(backend="local", name=identity.name, artifact_sha=identity.artifact_sha)
    sha = predictions.question_sha or None if backend == "typesafe" else None
    return PolicyModel(backend=backend, name=predictions.model, artifact_sha=sha)

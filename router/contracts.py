"""The typed contracts shared by the router, the calibration tooling and the handlers.

Field names here are load-bearing: the decision log, prediction files and policy
artifacts are written with them, so rename nothing once other code depends on it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from router.collector import collector_paused

Route = Literal["refund", "account", "other", "unclear"]
ROUTES: tuple[Route, ...] = ("refund", "account", "other", "unclear")
ACTIONABLE_ROUTES: frozenset[Route] = frozenset({"refund", "account", "other"})

DecisionRoute = Literal["refund", "account", "other", "clarify"]
Backend = Literal["local", "e5", "typesafe", "cascade"]
"""`cascade`: stage models tried in order (`Policy.stages`, `router.routing.cascade`)."""
CalibratorKind = Literal["none", "temperature", "isotonic"]


def choice_confidence(p_max: float, n_options: int) -> float:
    """TypeSafe's choice confidence: 0 at a uniform answer, 1 at certainty.

    ``(p_max - 1/n) / (1 - 1/n)`` for n options, clipped to [0, 1]. Every backend reports
    confidence this way, so one threshold means the same thing whichever model produced
    the probabilities; `choice_confidence_rows` is the same formula over an array.
    """
    floor = 1.0 / n_options
    return max(0.0, min(1.0, (p_max - floor) / (1.0 - floor)))


def choice_confidence_rows(p_max: np.ndarray, n_options: int) -> np.ndarray:
    """`choice_confidence` of every element of `p_max` (the same numbers, vectorised)."""
    floor = 1.0 / n_options
    return np.clip((np.asarray(p_max, dtype=float) - floor) / (1.0 - floor), 0.0, 1.0)


class RouteScores(BaseModel):
    """One decision model's answer for one message (the meaning of a TypeSafe ChoiceAnswer)."""

    model_config = ConfigDict(frozen=True)

    model: str
    probabilities: dict[Route, float]
    choice: Route
    confidence: float = Field(ge=0.0, le=1.0)
    embedding: tuple[float, ...] | None = Field(default=None, exclude=True, repr=False)
    """The message's e5 embedding when an e5 model scored it (None otherwise): what the
    drift monitor projects (`Decision.projections`). Never serialised: the API, the
    prediction files and the decision log carry no embedding."""

    @model_validator(mode="after")
    def _check_distribution(self) -> RouteScores:
        if set(self.probabilities) != set(ROUTES):
            raise ValueError(f"probabilities must name exactly {ROUTES}")
        total = sum(self.probabilities.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"probabilities sum to {total}, not 1")
        return self

    @classmethod
    def from_probabilities(cls, model: str, probabilities: Mapping[str, float], *,
                           embedding: tuple[float, ...] | None = None) -> RouteScores:
        """Build scores from a distribution, deriving the choice and its confidence."""
        total = sum(probabilities[r] for r in ROUTES)
        probs: dict[Route, float] = {r: float(probabilities[r]) / total for r in ROUTES}
        choice = max(ROUTES, key=lambda r: probs[r])
        # Normalised here by construction, so skip re-validating on this hot path.
        return cls.model_construct(
            model=model,
            probabilities=probs,
            choice=choice,
            confidence=choice_confidence(probs[choice], len(ROUTES)),
            embedding=embedding,
        )

    @classmethod
    def from_probability_rows(cls, model: str, rows: np.ndarray,
                              embeddings: np.ndarray | None = None) -> list[RouteScores]:
        """`from_probabilities` of each row of an (n, len(ROUTES)) matrix, columns in
        `ROUTES` order: the same numbers, with the arithmetic done once for the batch
        (row by row, building scores would be a large share of a batch's time).
        `embeddings` (n, dim), when given, become each row's `embedding`."""
        rows = np.asarray(rows, dtype=float)
        vectors = ([None] * len(rows) if embeddings is None
                   else [tuple(e) for e in np.asarray(embeddings, dtype=float).tolist()])
        normalised = rows / rows.sum(axis=1, keepdims=True)
        best = normalised.argmax(axis=1)  # the first maximum, as `max` takes
        confidence = choice_confidence_rows(normalised[np.arange(len(rows)), best], len(ROUTES))
        with collector_paused():
            return [
                cls.model_construct(
                    model=model,
                    probabilities=dict(zip(ROUTES, row, strict=True)),
                    choice=ROUTES[choice],
                    confidence=conf,
                    embedding=vector,
                )
                for row, choice, conf, vector in zip(
                    normalised.tolist(), best.tolist(), confidence.tolist(), vectors,
                    strict=True,
                )
            ]


DecisionReason = str
"""`confident | below_threshold | unclear | rule:<name> | model_unavailable`."""


class Decision(BaseModel):
    """What the router decided for one request, as logged and returned by the API."""

    request_id: str
    route: DecisionRoute
    scores: RouteScores | None
    threshold: float
    policy_version: str
    variant: str | None = None
    experiment: str | None = None
    """The experiment `variant` belongs to (the one running when it was decided)."""
    reason: DecisionReason
    model: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    projections: list[float] | None = Field(default=None, exclude=True)
    """The message's e5 embedding projected on the policy's reference directions
    (`EmbeddingSummary`), for the drift monitor; None when no e5 model scored it or the
    policy has no embedding summary. Logged, never returned by the API."""


POLICY_VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""A version is a file name in the policy store and a label in logs and metrics: short,
and nothing a path or a log reader could misread."""

NEVER_ROUTE = 1.01
"""A per-route threshold above any confidence: that route always gets a clarifying
question (what `calibrate` writes for a route no threshold could be certified for)."""

Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def _route_threshold(value: float) -> float:
    if value != NEVER_ROUTE and not 0.0 <= value <= 1.0:
        raise ValueError(f"must be in [0, 1] (or {NEVER_ROUTE}, never route), not {value}")
    return value


RouteThreshold = Annotated[float, Field(allow_inf_nan=False), AfterValidator(_route_threshold)]


class PolicyModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Backend
    name: str = Field(min_length=1)
    artifact_sha: str | None = None


class _TemperatureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(gt=0.0, allow_inf_nan=False)


class _Knots(BaseModel):
    """One route's isotonic step function, as `numpy.interp` reads it."""

    model_config = ConfigDict(extra="forbid")

    x: list[float] = Field(min_length=1)
    y: list[Probability] = Field(min_length=1)

    @field_validator("x")
    @classmethod
    def _increasing(cls, x: list[float]) -> list[float]:
        if not all(math.isfinite(v) for v in x):
            raise ValueError("knots must be finite")
        if any(b <= a for a, b in zip(x, x[1:], strict=False)):
            raise ValueError("knots must be strictly increasing")
        return x

    @model_validator(mode="after")
    def _same_length(self) -> _Knots:
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} knots but y has {len(self.y)}")
        return self


_ISOTONIC_PARAMS: TypeAdapter[dict[Route, _Knots]] = TypeAdapter(dict[Route, _Knots])


def _validated_params(kind: str, params: Any) -> dict[str, Any]:
    """`params` checked against what `kind` needs, as plain JSON data."""
    if kind == "temperature":
        return _TemperatureParams.model_validate(params).model_dump()
    if kind == "isotonic":
        knots = _ISOTONIC_PARAMS.validate_python(params)
        missing = [r for r in ROUTES if r not in knots]
        if missing:
            raise ValueError(f"a step function for every route is needed; missing {missing}")
        return {r: k.model_dump() for r, k in knots.items()}
    if params:
        raise ValueError(f"takes no params, not {sorted(params)}")
    return {}


class Calibrator(BaseModel):
    """How raw probabilities are recalibrated before the threshold is applied.

    `none`: no params; `temperature`: params `{"temperature": T}`, T finite and > 0;
    `isotonic`: params `{"<route>": {"x": [...], "y": [...]}}` one-vs-rest step functions,
    one for every route, x strictly increasing, y in [0, 1], as many y as x. Applied by
    `router.routing.calibrators.apply_calibrator_array`, which reads exactly these.
    """

    model_config = ConfigDict(extra="forbid")

    kind: CalibratorKind = "none"
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("params")
    @classmethod
    def _fit_kind(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        kind = info.data.get("kind")
        if kind is None:  # the kind itself failed; that error is the one to report
            return params
        try:
            return _validated_params(kind, params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise ValueError(f"{kind} calibrator: {where}: {message}") from None
        except ValueError as exc:
            raise ValueError(f"{kind} calibrator: {exc}") from None


class Guarantee(BaseModel):
    alpha: Probability
    delta: Probability
    n_certify: int = Field(ge=0)
    misroutes: int = Field(ge=0)
    upper_bound: Probability
    method: str = "learn-then-test, fixed sequence, binomial tail"


class PolicyData(BaseModel):
    labels_sha: str | None = None
    n_fit: int = Field(default=0, ge=0)
    n_certify: int = Field(default=0, ge=0)
    n_test: int = Field(default=0, ge=0)


CONFIDENCE_EDGES: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Fixed bin edges of the confidence distribution (the last bin includes 1.0)."""

LENGTH_EDGES: tuple[int, ...] = (0, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""Fixed, log-spaced lower edges (characters) of the text-length bins; the last is open."""


EMBEDDING_COMPONENTS = 6
"""Principal directions an embedding summary keeps (fewer when there are fewer rows)."""
DIRECTION_DTYPE = "<f2"
"""A direction's entries are float16 values, stored in JSON as the base64 of their
little-endian bytes: 384 entries are 1 KB of text instead of about 6 KB as decimals,
and float16 keeps about 3 significant digits, far finer than any projection bin."""


def _encode_directions(directions: list[list[float]]) -> list[str]:
    return [base64.b64encode(np.asarray(d, dtype=DIRECTION_DTYPE).tobytes()).decode("ascii")
            for d in directions]


def _decode_directions(value: Any) -> Any:
    """A file's base64 rows as lists of floats; lists (built in Python) pass as they are."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [np.frombuffer(base64.b64decode(v, validate=True), dtype=DIRECTION_DTYPE)
                .astype(float).tolist() for v in value]
    return value


Directions = Annotated[list[list[float]], BeforeValidator(_decode_directions),
                       PlainSerializer(_encode_directions, when_used="json")]


class EmbeddingSummary(BaseModel):
    """Where the certification rows lie in e5 embedding space, to compare recent e5-scored
    messages with (`router.routing.embedding_drift`): the top principal directions of
    their embeddings and, per direction, the rows' projections counted in bins.

    The bin edges are the projections' quantiles on the certification rows (so every bin
    holds about as many of them); a recent window is counted in the same bins.
    """

    model_config = ConfigDict(extra="forbid")

    embedder: str = Field(min_length=1)
    """The weights the directions were computed in (`E5Identity.name`)."""
    n: int = Field(ge=1)
    directions: Directions = Field(min_length=1)
    """k unit vectors of the embedding width, largest variance first; float16 values
    (`DIRECTION_DTYPE`), base64 in JSON."""
    edges: list[list[float]]
    """Per direction, the inner bin edges (ascending): len(edges[i]) + 1 bins."""
    counts: list[list[int]]
    """Per direction, the rows per bin."""

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddingSummary:
        k = len(self.directions)
        if len({len(d) for d in self.directions}) != 1:
            raise ValueError("every direction has the embedding's width")
        matrix = np.asarray(self.directions, dtype=float)
        if not np.array_equal(matrix, matrix.astype(DIRECTION_DTYPE).astype(float)):
            # Else the file would hold other directions than the reference was counted on.
            raise ValueError("direction entries must be float16 values (DIRECTION_DTYPE)")
        if len(self.edges) != k or len(self.counts) != k:
            raise ValueError("one list of edges and one of counts per direction")
        for edges, counts in zip(self.edges, self.counts, strict=True):
            if any(b < a for a, b in zip(edges, edges[1:], strict=False)):
                raise ValueError("bin edges must not decrease")
            if len(counts) != len(edges) + 1:
                raise ValueError("one count per bin: len(edges) + 1")
            if any(c < 0 for c in counts) or sum(counts) != self.n:
                raise ValueError("embedding counts must be >= 0 and sum to n")
        return self


class DriftReference(BaseModel):
    """What the certification rows looked like, to compare recent traffic with
    (`router.routing.drift`): counts per fixed bin or category, never a text.

    Counts rather than shares, so a test can weigh how many rows each share rests on.
    Built from the model's decisions on the held-out rows a policy was certified on,
    with the same message features the decision log records
    (`router.storage.message_features`).
    """

    model_config = ConfigDict(extra="forbid")

    n: int = Field(ge=1)
    confidence_edges: list[float] = Field(default_factory=lambda: list(CONFIDENCE_EDGES))
    confidence: list[int]
    routed: int = Field(ge=0)
    """Decisions routed to a queue; the rest were clarifying questions."""
    length_edges: list[int] = Field(default_factory=lambda: list(LENGTH_EDGES))
    length: list[int]
    languages: dict[str, int]
    predicted: dict[str, int]
    """The model's choice (before the threshold), by route."""
    source: str = ""
    """Which rows the counts come from, in words."""
    language_guesser: str = ""
    """Which language guess counted `languages` (`router.storage.message_features`;
    empty: the word-list guess of earlier builds). Counts from another guesser than the
    window's are not compared."""
    embedding: EmbeddingSummary | None = None
    """For an e5 policy (or a cascade's e5 stage), the e5-scored rows' embedding summary;
    its `n` counts only those rows (a cascade's fast stage answers the others)."""

    @model_validator(mode="after")
    def _consistent(self) -> DriftReference:
        # Recent traffic is binned with the fixed edges; a reference binned otherwise
        # could not be compared with it.
        if (self.confidence_edges != list(CONFIDENCE_EDGES)
                or self.length_edges != list(LENGTH_EDGES)):
            raise ValueError(f"bin edges must be confidence {list(CONFIDENCE_EDGES)} and "
                             f"length {list(LENGTH_EDGES)}")
        if len(self.confidence) != len(self.confidence_edges) - 1:
            raise ValueError("one confidence count per bin between the edges")
        if len(self.length) != len(self.length_edges):
            raise ValueError("one length count per lower edge")
        if self.routed > self.n:
            raise ValueError("routed exceeds n")
        for name, counts in (("confidence", self.confidence), ("length", self.length),
                             ("languages", list(self.languages.values())),
                             ("predicted", list(self.predicted.values()))):
            if any(c < 0 for c in counts) or sum(counts) != self.n:
                raise ValueError(f"{name} counts must be >= 0 and sum to n")
        return self


class CascadeStage(BaseModel):
    """One stage of a cascade: its model, the calibrator fitted for that model, and the
    confidence at or above which its actionable choice routes (below it, or on an
    `unclear` choice, the next stage decides; after the last, the customer is asked)."""

    model_config = ConfigDict(extra="forbid")

    model: PolicyModel
    calibrator: Calibrator = Field(default_factory=Calibrator)
    threshold: RouteThreshold


class Policy(BaseModel):
    """The versioned policy artifact: model + calibrator + threshold, and how they were chosen.

    Validated completely here, whether it arrives through the API or from a file: a policy
    that passes cannot make `router.routing.policy.decide` fail or answer with numbers
    that are not probabilities (`router.routing.policy_check` then tries it on messages).
    """

    model_config = ConfigDict(extra="forbid")

    version: str = Field(pattern=POLICY_VERSION_PATTERN)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    model: PolicyModel
    calibrator: Calibrator = Field(default_factory=Calibrator)
    threshold: Probability
    per_route_thresholds: dict[Route, RouteThreshold] | None = None
    min_margin: Probability | None = None
    guarantee: Guarantee | None = None
    data: PolicyData = Field(default_factory=PolicyData)
    metrics_test: dict[str, Any] = Field(default_factory=dict)
    notes: str = ""
    reference: DriftReference | None = None
    """The certification rows' distributions, for the drift monitor (None: none recorded)."""
    stages: list[CascadeStage] | None = None
    """A cascade's stages, fast first (`model.backend` is then `cascade`); `threshold`
    is the last stage's, the guarantee is the cascade's as a whole."""

    @model_validator(mode="after")
    def _cascade_consistent(self) -> Policy:
        if (self.stages is not None) != (self.model.backend == "cascade"):
            raise ValueError("a cascade policy (model.backend cascade) needs stages, and "
                             "only a cascade policy has them")
        if self.stages is None:
            return self
        if len(self.stages) < 2:
            raise ValueError(f"a cascade needs at least two stages, not {len(self.stages)}")
        if any(s.model.backend == "cascade" for s in self.stages):
            raise ValueError("a cascade's stage cannot itself be a cascade")
        thresholds = [s.threshold for s in self.stages]
        # An earlier stage at least as strict as a later one: a row an earlier stage
        # routes would also route at the last threshold, so the answering stage's scores
        # read at `threshold` give the cascade's decision (prediction files, check,
        # compare).
        if any(b > a for a, b in zip(thresholds, thresholds[1:], strict=False)):
            raise ValueError(f"stage thresholds must not increase: {thresholds}")
        if thresholds[-1] != self.threshold:
            raise ValueError(f"threshold {self.threshold} is not the last stage's "
                             f"{thresholds[-1]}")
        if (self.calibrator.kind != "none" or self.per_route_thresholds
                or self.min_margin is not None):
            raise ValueError("a cascade's calibrators and thresholds are its stages'")
        return self


# -- online experiments (assignment and shadows: router.routing.experiments) ----------

BUCKETS = 10_000


def bucket_bounds(weights: list[float]) -> list[int]:
    """Upper bucket bound of each variant's range; the last is always 10000."""
    total = sum(weights)
    cumulative, bounds = 0.0, []
    for w in weights:
        cumulative += w
        bounds.append(round(BUCKETS * cumulative / total))
    bounds[-1] = BUCKETS
    return bounds


class VariantConfig(BaseModel):
    """One router in an experiment. `model`: a local artifact path, or a TypeSafe model
    name; `policy`: its policy artifact (default: the backend's configured policy)."""

    name: str = Field(min_length=1, max_length=64)
    backend: Literal["local", "e5", "typesafe"] = "local"
    model: str | None = None
    policy: Path | None = None
    weight: float = Field(default=1.0, ge=0.0)


class ExperimentConfig(BaseModel):
    """An experiment: live variants split by weight, shadows scored on every request."""

    name: str = Field(min_length=1, max_length=64)
    salt: str = ""
    variants: list[VariantConfig] = Field(min_length=1)
    shadows: list[VariantConfig] = Field(default_factory=list)
    planned_requests: int | None = Field(default=None, ge=1)
    """The pre-registered sample size (all live variants together): the fixed horizon."""
    shadow_queue_size: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        names = [v.name for v in [*self.variants, *self.shadows]]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        if sum(v.weight for v in self.variants) <= 0:
            raise ValueError("live variant weights sum to 0")
        return self

    def expected_shares(self) -> dict[str, float]:
        """Share of traffic each live variant should get (from the bucket ranges)."""
        bounds = bucket_bounds([v.weight for v in self.variants])
        return {v.name: (hi - lo) / BUCKETS
                for v, lo, hi in zip(self.variants, [0, *bounds[:-1]], bounds, strict=True)}

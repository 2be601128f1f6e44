"""Every Prometheus metric the gateway exports, defined once; the rest only imports and counts.

Why one module: metric names, label sets and buckets are an interface to dashboards and
alerts. Keeping them here means a label cannot grow by accident somewhere else (labels
are route templates, methods, status classes, routes, variants, reasons, backends and
model names — all small fixed sets; never a raw path, a case id or a customer).

Per-request cost matters (the gateway must serve ≥ 1,500 req/s on two cores), so the
labelled children used on the hot path are cached in plain dicts: `labels()` takes a
lock and builds a tuple on every call, a dict hit does not.

Multi-process mode: `support-router serve --workers N` runs N processes, each with its own
in-memory registry, so one scrape would see one worker. When `PROMETHEUS_MULTIPROC_DIR`
is set in the environment *before the process starts* (prometheus_client picks its value
store at import), every worker writes its samples to files in that directory and
`render()` merges them. The directory must exist and be emptied before the server starts
(`prepare_multiprocess_dir()`, called by `serve`). Without the variable (the default)
everything stays in the process's global registry.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, cast

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from router.contracts import EMBEDDING_COMPONENTS

if TYPE_CHECKING:
    from prometheus_client.metrics import MetricWrapperBase

    from router.contracts import Decision



BreakerState = Literal["closed", "half_open", "open"]
"""The states a breaker reports (`router.models.breaker.BreakerState`, which telemetry,
a layer below the models, cannot import)."""


class Breaker(Protocol):
    """What the breaker gauge reads (`router.models.breaker.CircuitBreaker` is one)."""

    on_state_change: Callable[[BreakerState], None] | None

    @property
    def state(self) -> BreakerState: ...


# `*_created` timestamps would double the series count and no dashboard of ours reads them.
disable_created_metrics()

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "unmatched"
"""The endpoint label of a request no route matched (404/405): never the raw path."""

HTTP_LATENCY = Histogram(
    "support_router_http_request_duration_seconds",
    "Time from the request reaching the gateway to the last byte of its response.",
    ["endpoint", "method", "status"],
    # The target is p99 ≤ 20 ms: resolution where it matters, and a tail for slow calls.
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
DECISIONS = Counter(
    "support_router_decisions",
    "Logged routing decisions; route=clarify are the clarifying questions.",
    ["route", "variant", "reason"],
)
MODEL_LATENCY = Histogram(
    "support_router_model_latency_seconds",
    "One decision-model call (score) by backend; outcome=error includes calls an open "
    "circuit breaker refused.",
    ["backend", "outcome"],
    # local ≈ 0.3 ms, e5 ≈ 20–35 ms, a remote model up to its timeout and retries.
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
             5.0, 10.0, 30.0),
)
BREAKER_STATE = Gauge(
    "support_router_breaker_state",
    "Circuit breaker in front of a remote decision model: 0 closed, 1 half-open, 2 open "
    "(with several workers: the highest state any worker reports).",
    ["model"],
    multiprocess_mode="max",
)
REFUNDS = Counter(
    "support_router_refunds",
    "Refund operations written by the refund service: held for a supervisor, issued "
    "(directly or after approval), or rejected by a supervisor. Replays are not counted.",
    ["outcome"],
)

RATE_LIMIT_STORE_ERRORS = Counter(
    "support_router_rate_limit_store_errors",
    "Rate-limit checks the shared store (Redis) could not answer; each fell back to the "
    "worker's own in-process bucket for that caller.",
)

SHADOW_ENQUEUED = Counter(
    "support_router_shadow_enqueued",
    "Requests appended to the shadow stream in Redis for the shadow workers to score.",
)

SHADOW_ENQUEUE_ERRORS = Counter(
    "support_router_shadow_enqueue_errors",
    "Requests whose shadow scoring was dropped because Redis did not take the stream "
    "entry (down, unreachable, slower than the timeout); the live response is unaffected.",
)

SHADOW_DROPPED = Counter(
    "support_router_shadow_dropped",
    "Requests whose shadow scoring was dropped because the in-process shadow queue (the "
    "mode without Redis) was full.",
)

# The drift monitor's last verdict (router/app/drift.py). Every worker that is scraped
# computes the same figures from the shared decision log, so with several workers the
# freshest computation is the one to show.
DRIFT_PSI = Gauge(
    "support_router_drift_psi",
    "Population stability index of one feature of the active policy's recent model "
    "decisions against its certification rows (0.1: moderate shift, 0.25: drift).",
    ["feature"],
    multiprocess_mode="mostrecent",
)
DRIFT_STATUS = Gauge(
    "support_router_drift_status",
    "Drift status per feature and overall (feature=\"overall\"): 0 ok, 1 warn, 2 drift, "
    "-1 not enough recent traffic, -2 the active policy carries no reference.",
    ["feature"],
    multiprocess_mode="mostrecent",
)
DRIFT_RECENT = Gauge(
    "support_router_drift_recent_decisions",
    "Model decisions of the active policy in the drift window (the rows compared).",
    multiprocess_mode="mostrecent",
)

# With several workers the lowest live value: 1 only once every worker serves the cascade.
CASCADE_JOINED = Gauge(
    "support_router_cascade_joined",
    "With backend=cascade: 1 once the cascade (local, then e5) serves, 0 while the local "
    "model serves alone (the e5 stage training, or the cascade not certified).",
    multiprocess_mode="livemin",
)

BREAKER_VALUES: dict[BreakerState, int] = {"closed": 0, "half_open": 1, "open": 2}

_Metric = TypeVar("_Metric", bound="MetricWrapperBase")
_children: dict[tuple[object, ...], MetricWrapperBase] = {}
_breakers: dict[str, weakref.WeakSet[Breaker]] = {}
_breakers_lock = threading.Lock()


def _child(metric: _Metric, *values: str) -> _Metric:
    """`metric.labels(*values)`, cached: a dict lookup on the hot path instead of a lock."""
    key = (metric, *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    # The key starts with `metric`, and `labels()` returns a child of the metric's own class.
    return cast(_Metric, child)


def status_class(status: int) -> str:
    return f"{status // 100}xx"


HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(endpoint: str, method: str, status: int, seconds: float) -> None:
    """One HTTP request; `endpoint` is the route template (or `UNMATCHED`).

    A method outside the standard set is counted as `other`: the client picks the method,
    and a label the client picks must not be able to create new series.
    """
    label = method if method in HTTP_METHODS else "other"
    _child(HTTP_LATENCY, endpoint, label, status_class(status)).observe(seconds)


def count_decision(decision: Decision) -> None:
    """One logged (live) decision; shadow and offline decisions are not counted."""
    _child(DECISIONS, decision.route, decision.variant or "none", decision.reason).inc()


@contextmanager
def time_model(backend: str) -> Iterator[None]:
    """Time one decision-model call; an exception is recorded as outcome=error, then raised."""
    start = perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        _child(MODEL_LATENCY, backend, outcome).observe(perf_counter() - start)


def count_refund(outcome: str) -> None:
    """A refund operation committed as held, issued or rejected."""
    _child(REFUNDS, outcome).inc()


def track_breaker(model: str, breaker: Breaker) -> None:
    """Export `breaker`'s state under `model`, now, on every change, and at each scrape.

    The scrape-time refresh matters: the breaker turns half-open by the clock alone
    (no call happens at that moment), so only reading `breaker.state` when scraped shows it.
    Breakers are held weakly: an app that is gone stops being reported.
    """
    with _breakers_lock:
        _breakers.setdefault(model, weakref.WeakSet()).add(breaker)
    gauge = _child(BREAKER_STATE, model)
    breaker.on_state_change = lambda state: gauge.set(BREAKER_VALUES[state])
    gauge.set(BREAKER_VALUES[breaker.state])


def export_drift(overall: int, features: dict[str, tuple[float, int]], n_recent: int) -> None:
    """Set the drift gauges: the overall status, and each feature's (PSI, status).

    A feature without figures (not enough traffic, no reference) keeps no PSI sample of
    an earlier verdict: its PSI reads NaN, so an alert on PSI cannot fire on stale data.
    """
    _child(DRIFT_STATUS, "overall").set(overall)
    DRIFT_RECENT.set(n_recent)
    for feature in DRIFT_FEATURES:
        value, status = features.get(feature, (float("nan"), overall))
        _child(DRIFT_PSI, feature).set(value)
        _child(DRIFT_STATUS, feature).set(status)


DRIFT_FEATURES = ("confidence", "routed", "length", "language", "predicted", "embedding",
                  *(f"embedding.{i + 1}" for i in range(EMBEDDING_COMPONENTS)))
"""`router.routing.drift.FEATURES` (a layer above telemetry), the embedding summary and
its directions: the feature label's values."""


def export_cascade_joined(joined: bool) -> None:
    CASCADE_JOINED.set(1 if joined else 0)


def refresh_breakers() -> None:
    """Set each tracked model's gauge from its breakers (the worst state when several)."""
    with _breakers_lock:
        tracked = {model: list(group) for model, group in _breakers.items()}
    for model, breakers in tracked.items():
        if breakers:
            worst = max(BREAKER_VALUES[b.state] for b in breakers)
            _child(BREAKER_STATE, model).set(worst)


def multiprocess_dir() -> Path | None:
    value = os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower())
    return Path(value) if value else None


def prepare_multiprocess_dir() -> Path | None:
    """Create and empty the multi-process directory before workers start (if configured).

    Files left by an earlier run would otherwise be added to this run's counters.
    """
    directory = multiprocess_dir()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    return directory


def render() -> tuple[bytes, str]:
    """The exposition text and its content type: this process, or every worker's files."""
    refresh_breakers()
    if multiprocess_dir() is None:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry), CONTENT_TYPE_LATEST

"""`support-router shadow-worker`: score the shadow stream's jobs into the decision log.

Any number of workers, on any hosts, share the work through one Redis consumer group;
each is one consumer named `host:pid`. A worker reads new entries (`XREADGROUP`, a batch at a time),
scores each job with its shadow variants (each configuration loaded once,
`load_variant`), writes the batch's results onto the live rows in one transaction
(`DecisionLog.set_shadows_once`) and only then acknowledges the entries (`XACK`).

The promise is **at least once, deduplicated by request id**: an entry is acknowledged
only after its result is committed (or found already there), so a worker that dies
between the two leaves it pending, and another worker claims it (`XAUTOCLAIM`) once it
has been idle for `shadow_claim_idle_s`. The write keeps the first result for a request
id and ignores later ones, so a second delivery changes nothing.

An entry whose live row is not in the database (yet) is left unacknowledged and comes
back after the idle time; after `shadow_max_deliveries` deliveries it is given up on.
A database or Redis error leaves the entry pending too, and the worker backs off; it
never exits because a dependency is down. SIGTERM finishes the job in hand, then stops
(`stop`); entries read but not started stay pending for the next claim.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from router.app.bootstrap import load_variant
from router.contracts import VariantConfig
from router.errors import SupportRouterError
from router.routing.service import BoundModel, score_shadows
from router.routing.shadows import ShadowJob, config_key
from router.settings import Settings
from router.storage.decision_log import DecisionLog
from router.storage.shadow_stream import Entry, ShadowStreamReader

logger = logging.getLogger(__name__)

BACKOFF_S = 1.0
"""How long a worker waits after Redis or the database failed before it tries again."""


def consumer_name() -> str:
    """`host:pid`: unique per live worker, and says where to look for one."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class VariantCache:
    """Loaded shadow variants by configuration; a configuration that cannot be loaded is
    remembered as its error code (the worker restarts to retry it)."""

    load: Callable[[VariantConfig], BoundModel]
    _loaded: dict[str, BoundModel | str] = field(default_factory=dict)

    def get(self, config: VariantConfig) -> BoundModel | str:
        key = config_key(config)
        if key not in self._loaded:
            try:
                self._loaded[key] = self.load(config)
            except (SupportRouterError, OSError, ValueError) as exc:
                code = exc.code if isinstance(exc, SupportRouterError) else "artifact_error"
                logger.warning("shadow variant %r could not be loaded (%s): its decisions "
                               "are recorded as that error", config.name, code)
                self._loaded[key] = code
        return self._loaded[key]


def score_job(job: ShadowJob, variants: VariantCache) -> dict[str, object]:
    """The `shadow` column for one job: every variant's decision (or error code)."""
    bound: dict[str, BoundModel] = {}
    errors: dict[str, dict[str, str]] = {}
    for config in job.shadows:
        loaded = variants.get(config)
        if isinstance(loaded, str):
            errors[config.name] = {"error": loaded}
        else:
            bound[config.name] = loaded
    result = score_shadows(bound, job.request, job.request_id)
    scored: dict[str, object] = result["variants"]
    # In the experiment's order, loaded or not (the first variant's choice is the summary).
    ordered = {c.name: scored.get(c.name, errors.get(c.name)) for c in job.shadows}
    first = ordered[job.shadows[0].name]
    choice = first.get("choice") if isinstance(first, dict) else None
    return {"choice": choice, "variants": ordered}


class ShadowConsumer:
    """One worker's loop over the consumer group (`run`), and one step of it (`step`)."""

    def __init__(self, reader: ShadowStreamReader, log: DecisionLog,
                 variants: VariantCache, *, consumer: str, claim_idle_s: float,
                 max_deliveries: int, batch: int = 16, block_ms: int = 1000) -> None:
        self.reader, self.log, self.variants = reader, log, variants
        self.consumer = consumer
        self.claim_idle_ms = max(1, int(claim_idle_s * 1000))
        self.max_deliveries = max_deliveries
        self.batch, self.block_ms = batch, block_ms
        self.stopping = threading.Event()
        self.counts: Counter[str] = Counter()
        self._next_claim = 0.0
        self._group_ready = False

    def stop(self) -> None:
        """Finish the job in hand, then return from `run` (safe from a signal handler)."""
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.step()
            except (RedisError, OSError, SQLAlchemyError) as exc:
                self._group_ready = False  # a restarted Redis may have lost the group
                # The type only: a Redis or database error's text can carry its URL.
                logger.warning("shadow worker: %s; retrying in %g s", type(exc).__name__,
                               BACKOFF_S)
                self.stopping.wait(BACKOFF_S)

    def step(self) -> int:
        """Claim idle entries (at most every half idle time), else read new ones; handle
        each. The number of entries handled."""
        if not self._group_ready:
            self.reader.ensure_group()
            self._group_ready = True
        entries: list[Entry] = []
        claimed = False
        if time.monotonic() >= self._next_claim:
            self._next_claim = time.monotonic() + self.claim_idle_ms / 2000
            entries = self.reader.claim_idle(self.consumer, min_idle_ms=self.claim_idle_ms,
                                             count=self.batch)
            claimed = bool(entries)
        if not entries:
            entries = self.reader.read(self.consumer, count=self.batch,
                                       block_ms=self.block_ms)
        outcomes = self.handle_batch(entries, redelivered=claimed)
        self.counts.update(outcomes.values())
        return len(outcomes)

    def handle(self, entry_id: str, fields: dict[str, str], *, redelivered: bool) -> str:
        """`handle_batch` for one entry."""
        return self.handle_batch([(entry_id, fields)], redelivered=redelivered)[entry_id]

    def handle_batch(self, entries: list[Entry], *, redelivered: bool) -> dict[str, str]:
        """Score entries, record their results in one transaction, acknowledge them in
        one call; per entry id, what happened (`scored`, `duplicate`, `invalid`,
        `not_visible`, `abandoned`). A stop request ends the scoring after the entry in
        hand: what was scored is recorded, the rest stays pending."""
        outcomes: dict[str, str] = {}
        done: list[str] = []
        results: dict[str, dict[str, object]] = {}
        jobs: dict[str, ShadowJob] = {}
        for entry_id, fields in entries:
            if self.stopping.is_set():
                break
            try:
                job = ShadowJob.from_fields(fields)
            except ValueError as exc:
                logger.warning("shadow worker: entry %s skipped: %s", entry_id, exc)
                outcomes[entry_id] = "invalid"
                done.append(entry_id)
                continue
            if redelivered:  # scored already, perhaps, by the consumer that lost it
                scored = self.log.has_shadow(job.request_id)
                if scored:
                    outcomes[entry_id] = "duplicate"
                    done.append(entry_id)
                    continue
                if scored is None:
                    outcomes[entry_id] = self._not_visible(entry_id)
                    continue
            jobs[entry_id] = job
            if job.request_id not in results:
                results[job.request_id] = score_job(job, self.variants)
        written = self.log.set_shadows_once(results) if results else {}
        recorded: set[str] = set()  # a request id twice in one batch is written once
        for entry_id, job in jobs.items():
            outcome = written[job.request_id]
            if outcome == "missing":
                outcomes[entry_id] = self._not_visible(entry_id)
            else:
                first = outcome == "written" and job.request_id not in recorded
                outcomes[entry_id] = "scored" if first else "duplicate"
                recorded.add(job.request_id)
                done.append(entry_id)
        self.reader.ack(*done)
        return outcomes

    def _not_visible(self, entry_id: str) -> str:
        """No live row for the job: leave it pending (claimed again after the idle time)
        unless it has been delivered too often already."""
        if self.reader.deliveries(entry_id) < self.max_deliveries:
            return "not_visible"
        logger.warning("shadow worker: entry %s given up after %d deliveries: its live "
                       "decision is not in the decision log", entry_id, self.max_deliveries)
        self.reader.ack(entry_id)
        return "abandoned"


def build_consumer(settings: Settings, *, batch: int = 16,
                   claim_idle_s: float | None = None) -> ShadowConsumer:
    """A consumer on the configured Redis and decision log (`SUPPORT_ROUTER_REDIS_URL`,
    `SUPPORT_ROUTER_DATABASE_URL`)."""
    from router.storage.db import make_engine

    if not settings.redis_url:
        raise SupportRouterError("shadow workers read the shadow stream in Redis: set "
                                 "SUPPORT_ROUTER_REDIS_URL (as for the gateway)",
                                 code="not_configured")
    reader = ShadowStreamReader(settings.redis_url, prefix=settings.redis_prefix)
    log = DecisionLog(make_engine(settings.resolved_database_url))
    return ShadowConsumer(
        reader, log, VariantCache(lambda config: load_variant(settings, config)),
        consumer=consumer_name(),
        claim_idle_s=settings.shadow_claim_idle_s if claim_idle_s is None else claim_idle_s,
        max_deliveries=settings.shadow_max_deliveries, batch=batch)

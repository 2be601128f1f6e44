"""The decision log: one row per routing decision, the raw material for labelling and A/B.

Rows are appended once, with the handler's outcome when a handler ran first (the
conversation use case logs after handling, so one write carries both); `set_outcome`
fills it in for callers that log before they handle.

Two ways to append, with the same durability (the call returns only after the row's
transaction has committed):

- `append_async` (the gateway's `/v1/route`, on the event loop) and `append` (the
  conversation use case behind `/v1/messages`, on the request's worker thread): the row
  goes to a `GroupCommitWriter`, one thread per log that writes the rows of concurrent
  requests in one transaction. Under load that is one BEGIN/COMMIT (and, on PostgreSQL,
  one round trip and WAL flush) for many requests, instead of one per request from a
  thread-pool hop each, with dozens of pool threads queueing on SQLite's write lock (whose
  busy handler sleeps up to 100 ms, straight into the tail latency). Nothing waits for a
  batch to fill: a lone request is written at once, so an idle gateway pays nothing for
  the batching. In-memory SQLite (tests, offline tools) has no writer: each row is one
  transaction on the calling thread.

`append(..., together_with=write)` commits other rows in the decision's transaction: the
conversation use case writes the case's turn that way, so a message costs one
transaction (shared with the concurrent messages of its batch) instead of one of its own
for the turn and another for the decision.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    update,
)

from router.contracts import Decision
from router.storage.db import migrate, read_connection
from router.storage.message_features import guess_language, text_chars
from router.storage.message_features import warm_up as warm_up_language_guess

metadata = MetaData()

decisions = Table(
    "decisions",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("case_id", String(64), index=True),
    Column("text", Text, nullable=False),
    Column("text_sha", String(64), nullable=False),
    Column("route", String(16), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("choice", String(16)),
    Column("confidence", Float),
    Column("probabilities", Text),
    Column("threshold", Float, nullable=False),
    Column("policy_version", String(128), nullable=False),
    Column("model", String(128), nullable=False),
    Column("experiment", String(64)),
    Column("variant", String(64)),
    Column("shadow", Text),
    Column("outcome", String(32)),
    # The message's form for the drift monitor, so it never needs to read `text`.
    Column("text_chars", Integer),
    Column("lang", String(8)),
    # An e5-scored message's projections on the policy's embedding directions (a JSON
    # list of k floats); NULL for every other decision.
    Column("projections", Text),
)


# One statement with bound parameters, so SQLAlchemy compiles it once, not per row.
_INSERT = insert(decisions)
MODEL_REASONS = ("confident", "below_threshold", "unclear")
"""The reasons of decisions the policy's threshold made from the model's scores."""
MAX_BATCH = 256
"""Rows per group commit at most: bounds one transaction's size (and lock hold time)."""

logger = logging.getLogger(__name__)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Pending:
    """One queued row and the event-loop future its request awaits."""

    row: Mapping[str, Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


CompanionWrite = Callable[[Connection], None]
"""Other rows that must commit with a decision's, written in its transaction (for the
conversation: the case's turn, so a message's writes are one transaction, not two)."""


@dataclass(frozen=True)
class _ThreadPending:
    """One queued row, what must commit with it, and the future a (non-event-loop)
    thread blocks on."""

    row: Mapping[str, Any]
    future: concurrent.futures.Future[None]
    together_with: CompanionWrite | None = None


ShadowWrite = Literal["written", "already", "missing"]
"""What `set_shadow_once` did: wrote it, found a result there already, found no row."""

_Settlement = tuple[asyncio.Future[None], BaseException | None]
"""A waiting request's future and the error its row's commit raised, if any."""


def _settle(results: list[_Settlement]) -> None:
    """Runs on the requests' event loop: wake every waiter of one commit."""
    for future, error in results:
        if future.done():  # the request was cancelled; its row is committed all the same
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class GroupCommitWriter:
    """A writer thread that commits the rows of concurrent requests together.

    Rows submitted during one turn of an event loop are handed to the thread as one
    batch at the start of the loop's next turn (no timer: nothing waits for a batch to
    fill), and the thread also takes every batch that queued up while it was committing.
    One wake-up and one transaction per batch, instead of per row, is what makes the
    write cheap under load: a batch's rows share the commit's fixed cost.

    Threads submit too (`submit_blocking`): a row is queued at once, and the rows that
    queue up while a commit is running go into the next one together.

    Each caller awaits its own row's commit, so a response is never sent for a decision
    that is not in the database. A batch that fails (say, a duplicate request id) is
    retried row by row, so one bad row fails only its own request. The thread starts on
    the first batch and stops in `close()`; a later row starts a new one (tests reuse
    one service object across several app lifespans).
    """

    def __init__(self, engine: Engine, *, max_batch: int = MAX_BATCH) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[list[_Pending | _ThreadPending] | None] | None = None
        self._thread: threading.Thread | None = None
        self._ticks: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}

    def submit_blocking(self, row: Mapping[str, Any], *,
                        together_with: CompanionWrite | None = None) -> None:
        """Queue a row from a thread that is not running an event loop, with the writes
        that must commit with it; return once they are committed (raise what their
        commit raised)."""
        pending = _ThreadPending(row, concurrent.futures.Future(), together_with)
        self._enqueue([pending])
        pending.future.result()

    def submit(self, row: Mapping[str, Any]) -> asyncio.Future[None]:
        """Queue a row; the returned future (of the running loop) resolves once committed.

        Must be called on the event loop (each loop's rows are collected separately).
        """
        loop = asyncio.get_running_loop()
        pending = _Pending(row, loop, loop.create_future())
        tick = self._ticks.get(loop)
        if tick is None:
            tick = self._ticks[loop] = []
            loop.call_soon(self._flush, loop)
        tick.append(pending)
        return pending.future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._ticks.pop(loop, None)
        if batch:
            self._enqueue(batch)

    def _enqueue(self, batch: Sequence[_Pending | _ThreadPending]) -> None:
        with self._lock:
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._run, args=(self._queue,), name="decision-log-writer",
                    daemon=True,
                )
                self._thread.start()
            self._queue.put(list(batch))

    def close(self, timeout_s: float = 30.0) -> None:
        """Commit what is queued, then stop the thread."""
        with self._lock:
            work, thread = self._queue, self._thread
            self._queue = self._thread = None
            if work is not None:
                work.put(None)
        if thread is not None:
            thread.join(timeout_s)

    def _run(self, work: queue.SimpleQueue[list[_Pending | _ThreadPending] | None]
             ) -> None:
        stopping = False
        while not stopping:
            first = work.get()
            if first is None:
                break
            batch: list[_Pending | _ThreadPending] = list(first)
            while len(batch) < self._max_batch:
                try:
                    more = work.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # nothing is queued after the stop marker
                    stopping = True
                    break
                batch.extend(more)
            for start in range(0, len(batch), self._max_batch):
                self._commit(batch[start : start + self._max_batch])

    def _commit(self, batch: list[_Pending | _ThreadPending]) -> None:
        outcomes: list[tuple[_Pending | _ThreadPending, BaseException | None]]
        try:
            self._insert(batch)
            outcomes = [(p, None) for p in batch]
        except Exception as exc:  # noqa: BLE001 - handed to the waiting requests
            if len(batch) == 1:
                outcomes = [(batch[0], exc)]
            else:
                outcomes = []
                for pending in batch:
                    try:
                        self._insert([pending])
                        outcomes.append((pending, None))
                    except Exception as row_exc:  # noqa: BLE001
                        outcomes.append((pending, row_exc))
        by_loop: dict[asyncio.AbstractEventLoop, list[_Settlement]] = {}
        for pending, error in outcomes:
            if isinstance(pending, _ThreadPending):
                if error is None:
                    pending.future.set_result(None)
                else:
                    pending.future.set_exception(error)
            else:
                by_loop.setdefault(pending.loop, []).append((pending.future, error))
        for loop, results in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, results)
            except RuntimeError:  # that loop has closed: nobody is waiting any more
                logger.debug("decision-log waiters' event loop is closed")

    def _insert(self, batch: Sequence[_Pending | _ThreadPending]) -> None:
        with self._engine.begin() as conn:
            _write(conn, [p.row for p in batch],
                   [p.together_with for p in batch if isinstance(p, _ThreadPending)])


def _write(conn: Connection, rows: list[Mapping[str, Any]],
           companions: Iterable[CompanionWrite | None]) -> None:
    """Decision rows and their companions' writes, in the caller's transaction.

    A companion that raises fails the whole batch, which is then retried row by row (as
    for a bad row). On PostgreSQL two hosts' batches that touch the same two cases in
    opposite orders can deadlock; the server aborts one, and its row-by-row retry
    commits.
    """
    for companion in companions:
        if companion is not None:
            companion(conn)
    conn.execute(_INSERT, rows)


def _in_memory(engine: Engine) -> bool:
    """SQLite `:memory:` is one database per connection, so no other thread may write it."""
    url = engine.url
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


class DecisionLog:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = None if _in_memory(engine) else GroupCommitWriter(engine)
        warm_up_language_guess()  # every row is guessed: load it now, not on a request

    def create_schema(self) -> None:
        """Bring the database to the current migration (all tables, not only this one)."""
        migrate(self._engine)

    @staticmethod
    def row(
        decision: Decision,
        *,
        text: str,
        case_id: str | None = None,
        experiment: str | None = None,
        outcome: str | None = None,
    ) -> dict[str, Any]:
        """The decisions-table row for one decision."""
        scores = decision.scores
        return {
            "request_id": decision.request_id,
            "created_at": decision.created_at,
            "case_id": case_id,
            "text": text,
            "text_sha": text_sha(text),
            "route": decision.route,
            "reason": decision.reason,
            "choice": scores.choice if scores else None,
            "confidence": scores.confidence if scores else None,
            "probabilities": json.dumps(scores.probabilities) if scores else None,
            "threshold": decision.threshold,
            "policy_version": decision.policy_version,
            "model": decision.model,
            "experiment": experiment,
            "variant": decision.variant,
            "outcome": outcome,
            "text_chars": text_chars(text),
            "lang": guess_language(text),
            "projections": (None if decision.projections is None
                            else json.dumps(decision.projections)),
        }

    def append(
        self,
        decision: Decision,
        *,
        text: str,
        case_id: str | None = None,
        experiment: str | None = None,
        outcome: str | None = None,
        together_with: CompanionWrite | None = None,
    ) -> None:
        """Write one decision, and `together_with`'s rows in the same transaction; return
        once it is committed (for threads, not the loop)."""
        row = self.row(decision, text=text, case_id=case_id, experiment=experiment,
                       outcome=outcome)
        if self._writer is not None:
            self._writer.submit_blocking(row, together_with=together_with)
            return
        with self._engine.begin() as conn:
            _write(conn, [row], [together_with])

    async def append_async(
        self,
        decision: Decision,
        *,
        text: str,
        case_id: str | None = None,
        experiment: str | None = None,
        outcome: str | None = None,
    ) -> None:
        """Write one decision through the group-commit writer; return once it is committed."""
        if self._writer is None:
            self.append(decision, text=text, case_id=case_id, experiment=experiment,
                        outcome=outcome)
            return
        await self._writer.submit(self.row(decision, text=text, case_id=case_id,
                                           experiment=experiment, outcome=outcome))

    def close(self) -> None:
        """Commit queued rows and stop the writer thread (it restarts on the next row)."""
        if self._writer is not None:
            self._writer.close()

    def set_outcome(self, request_id: str, outcome: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(decisions)
                .where(decisions.c.request_id == request_id)
                .values(outcome=outcome)
            )

    def set_shadow(self, request_id: str, shadow: dict[str, Any]) -> None:
        """Record the shadow variants' decisions next to the live one (JSON)."""
        with self._engine.begin() as conn:
            conn.execute(
                update(decisions)
                .where(decisions.c.request_id == request_id)
                .values(shadow=json.dumps(shadow))
            )

    def set_shadow_once(self, request_id: str, shadow: dict[str, Any]) -> ShadowWrite:
        """`set_shadows_once` for one request."""
        return self.set_shadows_once({request_id: shadow})[request_id]

    def set_shadows_once(self, shadows: Mapping[str, dict[str, Any]]
                         ) -> dict[str, ShadowWrite]:
        """Record each request's shadow decisions unless its row already has some, in one
        transaction: the shadow workers' write, idempotent under redelivery (the first
        result stays). `missing` for a request id with no row (not committed yet, or
        never): nothing is written for it."""
        out: dict[str, ShadowWrite] = {}
        with self._engine.begin() as conn:
            for request_id, shadow in shadows.items():
                written = conn.execute(
                    update(decisions)
                    .where(decisions.c.request_id == request_id,
                           decisions.c.shadow.is_(None))
                    .values(shadow=json.dumps(shadow))
                ).rowcount
                if written:
                    out[request_id] = "written"
            unknown = [request_id for request_id in shadows if request_id not in out]
            found = set() if not unknown else {
                row.request_id for row in conn.execute(
                    select(decisions.c.request_id)
                    .where(decisions.c.request_id.in_(unknown)))}
        for request_id in unknown:
            out[request_id] = "already" if request_id in found else "missing"
        return out

    def has_shadow(self, request_id: str) -> bool | None:
        """Whether the row has shadow decisions; None when there is no such row."""
        with read_connection(self._engine) as conn:
            row = conn.execute(select(decisions.c.shadow)
                               .where(decisions.c.request_id == request_id)).first()
        return None if row is None else row.shadow is not None

    def rows(self, *, since: datetime | None = None,
             experiment: str | None = None) -> list[dict[str, Any]]:
        query = select(decisions).order_by(decisions.c.created_at)
        if since is not None:
            query = query.where(decisions.c.created_at >= since)
        if experiment is not None:
            query = query.where(decisions.c.experiment == experiment)
        with read_connection(self._engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def rows_for(self, request_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The rows of these request ids (those that exist), by request id."""
        wanted = list(dict.fromkeys(request_ids))
        out: dict[str, dict[str, Any]] = {}
        with read_connection(self._engine) as conn:
            # Chunks keep each IN list far below the databases' bound-parameter limits.
            for start in range(0, len(wanted), 500):
                query = select(decisions).where(
                    decisions.c.request_id.in_(wanted[start : start + 500]))
                out.update((r.request_id, dict(r._mapping)) for r in conn.execute(query))
        return out
    def repeats_earlier(self, request_id: str) -> bool:
        """Whether an earlier decision has this request's text (the row is then a repeat,
        not the first of its text); False for an unknown request id."""
        c = decisions.c
        first = select(c.text_sha, c.created_at).where(c.request_id == request_id).subquery()
        query = select(c.request_id).where(c.text_sha == first.c.text_sha,
                                           c.created_at < first.c.created_at).limit(1)
        with read_connection(self._engine) as conn:
            return conn.execute(query).first() is not None

    def experiment_rows(self, experiment: str) -> list[dict[str, Any]]:
        """An experiment's rows, oldest first, with what its report reads: never the text."""
        c = decisions.c
        query = (select(c.request_id, c.created_at, c.route, c.reason, c.choice,
                        c.confidence, c.threshold, c.policy_version, c.model, c.experiment,
                        c.variant, c.shadow, c.outcome)
                 .where(c.experiment == experiment).order_by(c.created_at))
        with read_connection(self._engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def feature_rows(self, *, policy_version: str, since: datetime,
                     limit: int) -> list[dict[str, Any]]:
        """The newest `limit` model decisions of one policy version since `since`, with only
        what the drift monitor reads: never the text.

        Model decisions are the ones a policy's threshold made (`confident`,
        `below_threshold`, `unclear`): rule decisions and fallback answers are left out,
        as they are of the certification rows.
        """
        c = decisions.c
        query = (select(c.confidence, c.route, c.choice, c.text_chars, c.lang, c.projections)
                 .where(c.policy_version == policy_version, c.created_at >= since,
                        c.reason.in_(MODEL_REASONS), c.confidence.is_not(None),
                        c.text_chars.is_not(None))
                 .order_by(c.created_at.desc()).limit(limit))
        with read_connection(self._engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]


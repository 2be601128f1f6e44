"""Cases: the durable record of one customer conversation.

Tables: `cases` (status, the open flow, who the customer is, what the flow gathered so
far), `case_messages` (the customer's messages with the router's decision, and the
desk's replies) and `case_actions` (each service call and its observation). Nothing
waits in memory: a case awaiting a customer answer or a supervisor survives a restart,
and the next message on the case reads what it needs from here.

Statuses: `resolved | awaiting_customer | awaiting_approval | handed_off`. A case's
`flow` is the route (`refund`/`account`) whose question the customer is expected to
answer; the gateway passes it to the router's code rules, so the answer continues that
flow. `context` holds the facts the flow gathered (account, order, partial address).

A case's customer never changes once set: the first turn that names one binds the case
to it (`customer_id`), and every later write keeps it, whatever a later turn says, in the
SQL itself (`coalesce`), so two racing writers cannot rebind a case either.
`customer_verified_by` says how that customer was proven: `channel` (the calling system
authenticated them), `code` (a one-time code, `handlers.services.verification`) or
NULL (only claimed in the customer's own text: no writes until verified).

`lang` is the guessed language of the customer message that handed the case to a person
(the same guess the decision log keeps, router/storage/message_features.py), so the
human queue can be filtered by language in SQL, a page at a time; for a case in the
queue that is its newest customer message.

Conditional turns (`record_if_status`) update the case only while it is in a given
status and check the row count, so of several callers racing to move a case out of that
status exactly one wins (the human queue's replies).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy import case as sql_case

from handlers.observation import Observation
from router.storage.db import read_connection
from router.storage.message_features import guess_language

CaseStatus = Literal["resolved", "awaiting_customer", "awaiting_approval", "handed_off"]
CASE_STATUSES: tuple[str, ...] = ("resolved", "awaiting_customer", "awaiting_approval",
                                  "handed_off")

metadata = MetaData()

cases = Table(
    "cases",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("flow", String(16)),
    Column("customer_id", String(16)),
    Column("context", Text, nullable=False, default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("customer_verified_by", String(16)),  # channel | code | NULL: claimed only
    # The guessed language of the message that handed the case to a person (router/
    # storage/message_features.py): the human queue's language filter.
    Column("lang", String(8)),
    # The human queue pages through one status in this order.
    Index("ix_cases_status_updated_at", "status", "updated_at", "id"),
)

case_messages = Table(
    "case_messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("case_id", String(64), ForeignKey("cases.id"), nullable=False, index=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("role", String(16), nullable=False),  # customer | desk | agent
    Column("text", Text, nullable=False),
    Column("request_id", String(64)),
    Column("decision", Text),  # the router's decision as JSON, on customer messages
    Column("status", String(32)),  # the case status after a desk reply
)

case_actions = Table(
    "case_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("case_id", String(64), ForeignKey("cases.id"), nullable=False, index=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("request_id", String(64)),
    Column("name", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("code", String(64), nullable=False),
    Column("observation", Text, nullable=False),
)


@dataclass(frozen=True)
class Action:
    """One service call made while handling a message, with what it returned."""

    name: str
    observation: Observation

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.observation.model_dump()}


@dataclass(frozen=True)
class CaseRow:
    id: str
    status: str
    flow: str | None
    customer_id: str | None
    context: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    customer_verified_by: str | None = None
    """`channel` or `code` when the case's customer is proven; None when only claimed."""
    lang: str | None = None
    """The guessed language of the message that last handed the case to a person."""

    @property
    def customer_verified(self) -> bool:
        return self.customer_id is not None and self.customer_verified_by is not None


@dataclass(frozen=True)
class Turn:
    """Everything one handled message writes to its case, in one transaction."""

    request_id: str | None
    customer_text: str | None
    decision: dict[str, Any] | None
    actions: Sequence[Action]
    reply: str
    status: CaseStatus
    flow: str | None
    customer_id: str | None
    context: dict[str, Any] = field(default_factory=dict)
    reply_role: str = "desk"
    """Who wrote `reply`: `desk` (templates) or `agent` (a person from the human queue)."""
    customer_verified_by: str | None = None
    """`channel` when the calling system authenticated `customer_id` on this turn."""
    opens_case: bool = False
    """The turn's case has just been given its id (`SupportDesk.prepare`), so its row is
    inserted without first looking for it."""


def _bind_customer(customer_id: str, verified_by: str | None) -> dict[str, Any]:
    """SET clauses that bind an unbound case to `customer_id` and never rebind a bound one;
    `verified_by` marks the customer proven only when it is the case's customer."""
    c = cases.c
    values: dict[str, Any] = {"customer_id": func.coalesce(c.customer_id, customer_id)}
    if verified_by is not None:
        same = or_(c.customer_id.is_(None), c.customer_id == customer_id)
        values["customer_verified_by"] = sql_case(
            (same, func.coalesce(c.customer_verified_by, verified_by)),
            else_=c.customer_verified_by)
    return values


def new_case_id() -> str:
    return f"c-{uuid.uuid4().hex[:16]}"


_INSERT_CASE = insert(cases)
_CASE_EXISTS = select(cases.c.id).where(cases.c.id == bindparam("case_id"))
_INSERT_MESSAGE = insert(case_messages)
_INSERT_ACTION = insert(case_actions)


def _filtered(query: Any, status: str, *, updated_before: datetime | None,
              updated_after: datetime | None, lang: str | None) -> Any:
    """`query` restricted to cases in `status`, last updated in the window, in `lang`."""
    query = query.where(cases.c.status == status)
    if updated_before is not None:
        query = query.where(cases.c.updated_at <= updated_before)
    if updated_after is not None:
        query = query.where(cases.c.updated_at >= updated_after)
    if lang is not None:
        query = query.where(cases.c.lang == lang)
    return query


def _case(row: Any) -> CaseRow:
    m = row._mapping
    return CaseRow(id=m["id"], status=m["status"], flow=m["flow"],
                   customer_id=m["customer_id"], context=json.loads(m["context"] or "{}"),
                   created_at=m["created_at"], updated_at=m["updated_at"],
                   customer_verified_by=m["customer_verified_by"], lang=m["lang"])


class CaseBook:
    """Reads and writes cases, their messages and their actions."""

    def __init__(self, engine: Engine, *,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._engine = engine
        self._now = now


    def get(self, case_id: str) -> CaseRow | None:
        with read_connection(self._engine) as conn:
            row = conn.execute(select(cases).where(cases.c.id == case_id)).first()
        return _case(row) if row else None

    def now(self) -> datetime:
        """The book's clock (the one it stamps `updated_at` with)."""
        return self._now()

    def page(self, status: str, *, limit: int, after: tuple[datetime, str] | None = None,
             updated_before: datetime | None = None, updated_after: datetime | None = None,
             lang: str | None = None) -> list[CaseRow]:
        """Up to `limit` cases in one status, by (`updated_at`, `id`), after a key.

        Keyset paging: the next page starts after the last row's key, so a page costs the
        same however deep in the queue it is, and rows leaving the status meanwhile do
        not shift later pages.
        """
        c = cases.c
        query = _filtered(select(cases), status, updated_before=updated_before,
                          updated_after=updated_after, lang=lang)
        if after is not None:
            at, case_id = after
            query = query.where(or_(c.updated_at > at,
                                    and_(c.updated_at == at, c.id > case_id)))
        query = query.order_by(c.updated_at, c.id).limit(limit)
        with read_connection(self._engine) as conn:
            return [_case(row) for row in conn.execute(query)]

    def count(self, status: str, *, updated_before: datetime | None = None,
              updated_after: datetime | None = None, lang: str | None = None) -> int:
        query = _filtered(select(func.count()).select_from(cases), status,
                          updated_before=updated_before, updated_after=updated_after,
                          lang=lang)
        with read_connection(self._engine) as conn:
            return int(conn.execute(query).scalar_one())

    def last_messages(self, case_ids: Sequence[str], *, role: str) -> dict[str, str]:
        """The newest message from `role` on each of these cases, in one query."""
        if not case_ids:
            return {}
        m = case_messages.c
        newest = (select(func.max(m.id)).where(m.case_id.in_(case_ids), m.role == role)
                  .group_by(m.case_id))
        with read_connection(self._engine) as conn:
            rows = conn.execute(select(m.case_id, m.text).where(m.id.in_(newest)))
            return {case_id: text for case_id, text in rows}

    def last_actions(self, case_ids: Sequence[str], *, name: str) -> dict[str, dict[str, Any]]:
        """The newest `name` action's observation on each of these cases."""
        if not case_ids:
            return {}
        a = case_actions.c
        newest = (select(func.max(a.id)).where(a.case_id.in_(case_ids), a.name == name)
                  .group_by(a.case_id))
        with read_connection(self._engine) as conn:
            rows = conn.execute(select(a.case_id, a.observation).where(a.id.in_(newest)))
            return {case_id: json.loads(observation) for case_id, observation in rows}

    def record(self, case_id: str, turn: Turn) -> None:
        """Write one turn: the customer's message, the actions, the reply, the new status."""
        with self._engine.begin() as conn:
            self._write(conn, case_id, turn)

    def write_turn(self, conn: Connection, case_id: str, turn: Turn) -> None:
        """`record` in the caller's transaction (to commit the turn with other rows)."""
        self._write(conn, case_id, turn)

    def record_if_status(self, case_id: str, turn: Turn, *, status: str) -> bool:
        """Write `turn` only if the case is in `status` when the write happens; True if so.

        The status test is part of the UPDATE (`… WHERE id = :id AND status = :status`)
        and the row count decides: a second writer waits for the first one's row lock
        (PostgreSQL) or write lock (SQLite), then matches no row, and writes nothing.
        """
        with self._engine.begin() as conn:
            return self._write(conn, case_id, turn, expect_status=status)

    def record_once(self, case_id: str, turn: Turn, *, action: str, key: str,
                    value: str) -> bool:
        """Write `turn` unless the case already has an `action` whose observation says
        `artifacts[key] == value`; True when it was written.

        For turns that must reach the customer once however many callers race to write
        them (several supervisors, or gateway processes, deciding one held refund): the
        check and the write happen under the case row's lock (PostgreSQL `FOR UPDATE`;
        SQLite's `BEGIN IMMEDIATE` already serialises writers), so a second writer waits,
        then sees the first one's action. (A case that does not exist yet is created, as
        by `record`, without that guarantee: there is no row to lock.)
        """
        with self._engine.begin() as conn:
            conn.execute(select(cases.c.id).where(cases.c.id == case_id).with_for_update())
            recorded = conn.execute(
                select(case_actions.c.observation).where(
                    case_actions.c.case_id == case_id, case_actions.c.name == action))
            for (observation,) in recorded:
                if json.loads(observation).get("artifacts", {}).get(key) == value:
                    return False
            self._write(conn, case_id, turn)
        return True

    def _write(self, conn: Connection, case_id: str, turn: Turn, *,
               expect_status: str | None = None) -> bool:
        """The turn's rows, in the caller's transaction; False (nothing written) when
        `expect_status` is given and the case is not in it.

        Messages and actions go in one statement per table, built once (module constants)
        with their values as bound parameters: building `insert(...).values(...)` per row
        cost more CPU than the database work of the whole turn.
        """
        now = self._now()
        values: dict[str, Any] = {"status": turn.status, "flow": turn.flow,
                                  "context": json.dumps(turn.context, default=str),
                                  "updated_at": now}
        if turn.customer_text is not None and turn.status == "handed_off":
            # Only the queue reads it: other turns do not pay for the guess.
            values["lang"] = guess_language(turn.customer_text)
        exists = None if turn.opens_case else conn.execute(
            _CASE_EXISTS, {"case_id": case_id}).first()
        if exists is None:
            if expect_status is not None:
                return False
            verified = turn.customer_verified_by if turn.customer_id else None
            conn.execute(_INSERT_CASE, {"id": case_id, "created_at": now,
                                        "customer_id": turn.customer_id,
                                        "customer_verified_by": verified, "lang": None,
                                        **values})
        else:
            if turn.customer_id is not None:
                values.update(_bind_customer(turn.customer_id, turn.customer_verified_by))
            statement = update(cases).where(cases.c.id == case_id)
            if expect_status is not None:
                statement = statement.where(cases.c.status == expect_status)
            if conn.execute(statement.values(**values)).rowcount == 0:
                return False
        messages = []
        if turn.customer_text is not None:
            messages.append({
                "case_id": case_id, "created_at": now, "role": "customer",
                "text": turn.customer_text, "request_id": turn.request_id, "status": None,
                "decision": json.dumps(turn.decision, default=str) if turn.decision else None,
            })
        if turn.actions:
            conn.execute(_INSERT_ACTION, [
                {"case_id": case_id, "created_at": now, "request_id": turn.request_id,
                 "name": action.name, "status": action.observation.status,
                 "code": action.observation.code,
                 "observation": action.observation.model_dump_json()}
                for action in turn.actions])
        messages.append({"case_id": case_id, "created_at": now, "role": turn.reply_role,
                         "text": turn.reply, "request_id": turn.request_id,
                         "status": turn.status, "decision": None})
        conn.execute(_INSERT_MESSAGE, messages)
        return True

    def view(self, case_id: str) -> dict[str, Any] | None:
        """The case with its messages, the router's decisions and the actions taken."""
        case = self.get(case_id)
        if case is None:
            return None
        with read_connection(self._engine) as conn:
            messages = [dict(r._mapping) for r in conn.execute(
                select(case_messages).where(case_messages.c.case_id == case_id)
                .order_by(case_messages.c.id))]
            actions = [dict(r._mapping) for r in conn.execute(
                select(case_actions).where(case_actions.c.case_id == case_id)
                .order_by(case_actions.c.id))]
        decisions = [json.loads(m["decision"]) for m in messages if m["decision"]]
        return {
            "case_id": case.id,
            "status": case.status,
            "flow": case.flow,
            "customer_id": case.customer_id,
            "customer_verified_by": case.customer_verified_by,
            "created_at": case.created_at,
            "updated_at": case.updated_at,
            "messages": [
                {"role": m["role"], "text": m["text"], "created_at": m["created_at"],
                 "request_id": m["request_id"], "status": m["status"]}
                for m in messages
            ],
            "decisions": decisions,
            "actions": [
                {"name": a["name"], "request_id": a["request_id"],
                 "created_at": a["created_at"], **json.loads(a["observation"])}
                for a in actions
            ],
        }

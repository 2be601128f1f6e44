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
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    insert,
    select,
    update,
)

from handlers.observation import Observation

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


def new_case_id() -> str:
    return f"c-{uuid.uuid4().hex[:16]}"


_INSERT_CASE = insert(cases)
# The key `case_id` is not a column of `cases`, so it binds the WHERE; the other keys of
# the parameters become the SET clause.
_UPDATE_CASE = update(cases).where(cases.c.id == bindparam("case_id"))
_INSERT_MESSAGE = insert(case_messages)
_INSERT_ACTION = insert(case_actions)


def _case(row: Any) -> CaseRow:
    m = row._mapping
    return CaseRow(id=m["id"], status=m["status"], flow=m["flow"],
                   customer_id=m["customer_id"], context=json.loads(m["context"] or "{}"),
                   created_at=m["created_at"], updated_at=m["updated_at"])


class CaseBook:
    """Reads and writes cases, their messages and their actions."""

    def __init__(self, engine: Engine, *,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._engine = engine
        self._now = now


    def get(self, case_id: str) -> CaseRow | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(cases).where(cases.c.id == case_id)).first()
        return _case(row) if row else None

    def with_status(self, status: str) -> list[CaseRow]:
        """Cases in one status, oldest update first (the human queue reads `handed_off`)."""
        query = select(cases).where(cases.c.status == status).order_by(cases.c.updated_at)
        with self._engine.connect() as conn:
            return [_case(row) for row in conn.execute(query)]

    def record(self, case_id: str, turn: Turn) -> None:
        """Write one turn: the customer's message, the actions, the reply, the new status."""
        with self._engine.begin() as conn:
            self._write(conn, case_id, turn)

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

    def _write(self, conn: Connection, case_id: str, turn: Turn) -> None:
        """The turn's rows, in the caller's transaction: one statement per table.

        The statements are built once (module constants) and take their values as bound
        parameters: building `insert(...).values(...)` per call cost more CPU than the
        database work of the whole turn.
        """
        now = self._now()
        case_values = {"status": turn.status, "flow": turn.flow,
                       "customer_id": turn.customer_id,
                       "context": json.dumps(turn.context, default=str), "updated_at": now}
        if conn.execute(_UPDATE_CASE, {"case_id": case_id, **case_values}).rowcount == 0:
            conn.execute(_INSERT_CASE, {"id": case_id, "created_at": now, **case_values})
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

    def view(self, case_id: str) -> dict[str, Any] | None:
        """The case with its messages, the router's decisions and the actions taken."""
        case = self.get(case_id)
        if case is None:
            return None
        with self._engine.connect() as conn:
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

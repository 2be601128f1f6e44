"""Messages to customers outside the conversation: the notifier interface and its outbox.

The verification service sends one-time codes through a `Notifier`, so where a code goes
(a mail relay, an SMS gateway, a test reading it back) is a deployment's choice and
nothing in the handlers depends on it. The default, `OutboxNotifier`, appends each
message as a row of the `outbox` table in the gateway's database: every gateway process
writes to the same queue, a mail relay sends the rows whose `sent_at` is empty and marks
them, and tests and the task runner read the codes back from it.

The outbox holds the message as the customer will read it, code included, until it is
sent: it is a delivery queue, not a record. A relay should delete (or blank) a row once
it is delivered; the verification state itself keeps only a salted hash of each code.
Nothing here logs a message's body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from router.storage.db import read_connection

metadata = MetaData()

outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("channel", String(16), nullable=False),
    Column("recipient", String(254), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("body", Text, nullable=False),
    Column("case_id", String(64), index=True),
    Column("sent_at", DateTime(timezone=True)),
)


@dataclass(frozen=True)
class Notification:
    """One message to one customer, in the words they will read."""

    kind: str
    """What it is for, e.g. `verification_code`."""
    recipient: str
    """The address on file (never one typed into a conversation)."""
    subject: str
    body: str
    case_id: str | None = None
    channel: str = "email"


class NotificationFailed(Exception):
    """The notifier could not accept the message; nothing was sent."""


class Notifier(Protocol):
    """Where customer notifications go; `send` raises `NotificationFailed` on failure."""

    def send(self, notification: Notification) -> None: ...


class OutboxNotifier:
    """Appends notifications to the `outbox` table (see the module docstring)."""

    def __init__(self, engine: Engine, *,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._engine = engine
        self._now = now

    def send(self, notification: Notification) -> None:
        try:
            with self._engine.begin() as conn:
                conn.execute(insert(outbox).values(
                    created_at=self._now(), kind=notification.kind,
                    channel=notification.channel, recipient=notification.recipient,
                    subject=notification.subject, body=notification.body,
                    case_id=notification.case_id))
        except SQLAlchemyError as exc:
            raise NotificationFailed(f"the outbox refused the message: {type(exc).__name__}"
                                     ) from exc

    def messages(self, *, case_id: str | None = None,
                 recipient: str | None = None) -> list[dict[str, Any]]:
        """Queued messages, oldest first, optionally for one case or one recipient."""
        query = select(outbox).order_by(outbox.c.id)
        if case_id is not None:
            query = query.where(outbox.c.case_id == case_id)
        if recipient is not None:
            query = query.where(outbox.c.recipient == recipient)
        with read_connection(self._engine) as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

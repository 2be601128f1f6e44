"""The web console's sign-in sessions, in the shared database.

A person types an API key once (router/gateway/console/sessions.py); the console then
keeps a random session token in a cookie and this table keeps who it stands for. In the
database, not in one process's memory, so every worker and every host recognises the
session, and one sign-out ends it everywhere.

    console_sessions   one row per sign-in: the sha256 of the session token (never the
                       token), the key's name, its digest and roles at sign-in, the
                       session's CSRF token, when it was made, when it expires, when it
                       was revoked

A row found by its digest is valid while it is neither revoked nor expired; rows are
never updated except to revoke them. Expired rows are deleted by `purge_expired`, which
the sign-in calls, so the table holds about one day's sign-ins.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Index,
    MetaData,
    Row,
    String,
    Table,
    delete,
    insert,
    select,
    update,
)

from router.storage.db import read_connection

metadata = MetaData()

console_sessions = Table(
    "console_sessions", metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("key_name", String(64), nullable=False),
    Column("key_sha256", String(64), nullable=True),
    Column("roles", String(128), nullable=False),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Index("ix_console_sessions_expires_at", "expires_at"),
)

PURGE_AFTER = timedelta(days=1)
"""Expired rows are kept this long (for an audit of recent sign-ins), then deleted."""


class ConsoleSessionRow(BaseModel):
    """One stored session: who signed in, with which roles, until when."""

    model_config = ConfigDict(frozen=True)

    token_sha256: str
    key_name: str
    key_sha256: str | None
    """The digest of the key signed in with (None on rows older than the column)."""
    roles: tuple[str, ...]
    csrf_token: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


def token_digest(token: str) -> str:
    """The hex sha256 stored for a session token (the token is 256 random bits)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _aware(value: datetime, like: datetime) -> datetime:
    """SQLite returns naive datetimes for UTC values; compare them as UTC."""
    if value.tzinfo is None and like.tzinfo is not None:
        return value.replace(tzinfo=like.tzinfo)
    return value


def _row(row: Row[tuple[object, ...]], now: datetime) -> ConsoleSessionRow:
    data = dict(row._mapping)
    data["roles"] = tuple(str(data["roles"]).split(",")) if data["roles"] else ()
    for name in ("created_at", "expires_at", "revoked_at"):
        if data[name] is not None:
            data[name] = _aware(data[name], now)
    return ConsoleSessionRow.model_validate(data)


class ConsoleSessionStore:
    """Create, find and revoke sessions; one short transaction each."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, token: str, *, key_name: str, key_sha256: str, roles: tuple[str, ...],
               csrf_token: str, now: datetime, ttl_s: float) -> ConsoleSessionRow:
        """Store a new session for `token` (only its digest) and purge long-expired rows."""
        values = {
            "token_sha256": token_digest(token), "key_name": key_name,
            "key_sha256": key_sha256,
            "roles": ",".join(roles), "csrf_token": csrf_token, "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_s), "revoked_at": None,
        }
        with self.engine.begin() as conn:
            conn.execute(delete(console_sessions)
                         .where(console_sessions.c.expires_at < now - PURGE_AFTER))
            conn.execute(insert(console_sessions), values)
        return ConsoleSessionRow.model_validate(values | {"roles": roles})

    def find(self, token: str, *, now: datetime) -> ConsoleSessionRow | None:
        """The live session `token` stands for: None if unknown, expired or revoked."""
        with read_connection(self.engine) as conn:
            row = conn.execute(select(console_sessions).where(
                console_sessions.c.token_sha256 == token_digest(token))).one_or_none()
        if row is None:
            return None
        session = _row(row, now)
        if session.revoked_at is not None or session.expires_at <= now:
            return None
        return session

    def revoke(self, token: str, *, now: datetime) -> bool:
        """End the session `token` stands for; whether a live one was ended."""
        with self.engine.begin() as conn:
            result = conn.execute(
                update(console_sessions)
                .where(console_sessions.c.token_sha256 == token_digest(token),
                       console_sessions.c.revoked_at.is_(None))
                .values(revoked_at=now))
        return bool(result.rowcount)

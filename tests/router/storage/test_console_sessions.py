"""The console's sessions, on SQLite and PostgreSQL: only the token's digest is stored,
a session is live until it expires or is revoked, and old rows are purged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select

from router.storage.console_sessions import (
    PURGE_AFTER,
    ConsoleSessionStore,
    console_sessions,
    token_digest,
)

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
TTL_S = 3600.0


@pytest.fixture
def store(engine: Engine) -> ConsoleSessionStore:
    return ConsoleSessionStore(engine)


def _create(store: ConsoleSessionStore, token: str = "tok-1", *,
            now: datetime = AT) -> None:
    store.create(token, key_name="maria", key_sha256="d" * 64, roles=("supervisor", "admin"),
                 csrf_token="c-1", now=now, ttl_s=TTL_S)


def test_only_the_tokens_digest_is_stored(store: ConsoleSessionStore, engine: Engine) -> None:
    _create(store)
    with engine.connect() as conn:
        (row,) = conn.execute(select(console_sessions)).all()
    assert row.token_sha256 == token_digest("tok-1") != "tok-1"
    assert "tok-1" not in [str(value) for value in row]
    found = store.find("tok-1", now=AT)
    assert found is not None
    assert (found.key_name, found.key_sha256, found.roles, found.csrf_token) == (
        "maria", "d" * 64, ("supervisor", "admin"), "c-1")
    assert found.expires_at == AT + timedelta(seconds=TTL_S)


def test_a_session_lives_until_it_expires(store: ConsoleSessionStore) -> None:
    _create(store)
    assert store.find("tok-1", now=AT + timedelta(seconds=TTL_S - 1)) is not None
    assert store.find("tok-1", now=AT + timedelta(seconds=TTL_S)) is None
    assert store.find("tok-2", now=AT) is None


def test_revoking_ends_a_session_once(store: ConsoleSessionStore) -> None:
    _create(store)
    _create(store, "tok-2")
    assert store.revoke("tok-1", now=AT) is True
    assert store.revoke("tok-1", now=AT) is False
    assert store.find("tok-1", now=AT) is None
    assert store.find("tok-2", now=AT) is not None  # another sign-in is untouched


def test_a_sign_in_purges_rows_expired_for_a_day(store: ConsoleSessionStore,
                                                 engine: Engine) -> None:
    _create(store, "old")
    later = AT + timedelta(seconds=TTL_S) + PURGE_AFTER + timedelta(seconds=1)
    _create(store, "new", now=later)
    with engine.connect() as conn:
        digests = set(conn.execute(select(console_sessions.c.token_sha256)).scalars())
    assert digests == {token_digest("new")}

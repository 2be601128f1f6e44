"""Database engines: one SQLAlchemy Core engine per process, SQLite or PostgreSQL.

SQLite is made safe for several threads and processes writing one file: WAL journal,
a busy timeout, and `BEGIN IMMEDIATE` for every transaction so that a read-then-write
step cannot be overtaken between its read and its write (SQLite's default deferred
transactions would fail with "database is locked" or let two writers both read "no row").
`synchronous=NORMAL` is the usual WAL setting: a commit survives a crash of the process
(the WAL is written before the call returns) but not necessarily an OS crash or power
loss, which can drop the last transactions without corrupting the file. It avoids an
fsync per decision-log row, which otherwise dominates the cost of a request.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True)

    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine

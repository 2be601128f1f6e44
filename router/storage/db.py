"""Database engines: one SQLAlchemy Core engine per process, SQLite or PostgreSQL.

SQLite is made safe for several threads and processes writing one file: WAL journal,
a busy timeout, and `BEGIN IMMEDIATE` for every transaction that may write, so that a
read-then-write step cannot be overtaken between its read and its write (SQLite's default
deferred transactions would fail with "database is locked" or let two writers both read
"no row"). Reads that write nothing take a `read_connection`: a deferred transaction, i.e.
a WAL snapshot that takes no write lock, so they never queue behind writers.
`synchronous=NORMAL` is the usual WAL setting: a commit survives a crash of the process
(the WAL is written before the call returns) but not necessarily an OS crash or power
loss, which can drop the last transactions without corrupting the file. It avoids an
fsync per decision-log row, which otherwise dominates the cost of a request.

The schema is created and upgraded only by `migrate(engine)` (Alembic, scripts in
`router/storage/migrations/`, configured here in code: no `alembic.ini`). Several processes may
start at once on one database, so the upgrade runs in one transaction under a lock that
the others wait for: PostgreSQL's transaction-scoped advisory lock (per schema), SQLite's
write lock (`BEGIN IMMEDIATE`). PostgreSQL and SQLite both have transactional DDL, so
the migrations and the version stamp commit together; a waiting process then finds the
database at head and does nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, MetaData, create_engine, event
from sqlalchemy.engine import make_url

from router.storage.migrations import MIGRATIONS_DIR

logger = logging.getLogger(__name__)
# Alembic says "Context impl …" at INFO on every check, i.e. on every start of every CLI
# command; only warnings from it are news. An upgrade that ran is logged below, at
# DEBUG: CLI commands print JSON on stdout and their first run would migrate.
if logging.getLogger("alembic").level == logging.NOTSET:
    logging.getLogger("alembic").setLevel(logging.WARNING)

# Transaction-scoped, so it can never outlive the migrating transaction; one key per
# schema, so databases with several schemas (the tests) do not wait for each other.
_PG_MIGRATION_LOCK = (
    "SELECT pg_advisory_xact_lock("
    "hashtextextended('support-router:migrate:' || coalesce(current_schema(), ''), 0))"
)


SQLITE_BUSY_TIMEOUT_S = 30.0
_READ_ONLY = "support_router_read_only"


def read_connection(engine: Engine) -> Connection:
    """A connection for reads only (it must not write): on SQLite its transaction is a
    snapshot that takes no write lock; elsewhere it is an ordinary connection."""
    return engine.connect().execution_options(**{_READ_ONLY: True})


def make_engine(url: str) -> Engine:
    """An engine for `url`; never one that writes bound parameters into an error.

    `hide_parameters`: SQLAlchemy's errors otherwise carry the statement's parameters
    (a customer's message, name, address) into `str(error)`, and so into any log line
    or traceback that shows the error.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True, hide_parameters=True)

    connect_args: dict[str, Any] = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        connect_args["factory"] = _serialised_connection_class(
            Path(parsed.database).with_name(Path(parsed.database).name + ".writer-lock"))
    engine = create_engine(url, connect_args=connect_args, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        if connection.get_execution_options().get(_READ_ONLY):
            connection.exec_driver_sql("BEGIN")  # deferred: a snapshot, no write lock
            return
        dbapi_connection = connection.connection.dbapi_connection
        if isinstance(dbapi_connection, _SerialisedConnection):
            dbapi_connection.begin_immediate()
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (a setting the file keeps), waiting out other processes.

    SQLite answers "database is locked" at once, without its busy handler, when another
    connection is switching the file or holds a lock the switch needs; the gateway's
    workers all open a new file at the same moment, so one of them could fail to start.
    A file already in WAL needs no switch.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(2 * pause, 0.1)


class _SerialisedConnection(sqlite3.Connection):
    """A SQLite connection that holds its engine's in-process write lock from BEGIN
    IMMEDIATE until COMMIT, ROLLBACK or close.

    Why: every transaction takes SQLite's write lock, and a thread that finds it taken
    sleeps in SQLite's busy handler (1, 2, 5, … up to 100 ms between retries), so under
    load requests queued behind each other in sleeps, not in work. Threads of one process
    queue on a Python lock, processes on a `_ProcessLock`; both wake a waiter the moment
    the lock is released, so `BEGIN IMMEDIATE` finds the file free and SQLite's busy
    handler is left only for writers outside the gateway. The locks are released after
    the real COMMIT/ROLLBACK returns, and the pool's rollback on check-in releases them
    if a transaction was abandoned.
    """

    write_lock: threading.Lock  # one per engine: set on the subclass made for it
    process_lock: _ProcessLock  # likewise; the other processes' writers wait on it
    _holds_lock = False

    def begin_immediate(self) -> None:
        if not self.write_lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_S):
            raise sqlite3.OperationalError("database is locked (by this process's writers)")
        self._holds_lock = True
        try:
            self.process_lock.acquire()
            self.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._release()
            raise

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._release()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._release()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()

    def _release(self) -> None:
        if self._holds_lock:
            self._holds_lock = False
            self.process_lock.release()
            self.write_lock.release()


def _serialised_connection_class(lock_path: Path) -> type[_SerialisedConnection]:
    """A connection class with its own locks: one per engine (per database file)."""
    return type("SerialisedConnection", (_SerialisedConnection,),
                {"write_lock": threading.Lock(), "process_lock": _ProcessLock(lock_path)})


class _ProcessLock:
    """An exclusive `flock` on a file beside the database, shared by the writers of every
    process that opens it.

    Why: SQLite's own busy handler makes a writer that finds the file locked by another
    process sleep and retry (1, 2, 5, … up to 100 ms), so with two gateway workers most
    of a message's latency was spent asleep while the lock was free. A blocked `flock`
    is woken by the kernel the moment the holder releases it, and it is released by the
    kernel if the holder dies. The descriptor is opened per process: a descriptor
    inherited across `fork` would be the same lock in both processes, i.e. no lock.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._pid = 0

    def acquire(self) -> None:
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, built in code: the packaged scripts and our connection."""
    config = Config()
    # ConfigParser interpolates `%`; a path containing one must be escaped.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest migration shipped with this code."""
    head = _scripts().get_current_head()
    assert head is not None, "router/storage/migrations/versions has no migration"
    return head


def current_revision(engine: Engine) -> str | None:
    """The migration a database is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine) -> None:
    """Create or upgrade the schema to the newest migration; a no-op when it is there.

    Safe for several processes starting at once on one database (see the module
    docstring): the check and the upgrade happen under the migration lock, in one
    transaction.
    """
    with engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, i.e. the write lock
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(_PG_MIGRATION_LOCK)
        current = MigrationContext.configure(conn).get_current_revision()
        if current == head_revision():
            return
        command.upgrade(alembic_config(conn), "head")
    logger.debug("database schema migrated from %s to %s", current or "empty",
                head_revision())


def new_revision(engine: Engine, message: str, target_metadata: MetaData) -> None:
    """Write the next migration script from the difference between code and database.

    For developers: `engine` must be at head; review the generated file before use.
    """
    number = len(list(_scripts().walk_revisions())) + 1
    with engine.begin() as conn:
        config = alembic_config(conn)
        config.attributes["target_metadata"] = target_metadata
        command.revision(config, message=message, autogenerate=True,
                         rev_id=f"{number:04d}")
    _scripts.cache_clear()

"""Online experiments, started and stopped in the shared database; at most one running.

Every gateway process, on every host, runs the experiment this table marks `running`
(router/app/experiment_sync.py reads its id every `policy_poll_s`), so a start or a stop
made through any worker, or the CLI, reaches them all within the poll interval plus the
time a worker takes to load the variants.

    experiments   one row per start: the config JSON, who started and stopped it, when,
                  and its status (running | stopped); rows are never deleted

Start, stop and adoption are one transaction each under one lock (PostgreSQL: a
transaction-scoped advisory lock; SQLite: the write lock `BEGIN IMMEDIATE` takes), so two
starts at once on two hosts cannot both find nothing running. A name is the key of the
experiment's rows in the decision log (and of its assignment buckets): restarting a
stopped experiment with the same config is allowed, reusing its name for another config
is not (409 `experiment_name_taken`).

Every config read from here is validated by its contract (`ExperimentConfig`): a stored
one that fails raises `InvalidInput` (`invalid_experiment`) naming the field.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ValidationError
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    func,
    insert,
    select,
    update,
)

from router.contracts import ExperimentConfig
from router.errors import Conflict, InvalidInput, NotFound
from router.storage.db import read_connection
from router.storage.policy_store import describe_policy_errors

metadata = MetaData()

experiments = Table(
    "experiments", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False),
    Column("config", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("started_by", String(128), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("stopped_by", String(128), nullable=True),
    Column("stopped_at", DateTime(timezone=True), nullable=True),
    Index("ix_experiments_status", "status"),
    Index("ix_experiments_name", "name"),
)

RUNNING: Final = "running"
STOPPED: Final = "stopped"

# Transaction-scoped, so it cannot outlive a start; one key per schema.
_PG_LOCK = ("SELECT pg_advisory_xact_lock(hashtextextended("
            "'support-router:experiments:' || coalesce(current_schema(), ''), 0))")


class ExperimentRun(BaseModel):
    """One start of an experiment, as stored: its config and who started/stopped it."""

    id: int
    name: str
    status: Literal["running", "stopped"]
    config: ExperimentConfig
    started_by: str
    started_at: datetime
    stopped_by: str | None = None
    stopped_at: datetime | None = None


def parse_experiment(data: str | bytes) -> ExperimentConfig:
    """An experiment config from its JSON, validated by its contract.

    Raises
    ------
    InvalidInput
        `invalid_experiment`, naming the first field at fault.
    """
    try:
        return ExperimentConfig.model_validate_json(data)
    except ValidationError as exc:
        raise InvalidInput(f"not a valid experiment: {describe_policy_errors(exc)}",
                           code="invalid_experiment") from None


class ExperimentDB:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- reads ---------------------------------------------------------------------------

    def running_id(self) -> int | None:
        """The running experiment's row id: the indexed read every worker polls."""
        with read_connection(self.engine) as conn:
            return conn.execute(select(experiments.c.id)
                                .where(experiments.c.status == RUNNING)).scalar_one_or_none()

    def running(self) -> ExperimentRun | None:
        with read_connection(self.engine) as conn:
            return self._running(conn)

    def load(self, run_id: int) -> ExperimentRun:
        """One stored start, its config validated.

        Raises
        ------
        NotFound
            `unknown_experiment`: no such row.
        InvalidInput
            `invalid_experiment`: its stored config fails the contract.
        """
        with read_connection(self.engine) as conn:
            row = conn.execute(select(experiments)
                               .where(experiments.c.id == run_id)).one_or_none()
        if row is None:
            raise NotFound(f"no experiment run {run_id}", code="unknown_experiment")
        return _run(row)

    def latest(self, name: str | None = None) -> ExperimentRun | None:
        """The running experiment, else the last one started (of `name`, if given)."""
        query = select(experiments)
        if name is not None:
            query = query.where(experiments.c.name == name)
        with read_connection(self.engine) as conn:
            row = conn.execute(query.order_by((experiments.c.status == RUNNING).desc(),
                                              experiments.c.id.desc()).limit(1)).one_or_none()
        return None if row is None else _run(row)

    def history(self) -> list[ExperimentRun]:
        """Every start, oldest first."""
        with read_connection(self.engine) as conn:
            rows = conn.execute(select(experiments).order_by(experiments.c.id)).all()
        return [_run(row) for row in rows]

    # -- changes (one transaction each) ------------------------------------------------------

    def start(self, config: ExperimentConfig, *, by: str,
              now: datetime | None = None) -> ExperimentRun:
        """Mark `config` running, started by `by`.

        Raises
        ------
        Conflict
            `experiment_running` while one runs; `experiment_name_taken` when its name
            was used for another config. Nothing is written then.
        """
        with self.engine.begin() as conn:
            self._lock(conn)
            running = self._running(conn)
            if running is not None:
                raise Conflict(f"experiment {running.name!r} is running; stop it first",
                               code="experiment_running")
            self._refuse_rename(conn, config)
            return self._insert(conn, config, by, now)

    def adopt(self, config: ExperimentConfig, *, by: str,
              now: datetime | None = None) -> ExperimentRun | None:
        """Start `config` if no experiment was ever started here; the run, or None."""
        with self.engine.begin() as conn:
            self._lock(conn)
            if conn.execute(select(func.count()).select_from(experiments)).scalar_one():
                return None
            return self._insert(conn, config, by, now)

    def stop(self, name: str, *, by: str, now: datetime | None = None) -> ExperimentRun:
        """Stop the running experiment `name`, recording `by`.

        Raises
        ------
        NotFound
            `unknown_experiment`: never started.
        Conflict
            `experiment_not_running`: it is not the running one.
        """
        at = now or datetime.now(UTC)
        with self.engine.begin() as conn:
            self._lock(conn)
            running = self._running(conn)
            if running is None or running.name != name:
                known = conn.execute(select(func.count()).select_from(experiments)
                                     .where(experiments.c.name == name)).scalar_one()
                if not known:
                    raise NotFound(f"no experiment named {name!r} was ever started",
                                   code="unknown_experiment")
                raise Conflict(f"experiment {name!r} is not running", code="experiment_not_running")
            conn.execute(update(experiments).where(experiments.c.id == running.id)
                         .values(status=STOPPED, stopped_by=by, stopped_at=at))
            return running.model_copy(update={"status": STOPPED, "stopped_by": by,
                                              "stopped_at": at})

    # -- inside a transaction ------------------------------------------------------------

    def _lock(self, conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(_PG_LOCK)

    def _running(self, conn: Connection) -> ExperimentRun | None:
        row = conn.execute(select(experiments)
                           .where(experiments.c.status == RUNNING)).one_or_none()
        return None if row is None else _run(row)

    def _refuse_rename(self, conn: Connection, config: ExperimentConfig) -> None:
        used = conn.execute(select(experiments.c.config)
                            .where(experiments.c.name == config.name)).scalars().all()
        if any(parse_experiment(body) != config for body in used):
            raise Conflict(f"experiment name {config.name!r} was used for another config; its "
                           "decision-log rows and assignments are keyed by the name: choose "
                           "a new one", code="experiment_name_taken")

    def _insert(self, conn: Connection, config: ExperimentConfig, by: str,
                now: datetime | None) -> ExperimentRun:
        at = now or datetime.now(UTC)
        key = conn.execute(insert(experiments).values(
            name=config.name, config=config.model_dump_json(), status=RUNNING,
            started_by=by, started_at=at)).inserted_primary_key
        assert key is not None
        run_id = int(key[0])
        return ExperimentRun(id=run_id, name=config.name, status=RUNNING, config=config,
                             started_by=by, started_at=at)


def _run(row: Row[Any]) -> ExperimentRun:
    mapping = row._mapping
    try:
        config = parse_experiment(mapping["config"])
    except InvalidInput as exc:
        raise InvalidInput(f"stored experiment run {mapping['id']} is {exc.message}",
                           code="invalid_experiment") from None
    stopped_at = mapping["stopped_at"]
    return ExperimentRun.model_validate({
        **mapping, "config": config, "started_at": _aware(mapping["started_at"]),
        "stopped_at": _aware(stopped_at) if stopped_at is not None else None})


def _aware(at: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)

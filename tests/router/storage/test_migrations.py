"""The schema comes from migrations only, and is the same on SQLite and PostgreSQL.

A migrated database must equal the `Table` definitions the code queries (Alembic's
autogenerate comparison finds nothing to do), migrating again must change nothing, and
several processes starting on one empty database at once must all succeed with one
schema and one copy of the seed data — that is how a multi-worker gateway starts.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, func, insert, inspect, select

from handlers.services.cases import cases
from handlers.services.store import accounts
from router.app.schema import target_metadata
from router.storage.db import (
    alembic_config,
    current_revision,
    head_revision,
    make_engine,
    migrate,
)
from router.storage.decision_log import decisions
from router.storage.decision_log import metadata as decision_metadata
from tests.paths import REPO_ROOT

EXPECTED_TABLES = {
    "accounts", "addresses", "orders", "refunds", "preferences", "cases", "case_messages",
    "case_actions", "refund_operations", "decisions", "identity_challenges", "outbox",
    "policy_versions", "policy_active", "policy_history", "experiments", "console_sessions",
    "labels", "adjudications", "alembic_version",
}


def _schema_diff(engine: Engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), target_metadata())


def _shape(engine: Engine) -> dict[str, tuple]:
    """Tables with their columns, indexes and unique constraints, as reflected."""
    insp = inspect(engine)
    return {
        name: (
            tuple((c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(name)),
            tuple(sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                         for i in insp.get_indexes(name))),
            tuple(sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(name))),
        )
        for name in sorted(insp.get_table_names())
    }


def _decision_row(request_id: str) -> dict:
    return {"request_id": request_id, "created_at": datetime(2026, 3, 15, tzinfo=UTC),
            "text": "hi", "text_sha": "x", "route": "other", "reason": "confident",
            "threshold": 0.5, "policy_version": "p", "model": "m"}


def test_migrated_schema_equals_the_table_definitions(any_db_url: str) -> None:
    engine = make_engine(any_db_url)
    try:
        assert current_revision(engine) is None
        migrate(engine)
        assert current_revision(engine) == head_revision()
        assert set(inspect(engine).get_table_names()) == EXPECTED_TABLES
        assert _schema_diff(engine) == []
    finally:
        engine.dispose()


def test_migrating_again_changes_nothing(any_db_url: str) -> None:
    engine = make_engine(any_db_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(insert(decisions), _decision_row("kept"))
        shape = _shape(engine)
        migrate(engine)
        migrate(engine)
        assert _shape(engine) == shape
        assert current_revision(engine) == head_revision()
        with engine.connect() as conn:
            assert conn.execute(select(decisions.c.request_id)).scalars().all() == ["kept"]
    finally:
        engine.dispose()


def test_a_database_from_before_migrations_is_adopted(any_db_url: str) -> None:
    """Older CLI commands created only the decision log with `create_all`: keep its rows,
    add the missing tables, and end at head with the same schema as a fresh database."""
    engine = make_engine(any_db_url)
    try:
        decision_metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(insert(decisions), _decision_row("old"))
        migrate(engine)
        assert current_revision(engine) == head_revision()
        assert set(inspect(engine).get_table_names()) == EXPECTED_TABLES
        assert _schema_diff(engine) == []
        with engine.connect() as conn:
            assert conn.execute(select(decisions.c.request_id)).scalars().all() == ["old"]
    finally:
        engine.dispose()


def test_a_database_at_0001_keeps_its_cases_and_their_customers_count_as_claimed(
        any_db_url: str) -> None:
    """0002 adds `cases.customer_verified_by`: a case from before it has no proof of its
    customer, so a write on it waits for a code (or the calling system's `customer`)."""
    engine = make_engine(any_db_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0001")
        now = datetime(2026, 3, 15, tzinfo=UTC)
        with engine.begin() as conn:  # the columns 0001 has, nothing newer
            conn.execute(insert(cases).values(id="c-old", status="resolved", flow=None,
                                              customer_id="A-100", context="{}",
                                              created_at=now, updated_at=now))
        migrate(engine)
        assert current_revision(engine) == head_revision()
        assert _schema_diff(engine) == []
        with engine.connect() as conn:
            row = conn.execute(select(cases.c.customer_id, cases.c.customer_verified_by)).one()
        assert tuple(row) == ("A-100", None)
    finally:
        engine.dispose()


def test_a_decision_log_at_0009_gains_empty_projections(any_db_url: str) -> None:
    """0010 adds `decisions.projections`: rows logged before it have none (NULL), which
    the embedding drift features leave out; downgrading drops the column again."""
    engine = make_engine(any_db_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0009")
        assert "projections" not in {c["name"] for c in inspect(engine).get_columns("decisions")}
        with engine.begin() as conn:
            conn.execute(insert(decisions).values(_decision_row("before")))
        migrate(engine)
        assert current_revision(engine) == head_revision() == "0010"
        assert _schema_diff(engine) == []
        with engine.connect() as conn:
            row = conn.execute(select(decisions.c.request_id, decisions.c.projections)).one()
        assert tuple(row) == ("before", None)
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0009")
        assert "projections" not in {c["name"] for c in inspect(engine).get_columns("decisions")}
    finally:
        engine.dispose()


START_UP = """
import sys
from handlers.services.store import load_fixture, seed_store
from router.storage.db import make_engine, migrate
from router.packaged import data_path
from datetime import date

engine = make_engine(sys.argv[1])
sys.stdin.readline()  # wait until every process is up, then start together
migrate(engine)
seed_store(engine, load_fixture(data_path("store", "fixture.json")),
           today=date(2026, 3, 15))
print("ok")
"""


def test_processes_starting_together_on_an_empty_database(any_db_url: str) -> None:
    """Four real processes migrate and seed one empty database at the same moment."""
    procs = [subprocess.Popen([sys.executable, "-c", START_UP, any_db_url], cwd=REPO_ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in procs:  # imports done (they block on stdin): release them all at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, results, strict=True)] \
        == [(0, "ok")] * 4, [err[-2000:] for _, err in results]
    engine = make_engine(any_db_url)
    try:
        assert current_revision(engine) == head_revision()
        assert _schema_diff(engine) == []
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(accounts)).scalar_one() == 5
            assert conn.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
    finally:
        engine.dispose()

"""Alembic migrations for the gateway's one database schema (SQLite and PostgreSQL).

The scripts ship inside the package and run from code (`router.db.migrate`), so a
deployed wheel needs no `alembic.ini` and no working directory. `target_metadata()` is
the union of the SQLAlchemy Core tables the code uses (store, cases, refund operations,
decision log): `env.py` hands it to Alembic for autogenerate, and the tests compare the
migrated database against it, so a table changed in code without a migration fails a test.

A new migration: change the `Table` definitions, then in a Python shell

    from router.db import make_engine, new_revision
    new_revision(make_engine("sqlite:///var/dev.db"), "add orders.currency")

which writes `versions/NNNN_….py` from the difference (review it, and keep it portable:
it runs on both backends).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import MetaData

MIGRATIONS_DIR = Path(__file__).resolve().parent


def target_metadata() -> MetaData:
    """Every table the code defines, in one MetaData (each module keeps its own)."""
    from handlers import cases, refunds, store
    from router import decision_log

    combined = MetaData()
    for metadata in (store.metadata, cases.metadata, refunds.metadata, decision_log.metadata):
        for table in metadata.tables.values():
            table.to_metadata(combined)
    return combined

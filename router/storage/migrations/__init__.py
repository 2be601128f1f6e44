"""Alembic migrations for the gateway's one database schema (SQLite and PostgreSQL).

The scripts ship inside the package and run from code (`router.storage.db.migrate`), so a
deployed wheel needs no `alembic.ini` and no working directory. The scripts are frozen
copies of the tables: nothing here imports the code that queries them, so storage owns the
schema without knowing the handlers. The union of the code's `Table` definitions is
`router.app.schema.target_metadata()`; autogenerate compares against it, and so do the tests,
so a table changed in code without a migration fails a test.

A new migration: change the `Table` definitions, then in a Python shell

    from router.app.schema import target_metadata
    from router.storage.db import make_engine, new_revision
    new_revision(make_engine("sqlite:///var/dev.db"), "add orders.currency",
                 target_metadata())

which writes `versions/NNNN_….py` from the difference (review it, and keep it portable:
it runs on both backends).
"""

from __future__ import annotations

from pathlib import Path

MIGRATIONS_DIR = Path(__file__).resolve().parent

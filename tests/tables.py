"""Shared assertions helpers for tests that check "nothing was written"."""

from __future__ import annotations

from sqlalchemy import Engine, MetaData, func, select


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows in every table of the database: the store, the cases, the operations, the log."""
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        return {
            name: conn.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in meta.tables.items()
        }

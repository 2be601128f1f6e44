"""Alembic environment: runs on the connection `router.storage.db.migrate` opened and locked.

There is deliberately no URL handling here: the caller owns the connection and its
transaction (which holds the migration lock), so every migration and the version stamp
commit together or not at all.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run migrations through router.storage.db.migrate(engine) (or new_revision), which "
        "passes an open connection; there is no alembic.ini URL"
    )

context.configure(
    connection=connection,
    # Only autogenerate (`new_revision`) needs the code's tables; an upgrade runs scripts.
    target_metadata=context.config.attributes.get("target_metadata"),
    compare_type=True,
    # SQLite cannot ALTER most things in place; batch mode copies the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()

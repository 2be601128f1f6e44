"""The web console's sign-in sessions, and each case's language for the queue's filter.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Frozen copy of the definitions in router/storage/console_sessions.py:

- `console_sessions`: one row per console sign-in, keyed by the sha256 of the session
  token (never the token), with the key's name and roles, the session's CSRF token, when
  it was made, expires and was revoked;
- `cases.lang` (handlers/services/cases.py): the guessed language of the customer
  message that handed the case to a person; NULL on cases handed off before this
  revision (the queue's language filter does not find them).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("key_name", sa.String(length=64), nullable=False),
        sa.Column("roles", sa.String(length=128), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("token_sha256"),
    )
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"],
                    unique=False)
    op.add_column("cases", sa.Column("lang", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cases") as batch:
        batch.drop_column("lang")
    op.drop_index("ix_console_sessions_expires_at", table_name="console_sessions")
    op.drop_table("console_sessions")

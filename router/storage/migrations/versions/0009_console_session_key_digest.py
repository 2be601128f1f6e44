"""The key digest each console session was signed in with.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

Frozen copy of the new column of `console_sessions` in router/storage/console_sessions.py:
`key_sha256`, the sha256 of the API key typed at sign-in (the digest the key ring holds,
never the key). A session is honoured only while its key name still has that digest, so
rotating a key ends the sessions made with the old one. NULL on sessions made before
this revision, which are then no longer honoured: their people sign in once more.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("console_sessions",
                  sa.Column("key_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("console_sessions") as batch:
        batch.drop_column("key_sha256")

"""Who published or rolled back each policy version.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

Frozen copy of the new column of `policy_history` in router/storage/policy_db.py:
`changed_by`, the API key's name (or `cli:<user>`) of a publish or rollback. NULL for an
adoption, which no person makes, and on events recorded before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("policy_history",
                  sa.Column("changed_by", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("policy_history") as batch:
        batch.drop_column("changed_by")

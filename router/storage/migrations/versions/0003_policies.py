"""Policy versions, the active pointer and the history, shared by every gateway.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

Frozen copy of the definitions in router/storage/policy_db.py:

- `policy_versions`: every version ever published or adopted, its JSON never rewritten;
- `policy_active`: one row a slot (the primary backend's policy: `local`, `typesafe`)
  naming the active version; the row every worker polls;
- `policy_history`: adopt | publish | rollback events, replayed for rollback.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "policy_versions",
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("version"),
    )
    op.create_table(
        "policy_active",
        sa.Column("slot", sa.String(length=32), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["version"], ["policy_versions.version"]),
        sa.PrimaryKeyConstraint("slot"),
    )
    op.create_table(
        "policy_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("slot", sa.String(length=32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.Column("previous", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_policy_history_slot_id", "policy_history", ["slot", "id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_policy_history_slot_id", table_name="policy_history")
    op.drop_table("policy_history")
    op.drop_table("policy_active")
    op.drop_table("policy_versions")

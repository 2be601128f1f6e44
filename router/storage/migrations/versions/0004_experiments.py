"""Online experiments, started and stopped in the shared database.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Frozen copy of the definitions in router/storage/experiment_db.py:

- `experiments`: one row per start, with its config JSON, who started and stopped it and
  when, and its status (running | stopped); at most one running, which the start's
  transaction enforces under a lock (router/storage/experiment_db.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_by", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_by", sa.String(length=128), nullable=True),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_experiments_status", "experiments", ["status"], unique=False)
    op.create_index("ix_experiments_name", "experiments", ["name"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_experiments_name", table_name="experiments")
    op.drop_index("ix_experiments_status", table_name="experiments")
    op.drop_table("experiments")

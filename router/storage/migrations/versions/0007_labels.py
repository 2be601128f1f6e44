"""The data team's labels and adjudications.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Frozen copy of the definitions in router/storage/label_db.py:

- `labels`: one append-only row per labeller action (a route, `skip` or `undo`) on an
  item, i.e. a decision's request id, with the labeller's key name and the time.
- `adjudications`: one append-only row per resolution of an item (route, adjudicator,
  note, time); the latest row of an item is its resolution.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("item_id", sa.String(length=64), nullable=False),
        sa.Column("labeller", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_labels_item_id", "labels", ["item_id"], unique=False)
    op.create_index("ix_labels_labeller", "labels", ["labeller"], unique=False)
    op.create_table(
        "adjudications",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("item_id", sa.String(length=64), nullable=False),
        sa.Column("route", sa.String(length=16), nullable=False),
        sa.Column("adjudicator", sa.String(length=64), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_adjudications_item_id", "adjudications", ["item_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_adjudications_item_id", table_name="adjudications")
    op.drop_table("adjudications")
    op.drop_index("ix_labels_labeller", table_name="labels")
    op.drop_index("ix_labels_item_id", table_name="labels")
    op.drop_table("labels")

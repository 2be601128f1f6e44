"""An e5-scored decision's embedding projections, for the drift monitor.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

Frozen copy of the new column of `decisions` in router/storage/decision_log.py:
`projections`, a JSON list of the k projections of the message's e5 embedding on the
active policy's embedding directions (router/routing/embedding_drift.py). NULL for
decisions no e5 model scored and on rows logged before this revision; the embedding
drift features read only rows that have it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A decision log that `create_all` made from the current definitions (0001 adopts
    # such a table as it is) has the column already.
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("decisions")}
    if "projections" not in present:
        op.add_column("decisions", sa.Column("projections", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("projections")

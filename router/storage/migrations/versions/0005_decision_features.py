"""What the drift monitor reads of each decision instead of its text.

Revision ID: 0005
Revises: 0003
Create Date: 2026-12-02

Frozen copy of the new columns of `decisions` in router/storage/decision_log.py:
`text_chars` (the message's length in characters) and `lang` (the guess of
router/storage/message_features.py). Both are NULL on rows logged before this revision;
the drift monitor reads only rows that have them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A decision log that `create_all` made from the current definitions (0001 adopts
    # such a table as it is) has the columns already.
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("decisions")}
    if "text_chars" not in present:
        op.add_column("decisions", sa.Column("text_chars", sa.Integer(), nullable=True))
    if "lang" not in present:
        op.add_column("decisions", sa.Column("lang", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("lang")
        batch.drop_column("text_chars")

"""Identity verification: one-time codes, the notification outbox, proven case customers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-07

Frozen copy of the definitions in handlers/services/verification.py
(`identity_challenges`), handlers/services/notifier.py (`outbox`) and the new parts of
handlers/services/cases.py: `cases.customer_verified_by` (how the case's customer was
proven; NULL = only claimed, which is what every case written before this revision is)
and the index the human queue pages by.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("cases", sa.Column("customer_verified_by", sa.String(length=16),
                                     nullable=True))
    op.create_index("ix_cases_status_updated_at", "cases", ["status", "updated_at", "id"],
                    unique=False)

    op.create_table(
        "identity_challenges",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("case_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.String(length=16), nullable=False),
        sa.Column("code_hash", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("case_id", "seq", name="uq_identity_challenges_case_seq"),
    )
    op.create_index("ix_identity_challenges_account_id", "identity_challenges",
                    ["account_id"], unique=False)

    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("recipient", sa.String(length=254), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("case_id", sa.String(length=64), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_outbox_case_id", "outbox", ["case_id"], unique=False)


def downgrade() -> None:
    op.drop_table("outbox")
    op.drop_table("identity_challenges")
    op.drop_index("ix_cases_status_updated_at", table_name="cases")
    with op.batch_alter_table("cases") as batch:
        batch.drop_column("customer_verified_by")

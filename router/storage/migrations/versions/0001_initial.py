"""The initial schema: the shop's store, cases, refund operations and the decision log.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Frozen copy of the `Table` definitions as they were when migrations were introduced
(handlers/services/store.py, cases.py and refunds.py; router/storage/decision_log.py); a
later change to those definitions needs a new revision, not an edit here.

Databases created before migrations existed (by `metadata.create_all`, from these same
definitions) are adopted: a table that already exists is left as it is and the missing
ones are created, so such a database ends stamped at 0001 with nothing lost. A fresh
database gets exactly these tables and indexes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TABLES_IN_ORDER = (
    "accounts", "addresses", "orders", "refunds", "preferences",
    "cases", "case_messages", "case_actions",
    "refund_operations", "decisions",
)


def _missing(name: str) -> bool:
    return not sa.inspect(op.get_bind()).has_table(name)


def _index(table: str, *columns: str) -> None:
    op.create_index(f"ix_{table}_{'_'.join(columns)}", table, list(columns), unique=False)


def upgrade() -> None:
    # -- the store (handlers/services/store.py) --------------------------------------------------
    if _missing("accounts"):
        op.create_table(
            "accounts",
            sa.Column("id", sa.String(length=16), nullable=False),
            sa.Column("name", sa.String(length=200), nullable=False),
            sa.Column("email", sa.String(length=254), nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("email"),
        )
    if _missing("addresses"):
        op.create_table(
            "addresses",
            sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("account_id", sa.String(length=16), nullable=False),
            sa.Column("kind", sa.String(length=16), nullable=False),
            sa.Column("line1", sa.String(length=200), nullable=False),
            sa.Column("city", sa.String(length=100), nullable=False),
            sa.Column("postal_code", sa.String(length=20), nullable=False),
            sa.Column("country", sa.String(length=2), nullable=False),
            sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("account_id", "kind", name="uq_addresses_account_kind"),
        )
    if _missing("orders"):
        op.create_table(
            "orders",
            sa.Column("id", sa.String(length=16), nullable=False),
            sa.Column("account_id", sa.String(length=16), nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.Column("item", sa.String(length=200), nullable=False),
            sa.Column("total_cents", sa.Integer(), nullable=False),
            sa.Column("placed_on", sa.Date(), nullable=False),
            sa.Column("delivered_on", sa.Date(), nullable=True),
            sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
            sa.PrimaryKeyConstraint("id"),
        )
        _index("orders", "account_id")
    if _missing("refunds"):
        op.create_table(
            "refunds",
            sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
            sa.Column("order_id", sa.String(length=16), nullable=False),
            sa.Column("amount_cents", sa.Integer(), nullable=False),
            sa.Column("reason", sa.String(length=500), nullable=False),
            sa.Column("created_on", sa.Date(), nullable=False),
            sa.ForeignKeyConstraint(["order_id"], ["orders.id"]),
            sa.PrimaryKeyConstraint("id"),
        )
        _index("refunds", "order_id")
    if _missing("preferences"):
        op.create_table(
            "preferences",
            sa.Column("account_id", sa.String(length=16), nullable=False),
            sa.Column("key", sa.String(length=64), nullable=False),
            sa.Column("value", sa.String(length=64), nullable=False),
            sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
            sa.PrimaryKeyConstraint("account_id", "key"),
        )

    # -- cases (handlers/services/cases.py) ------------------------------------------------------
    if _missing("cases"):
        op.create_table(
            "cases",
            sa.Column("id", sa.String(length=64), nullable=False),
            sa.Column("status", sa.String(length=32), nullable=False),
            sa.Column("flow", sa.String(length=16), nullable=True),
            sa.Column("customer_id", sa.String(length=16), nullable=True),
            sa.Column("context", sa.Text(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
    if _missing("case_messages"):
        op.create_table(
            "case_messages",
            sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
            sa.Column("case_id", sa.String(length=64), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("role", sa.String(length=16), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("request_id", sa.String(length=64), nullable=True),
            sa.Column("decision", sa.Text(), nullable=True),
            sa.Column("status", sa.String(length=32), nullable=True),
            sa.ForeignKeyConstraint(["case_id"], ["cases.id"]),
            sa.PrimaryKeyConstraint("id"),
        )
        _index("case_messages", "case_id")
    if _missing("case_actions"):
        op.create_table(
            "case_actions",
            sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
            sa.Column("case_id", sa.String(length=64), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("request_id", sa.String(length=64), nullable=True),
            sa.Column("name", sa.String(length=64), nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.Column("code", sa.String(length=64), nullable=False),
            sa.Column("observation", sa.Text(), nullable=False),
            sa.ForeignKeyConstraint(["case_id"], ["cases.id"]),
            sa.PrimaryKeyConstraint("id"),
        )
        _index("case_actions", "case_id")

    # -- refund operations (handlers/services/refunds.py) ----------------------------------------
    if _missing("refund_operations"):
        op.create_table(
            "refund_operations",
            sa.Column("id", sa.String(length=40), nullable=False),
            sa.Column("key", sa.String(length=200), nullable=False),
            sa.Column("case_id", sa.String(length=64), nullable=False),
            sa.Column("order_id", sa.String(length=16), nullable=False),
            sa.Column("account_id", sa.String(length=16), nullable=False),
            sa.Column("amount_cents", sa.Integer(), nullable=False),
            sa.Column("reason", sa.String(length=500), nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.Column("requires_approval", sa.Boolean(), nullable=False),
            sa.Column("refund_id", sa.Integer(), nullable=True),
            sa.Column("decision", sa.String(length=16), nullable=True),
            sa.Column("decided_by", sa.String(length=64), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("key"),
        )
        _index("refund_operations", "case_id")
        _index("refund_operations", "status")

    # -- the decision log (router/storage/decision_log.py) --------------------------------------
    if _missing("decisions"):
        op.create_table(
            "decisions",
            sa.Column("request_id", sa.String(length=64), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("case_id", sa.String(length=64), nullable=True),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("text_sha", sa.String(length=64), nullable=False),
            sa.Column("route", sa.String(length=16), nullable=False),
            sa.Column("reason", sa.String(length=64), nullable=False),
            sa.Column("choice", sa.String(length=16), nullable=True),
            sa.Column("confidence", sa.Float(), nullable=True),
            sa.Column("probabilities", sa.Text(), nullable=True),
            sa.Column("threshold", sa.Float(), nullable=False),
            sa.Column("policy_version", sa.String(length=128), nullable=False),
            sa.Column("model", sa.String(length=128), nullable=False),
            sa.Column("experiment", sa.String(length=64), nullable=True),
            sa.Column("variant", sa.String(length=64), nullable=True),
            sa.Column("shadow", sa.Text(), nullable=True),
            sa.Column("outcome", sa.String(length=32), nullable=True),
            sa.PrimaryKeyConstraint("request_id"),
        )
        _index("decisions", "created_at")
        _index("decisions", "case_id")


def downgrade() -> None:
    for name in reversed(TABLES_IN_ORDER):
        op.drop_table(name)

"""The schema as the code queries it: every `Table` definition, in one `MetaData`.

Each owner keeps its own tables (the shop's store, cases, refund operations, identity
challenges and the outbox in `handlers.services`, the decision log, the policy versions,
the experiments and the console's sessions in `router.storage`); only the application
layer sees them all.
Alembic's autogenerate compares the database with this union (`router.storage.db.new_revision`),
and a test checks that a migrated database equals it.
"""

from __future__ import annotations

from sqlalchemy import MetaData

from handlers.services import cases, notifier, refunds, store, verification
from router.storage import console_sessions, decision_log, experiment_db, policy_db


def target_metadata() -> MetaData:
    """Every table the code defines, in one MetaData (each module keeps its own)."""
    combined = MetaData()
    for metadata in (store.metadata, cases.metadata, refunds.metadata, verification.metadata,
                     notifier.metadata, decision_log.metadata, policy_db.metadata,
                     experiment_db.metadata, console_sessions.metadata):
        for table in metadata.tables.values():
            table.to_metadata(combined)
    return combined

"""The decision log: one row per routing decision, the raw material for labelling and A/B.

Rows are appended once; only the handler outcome is filled in later.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Float,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    update,
)

from router.contracts import Decision

metadata = MetaData()

decisions = Table(
    "decisions",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("case_id", String(64), index=True),
    Column("text", Text, nullable=False),
    Column("text_sha", String(64), nullable=False),
    Column("route", String(16), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("choice", String(16)),
    Column("confidence", Float),
    Column("probabilities", Text),
    Column("threshold", Float, nullable=False),
    Column("policy_version", String(128), nullable=False),
    Column("model", String(128), nullable=False),
    Column("experiment", String(64)),
    Column("variant", String(64)),
    Column("shadow", Text),
    Column("outcome", String(32)),
)


# One statement with bound parameters, so SQLAlchemy compiles it once, not per row.
_INSERT = insert(decisions)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DecisionLog:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create_schema(self) -> None:
        metadata.create_all(self._engine)

    def append(
        self,
        decision: Decision,
        *,
        text: str,
        case_id: str | None = None,
        experiment: str | None = None,
    ) -> None:
        scores = decision.scores
        row = {
            "request_id": decision.request_id,
            "created_at": decision.created_at,
            "case_id": case_id,
            "text": text,
            "text_sha": text_sha(text),
            "route": decision.route,
            "reason": decision.reason,
            "choice": scores.choice if scores else None,
            "confidence": scores.confidence if scores else None,
            "probabilities": json.dumps(scores.probabilities) if scores else None,
            "threshold": decision.threshold,
            "policy_version": decision.policy_version,
            "model": decision.model,
            "experiment": experiment,
            "variant": decision.variant,
        }
        with self._engine.begin() as conn:
            conn.execute(_INSERT, row)

    def set_outcome(self, request_id: str, outcome: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(decisions)
                .where(decisions.c.request_id == request_id)
                .values(outcome=outcome)
            )

    def set_shadow(self, request_id: str, shadow: dict) -> None:
        """Record the shadow variants' decisions next to the live one (JSON)."""
        with self._engine.begin() as conn:
            conn.execute(
                update(decisions)
                .where(decisions.c.request_id == request_id)
                .values(shadow=json.dumps(shadow))
            )

    def rows(self, *, since: datetime | None = None,
             experiment: str | None = None) -> list[dict]:
        query = select(decisions).order_by(decisions.c.created_at)
        if since is not None:
            query = query.where(decisions.c.created_at >= since)
        if experiment is not None:
            query = query.where(decisions.c.experiment == experiment)
        with self._engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

"""The data team's labels and adjudications, in the shared database; rows are never changed.

    labels          one row per key press of a labeller: the item (the decision's request
                    id), the labeller's key name, what they did (a route, `skip`, or `undo`,
                    which withdraws that labeller's latest label or skip of the item), when
    adjudications   one row per resolution of an item: the route an adjudicator chose, who,
                    their note, when; the latest row of an item is its resolution

Append-only, like the terminal tool's JSONL (`calibration.label`): a relabel is a new row,
an undo is a new row, so the history of who said what stays readable and two labellers
writing at once never overwrite each other. Each append is one insert in its own
transaction; nothing here reads before it writes. The meaning of the rows (which label
counts, what the final label of an item is) is `router.app.labelling`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    insert,
    select,
)

from router.storage.db import read_connection

metadata = MetaData()

labels = Table(
    "labels", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", String(64), nullable=False),
    Column("labeller", String(64), nullable=False),
    Column("label", String(16), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Index("ix_labels_item_id", "item_id"),
    Index("ix_labels_labeller", "labeller"),
)

adjudications = Table(
    "adjudications", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", String(64), nullable=False),
    Column("route", String(16), nullable=False),
    Column("adjudicator", String(64), nullable=False),
    Column("note", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Index("ix_adjudications_item_id", "item_id"),
)

SKIP: Final = "skip"
UNDO: Final = "undo"


class LabelEvent(BaseModel):
    """One stored row of `labels`: `label` is a route, `skip` or `undo`."""

    id: int
    item_id: str
    labeller: str
    label: str
    at: datetime


class Adjudication(BaseModel):
    """One stored row of `adjudications`."""

    id: int
    item_id: str
    route: str
    adjudicator: str
    note: str
    at: datetime


class LabelDB:
    """Appends and reads the rows; validation is the caller's (`router.app.labelling`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def append(self, item_id: str, *, labeller: str, label: str,
               now: datetime | None = None) -> LabelEvent:
        """Store one labeller's action on one item (a route, `skip` or `undo`)."""
        at = now or datetime.now(UTC)
        event = LabelEvent(id=0, item_id=item_id, labeller=labeller, label=label, at=at)
        with self.engine.begin() as conn:
            key = conn.execute(insert(labels).values(
                event.model_dump(exclude={"id"}))).inserted_primary_key
        assert key is not None
        return event.model_copy(update={"id": int(key[0])})

    def events(self, *, labeller: str | None = None,
               item_ids: Iterable[str] | None = None) -> list[LabelEvent]:
        """Label rows in the order they were written (of one labeller or items, if given)."""
        query = select(labels).order_by(labels.c.id)
        if labeller is not None:
            query = query.where(labels.c.labeller == labeller)
        if item_ids is not None:
            query = query.where(labels.c.item_id.in_(list(item_ids)))
        with read_connection(self.engine) as conn:
            return [LabelEvent.model_validate(_aware(row)) for row in conn.execute(query)]

    def adjudicate(self, item_id: str, *, route: str, adjudicator: str, note: str,
                   now: datetime | None = None) -> Adjudication:
        """Store one resolution of an item; a later one for the same item supersedes it."""
        at = now or datetime.now(UTC)
        row = Adjudication(id=0, item_id=item_id, route=route, adjudicator=adjudicator,
                           note=note, at=at)
        with self.engine.begin() as conn:
            key = conn.execute(insert(adjudications).values(
                row.model_dump(exclude={"id"}))).inserted_primary_key
        assert key is not None
        return row.model_copy(update={"id": int(key[0])})

    def adjudications(self) -> list[Adjudication]:
        """Every resolution, in the order they were written."""
        with read_connection(self.engine) as conn:
            rows = conn.execute(select(adjudications).order_by(adjudications.c.id))
            return [Adjudication.model_validate(_aware(row)) for row in rows]


def _aware(row: Row[Any]) -> dict[str, Any]:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    mapping = dict(row._mapping)
    at = mapping["at"]
    mapping["at"] = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return mapping

"""The label store, on SQLite and PostgreSQL: append-only rows read back in the order
written, with who and when; labellers writing at once lose nothing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from router.storage.label_db import LabelDB

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(engine: Engine) -> LabelDB:
    return LabelDB(engine)


def test_labels_are_appended_and_read_back_in_order(db: LabelDB) -> None:
    first = db.append("r1", labeller="ana", label="refund", now=AT)
    db.append("r2", labeller="bo", label="skip", now=AT + timedelta(seconds=1))
    db.append("r1", labeller="ana", label="undo", now=AT + timedelta(seconds=2))
    events = db.events()
    assert [(e.item_id, e.labeller, e.label) for e in events] == [
        ("r1", "ana", "refund"), ("r2", "bo", "skip"), ("r1", "ana", "undo")]
    assert events[0] == first and first.at == AT and first.id > 0
    assert [e.label for e in db.events(labeller="ana")] == ["refund", "undo"]
    assert [e.labeller for e in db.events(item_ids=["r2"])] == ["bo"]
    assert db.events(item_ids=[]) == []


def test_adjudications_keep_every_resolution_with_who_and_note(db: LabelDB) -> None:
    assert db.adjudications() == []
    one = db.adjudicate("r1", route="account", adjudicator="cy", note="guide §2", now=AT)
    two = db.adjudicate("r1", route="other", adjudicator="di", note="", now=AT)
    assert db.adjudications() == [one, two]
    assert (one.route, one.adjudicator, one.note, one.at) == ("account", "cy", "guide §2", AT)


def test_two_labellers_writing_at_once_lose_no_row(db: LabelDB) -> None:
    """Two threads, each its own connection, 25 labels each on the same items at once."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def label(who: str) -> None:
        barrier.wait()
        try:
            for i in range(25):
                db.append(f"r{i}", labeller=who, label="refund")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=label, args=(who,)) for who in ("ana", "bo")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    events = db.events()
    assert len(events) == 50 and len({e.id for e in events}) == 50
    assert {(e.item_id, e.labeller) for e in events} == {
        (f"r{i}", who) for i in range(25) for who in ("ana", "bo")}

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from handlers.observation import success
from handlers.services.cases import Action, CaseBook, Turn, new_case_id


@pytest.fixture
def book(engine: Engine) -> CaseBook:
    return CaseBook(engine, now=lambda: datetime(2026, 3, 15, 12, 0, tzinfo=UTC))


def _turn(**overrides: object) -> Turn:
    values: dict = dict(request_id="r1", customer_text="hello", decision={"route": "clarify"},
                        actions=[Action("desk.clarify", success("clarify", "asked"))],
                        reply="Could you tell me more?", status="awaiting_customer",
                        flow=None, customer_id=None, context={"texts": ["hello"]})
    values.update(overrides)
    return Turn(**values)


def test_case_ids_are_unique_identifiers() -> None:
    ids = {new_case_id() for _ in range(100)}
    assert len(ids) == 100 and all(i.startswith("c-") and len(i) == 18 for i in ids)


def test_record_creates_then_updates(book: CaseBook) -> None:
    assert book.get("c-1") is None
    book.record("c-1", _turn())
    first = book.get("c-1")
    assert first is not None and first.status == "awaiting_customer"
    assert first.context == {"texts": ["hello"]}
    book.record("c-1", _turn(request_id="r2", customer_text="refund O-1001",
                             status="resolved", flow=None, customer_id="A-100", context={}))
    second = book.get("c-1")
    assert second is not None and second.status == "resolved" and second.customer_id == "A-100"
    assert second.created_at == first.created_at


def test_view_has_messages_decisions_and_actions_in_order(book: CaseBook) -> None:
    book.record("c-1", _turn())
    book.record("c-1", _turn(request_id=None, customer_text=None, decision=None,
                             reply="A supervisor approved…", status="resolved"))
    view = book.view("c-1")
    assert [(m["role"], m["text"]) for m in view["messages"]] == [
        ("customer", "hello"), ("desk", "Could you tell me more?"),
        ("desk", "A supervisor approved…"),
    ]
    assert view["decisions"] == [{"route": "clarify"}]
    assert [a["code"] for a in view["actions"]] == ["clarify", "clarify"]
    assert view["status"] == "resolved"
    assert book.view("c-nope") is None


def test_record_once_writes_a_keyed_turn_once(book: CaseBook) -> None:
    case_id = new_case_id()
    book.record(case_id, _turn())
    told = _turn(request_id=None, customer_text=None, decision=None, status="resolved",
                 actions=[Action("refunds.decide", success("refund_issued", "issued",
                                                           operation="op-1"))])
    assert book.record_once(case_id, told, action="refunds.decide", key="operation",
                            value="op-1")
    assert not book.record_once(case_id, told, action="refunds.decide", key="operation",
                                value="op-1")
    assert book.record_once(case_id, told, action="refunds.decide", key="operation",
                            value="op-2")
    view = book.view(case_id)
    assert [a["name"] for a in view["actions"]] == ["desk.clarify", "refunds.decide",
                                                    "refunds.decide"]
    assert len(view["messages"]) == 2 + 2

"""The embedded responder: FAQ answers, the customer's own order status, or a person."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.fallback.responder import Responder, build_responder
from handlers.flow import FlowInput
from handlers.services.store import SqlStore, snapshot
from tests.handlers.helpers import decision


@pytest.fixture
def responder(desk: SupportDesk) -> Responder:
    return build_responder(SqlStore(desk.store.engine))


def _flow(text: str, *, customer: str | None = None, case_customer_id: str | None = None,
          case_customer_verified: bool = False) -> FlowInput:
    return FlowInput(case_id="c-test", text=text, customer=customer,
                     case_customer_id=case_customer_id,
                     case_customer_verified=case_customer_verified)


def test_a_confident_faq_match_is_answered_from_the_section(responder: Responder) -> None:
    result = responder.handle(_flow("How do I reset my password? I forgot it."))
    assert result.status == "resolved"
    (action,) = result.actions
    assert action.name == "fallback.faq" and action.observation.code == "faq_answer"
    facts = action.observation.artifacts
    assert facts["section"] == "passwords" and facts["score"] >= facts["threshold"]
    assert "Forgot password" in facts["answer"]


def test_no_confident_match_goes_to_a_person(responder: Responder) -> None:
    result = responder.handle(_flow("The courier was rude to my mother; I want to complain."))
    assert result.status == "handed_off"
    (action,) = result.actions
    assert action.name == "handoff.human_queue"
    assert action.observation.artifacts["reason"] == "no_confident_answer"


@pytest.mark.parametrize(("flow_kwargs", "text"), [
    ({"customer": "A-100"}, "Where is order O-1004?"),
    ({"customer": "ana.novak@example.com"},
     "Hi, ana.novak@example.com here. Where is my espresso machine, order O-1004?"),
    ({"case_customer_id": "A-100", "case_customer_verified": True},
     "And O-1004, where is it?"),
])
def test_own_order_status_is_answered_from_the_store(responder: Responder, flow_kwargs: dict,
                                                     text: str) -> None:
    result = responder.handle(_flow(text, **flow_kwargs))
    assert result.status == "resolved" and result.account_id == "A-100"
    status = result.actions[-1].observation
    assert status.code == "order_status_shipped"
    assert status.artifacts | {"order_id": "O-1004", "item": "Espresso machine"} == \
        status.artifacts


@pytest.mark.parametrize(("flow_kwargs", "text", "reason"), [
    ({"customer": "A-101"}, "Where is order O-1004?", "order_not_on_account"),
    ({"customer": "A-101"}, "Where are O-2001 and O-1004?", "order_not_on_account"),
    ({"customer": "A-101"}, "Where is order O-9999?", "order_not_on_account"),
    ({}, "Where is order O-1004?", "customer_unknown"),
    ({}, "I'm nobody@example.com, where is O-1004?", "customer_unknown"),
    ({}, "Hi, ana.novak@example.com here. Where is order O-1004?", "customer_unverified"),
    ({"case_customer_id": "A-100"}, "And O-1004, where is it?", "customer_unverified"),
])
def test_other_orders_are_never_described(responder: Responder, desk: SupportDesk,
                                          flow_kwargs: dict, text: str, reason: str) -> None:
    result = responder.handle(_flow(text, **flow_kwargs))
    assert result.status == "handed_off"
    assert [a.name for a in result.actions] == ["handoff.human_queue"]
    assert result.actions[0].observation.artifacts["reason"] == reason
    out = desk.handle_message(text, None, flow_kwargs.get("customer"), decision("other"))
    assert "Espresso" not in out.reply and "shipped" not in out.reply
    assert "a person will reply" in out.reply


def test_the_desk_records_the_answer_and_writes_nothing_to_the_shop(desk: SupportDesk,
                                                                    engine: Engine) -> None:
    before = snapshot(engine)
    out = desk.handle_message("Where is my espresso machine? Order O-1004.", None,
                              "ana.novak@example.com", decision("other"))
    assert (out.route, out.status) == ("other", "resolved")
    assert out.reply.startswith("Order O-1004 (Espresso machine) was placed on 2026-03-12")
    case = desk.get_case(out.case_id)
    assert [a["name"] for a in case["actions"]] == ["identity.identify", "store.order_status"]
    assert case["customer_id"] == "A-100"
    faq = desk.handle_message("Which payment methods do you accept?", None, None,
                              decision("other"))
    assert faq.status == "resolved" and "PayPal" in faq.reply
    assert snapshot(engine) == before

"""The refund handler through the desk, with hand-built router decisions (no model)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.services.store import snapshot
from tests.handlers.helpers import decision, mail_sender, new_refunds
from tests.messages import TEAPOT, WHEELS

KNIVES = ("Hello, ana.novak@example.com here. The knife set from order O-1002 arrived with one "
          "knife missing. Please refund $15.00 for the missing knife.")


def _send(desk: SupportDesk, text: str, *, case_id: str | None = None,
          customer: str | None = None, claimed: bool = False, route: str = "refund"):
    """One message; from a mail system that vouches for the e-mail in it unless `claimed`
    (then the e-mail is only claimed, as in an anonymous chat)."""
    if customer is None and not claimed:
        customer = mail_sender(desk, text)
    return desk.handle_message(text, case_id, customer, decision(route))


@pytest.mark.parametrize(("text", "refund"), [
    (TEAPOT, ("O-1001", 4800)),
    (KNIVES, ("O-1002", 1500)),
    ("Hallo, hier ist dmitri.sokolov@example.com. Die Wolldecke aus Bestellung O-4001 ist "
     "beschädigt. Bitte erstatten Sie 20 $.", ("O-4001", 2000)),
])
def test_refund_is_issued_and_the_reply_names_it(desk: SupportDesk, engine: Engine,
                                                 text: str, refund: tuple[str, int]) -> None:
    before = snapshot(engine)
    out = _send(desk, text)
    assert out.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [refund]
    assert "It has been issued (refund 2)." in out.reply
    assert [a["name"] for a in out.actions][-1] == "refunds.request"


@pytest.mark.parametrize(("text", "code"), [
    ("Hi, I'm ana.novak@example.com. I'd like a refund for the linen tablecloth, order O-1003.",
     "outside_refund_window"),
    ("Hi, ana.novak@example.com. Please refund my espresso machine, order O-1004.",
     "order_not_delivered"),
    ("Hello, eva.lindqvist@example.com here. My headphones from order O-5001 are defective.",
     "already_refunded"),
    ("Hi, I'm ben.ortiz@example.com. Please refund order O-4001, the wool blanket.",
     "order_not_yours"),
    ("Hi, chloe.park@example.com. Please refund the desk lamp, order O-3001.",
     "account_suspended"),
    ("Hi, ana.novak@example.com. Please refund order O-9999.", "order_not_found"),
    ("Hi, ana.novak@example.com. Please refund $60 for order O-1001.", "exceeds_refundable"),
])
def test_refusals_change_nothing_and_say_why(desk: SupportDesk, engine: Engine, text: str,
                                             code: str) -> None:
    before = snapshot(engine)
    out = _send(desk, text)
    assert out.status == "resolved"
    assert out.actions[-1]["code"] == code
    assert snapshot(engine) == before
    assert "refunded" in out.reply or "changes" in out.reply


@pytest.mark.parametrize(("text", "code"), [
    ("Please refund order O-1001, it arrived broken.", "identity_missing"),
    ("This is someone@example.org, refund O-1001 please.", "unknown_email"),
    ("Hi, ana.novak@example.com here. My teapot arrived broken.", "order_missing"),
    ("Hi, ana.novak@example.com. Refund O-1001 and O-1002 please.", "order_ambiguous"),
    ("Hi, ana.novak@example.com. For order O-1002 refund $10 or maybe $15?",
     "amount_ambiguous"),
    ("Hi, ana.novak@example.com. Please refund €15 for order O-1002.", "currency_unsupported"),
])
def test_questions_change_nothing_and_keep_the_flow_open(desk: SupportDesk, engine: Engine,
                                                         text: str, code: str) -> None:
    before = snapshot(engine)
    out = _send(desk, text)
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == code
    assert out.reply.count("?") >= 1
    assert snapshot(engine) == before
    facts = desk.prepare("answer", case_id=out.case_id)
    assert facts.case_route == "refund"


def test_the_answer_to_which_order_completes_the_refund(desk: SupportDesk,
                                                       engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, "Hi, ana.novak@example.com here. My teapot arrived broken, "
                        "please refund it.")
    second = _send(desk, "It's order O-1001.", case_id=first.case_id)
    assert second.case_id == first.case_id and second.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    assert desk.prepare("thanks", case_id=first.case_id).case_route is None


def test_the_answer_with_an_email_identifies_the_customer(desk: SupportDesk,
                                                         engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, "Please refund $15 for order O-1002, a knife was missing.")
    second = _send(desk, "ana.novak@example.com", case_id=first.case_id)
    assert second.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [("O-1002", 1500)]
    assert desk.get_case(first.case_id)["customer_id"] == "A-100"


def test_authenticated_customer_wins_over_an_email_in_the_text(desk: SupportDesk,
                                                              engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "I'm ana.novak@example.com, refund order O-2001.", customer="A-101")
    assert out.status == "resolved"
    assert out.actions[0]["artifacts"] == {"account_id": "A-101", "source": "authenticated",
                                           "verified": True}
    assert new_refunds(before, snapshot(engine)) == [("O-2001", 8900)]


def test_held_refund_reply_says_nothing_was_issued(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, WHEELS)
    assert out.status == "awaiting_approval"
    assert snapshot(engine) == before
    assert "$350.00" in out.reply and "on hold" in out.reply
    assert "Nothing has been issued yet" in out.reply
    facts = desk.prepare("any news?", case_id=out.case_id)
    assert facts.case_has_held_refund and facts.case_route is None


def test_a_followup_on_a_held_case_reports_the_hold(desk: SupportDesk, engine: Engine) -> None:
    first = _send(desk, WHEELS)
    followup = _send(desk, "Any news on my refund?", case_id=first.case_id)
    assert followup.status == "awaiting_approval"
    assert "still on hold" in followup.reply
    assert len(desk.list_approvals("held")) == 1


def test_repeating_the_request_on_the_case_replays_the_receipt(desk: SupportDesk,
                                                              engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, TEAPOT)
    again = _send(desk, TEAPOT, case_id=first.case_id)
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    assert "already issued (refund 2)" in again.reply


def test_lost_response_is_retried_to_one_refund(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    desk.refunds.faults.arm("lost_response")
    out = _send(desk, KNIVES)
    assert out.status == "resolved" and "(refund 2)" in out.reply
    assert new_refunds(before, snapshot(engine)) == [("O-1002", 1500)]
    assert desk.refunds.faults.take("lost_response") is False  # it did fire

"""The refund handler through the desk, with hand-built router decisions (no model)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.services.store import snapshot
from router.errors import InvalidInput
from tests.handlers.helpers import TODAY, decision, mail_sender, new_refunds
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


# -- amounts the parser cannot read are asked about, never refunded in full --------------

ANA = "Hi, ana.novak@example.com here. The teapot from order O-1001 arrived broken."


@pytest.mark.parametrize(("ask", "unreadable"), [
    ("Please refund $5,00000.", "$5,00000"),
    ("Please refund $1e5.", "$1e5"),
    ("Please refund $15k.", "$15k"),
    ("Please refund $2OO.", "$2OO"),
    ("Please refund $15.5.5.", "$15.5.5"),
    ("Please refund 20.", "20"),
    ("Please refund 50%.", "50"),
    ("Please refund fifteen twenty dollars.", "fifteen twenty dollars"),
    ("Devuélvanme quince dólares.", "quince dólares"),
    ("Please refund $15-$20.", "$20"),
])
def test_an_unreadable_amount_is_asked_about_and_nothing_is_written(
        desk: SupportDesk, engine: Engine, ask: str, unreadable: str) -> None:
    before = snapshot(engine)
    out = _send(desk, f"{ANA} {ask}")
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == "amount_unreadable"
    assert out.actions[-1]["artifacts"]["unreadable"][-1] == unreadable
    assert f'"{unreadable}"' in out.reply and "?" in out.reply
    assert snapshot(engine) == before
    assert desk.prepare("answer", case_id=out.case_id).case_route == "refund"


@pytest.mark.parametrize(("ask", "cents"), [
    ("Please refund just $.50.", 50),
    ("Please refund ＄15.", 1500),
    ("Please refund fifteen dollars.", 1500),
    ("Please refund me 20.00.", 2000),
    ("Please refund $15 - yes, $15.00.", 1500),
])
def test_an_amount_written_unusually_but_unambiguously_is_refunded(
        desk: SupportDesk, engine: Engine, ask: str, cents: int) -> None:
    before = snapshot(engine)
    out = _send(desk, f"{ANA} {ask}")
    assert out.status == "resolved" and out.actions[-1]["code"] == "refund_issued"
    assert new_refunds(before, snapshot(engine)) == [("O-1001", cents)]


def test_another_currency_named_by_code_is_asked_about(desk: SupportDesk,
                                                      engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, f"{ANA} Please refund CHF 45.-")
    assert out.actions[-1]["code"] == "currency_unsupported"
    assert "CHF 45.-" in out.reply and snapshot(engine) == before


@pytest.mark.parametrize(("answer", "refund"), [
    ("Sorry, I meant $15.", [("O-1001", 1500)]),
    ("Just refund the full amount, please.", [("O-1001", 4800)]),
    ("yes", []),
])
def test_the_answer_to_the_amount_question_decides(desk: SupportDesk, engine: Engine,
                                                   answer: str,
                                                   refund: list[tuple[str, int]]) -> None:
    before = snapshot(engine)
    first = _send(desk, f"{ANA} Please refund $1e5.")
    second = _send(desk, answer, case_id=first.case_id)
    assert new_refunds(before, snapshot(engine)) == refund
    if not refund:  # "yes" says nothing about the amount: the question stands
        assert second.actions[-1]["code"] == "amount_unreadable"


def test_markup_in_the_message_is_not_kept_in_the_refund_reason(desk: SupportDesk,
                                                               engine: Engine) -> None:
    before = snapshot(engine)
    _send(desk, f"{ANA} <img src=x onerror=alert(1)> Please refund $15.")
    (row,) = [r for r in snapshot(engine)["refunds"] if r not in before["refunds"]]
    assert "<" not in row["reason"] and ">" not in row["reason"]
    assert "Please refund $15." in row["reason"]


# -- the $200 limit counts what leaves, across requests and cases ------------------------

BEN = "This is ben.ortiz@example.com. The carbon bike wheels from order O-2002 are cracked."


def test_splitting_a_refund_on_one_case_does_not_avoid_the_supervisor(
        desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, f"{BEN} Please refund $199.")
    assert first.status == "resolved" and first.actions[-1]["code"] == "refund_issued"
    second = _send(desk, f"{BEN} Please refund $151 as well.", case_id=first.case_id)
    assert second.status == "awaiting_approval"
    assert second.actions[-1]["code"] == "refund_held"
    assert "supervisor" in second.reply and "Nothing has been issued yet" in second.reply
    assert new_refunds(before, snapshot(engine)) == [("O-2002", 19_900)]


def test_a_held_refund_the_order_can_no_longer_pay_is_closed_and_told(
        desk: SupportDesk, engine: Engine) -> None:
    held = _send(desk, f"{BEN} Please refund $300.")
    (row,) = desk.list_approvals("held")
    issued = _send(desk, f"{BEN} Please refund $199.")
    assert issued.actions[-1]["code"] == "refund_issued"
    assert desk.list_approvals("held") == []
    case = desk.get_case(held.case_id)
    assert case["status"] == "resolved"
    told = [a for a in case["actions"] if a["name"] == "refunds.close"]
    assert [a["code"] for a in told] == ["no_longer_refundable"]
    assert "can no longer be issued" in case["messages"][-1]["text"]
    # The supervisor's decision is an answer, not a 409, and tells the customer nothing new.
    outcome = desk.decide_approval(row["operation"], "approve", "maria")
    assert outcome.operation_status == "closed" and outcome.refund_id is None
    case = desk.get_case(held.case_id)
    assert len([a for a in case["actions"] if a["name"] == "refunds.close"]) == 1
    assert [r["operation"] for r in desk.list_approvals("closed")] == [row["operation"]]


def test_a_supervisor_approving_an_unpayable_refund_closes_it(desk: SupportDesk,
                                                             engine: Engine) -> None:
    held = _send(desk, WHEELS)
    (row,) = desk.list_approvals("held")
    desk.store.add_refund("O-2002", 100, "by hand", today=TODAY)
    outcome = desk.decide_approval(row["operation"], "approve", "maria")
    assert outcome.operation_status == "closed" and outcome.case_status == "resolved"
    assert "can no longer be issued" in outcome.reply
    again = desk.decide_approval(row["operation"], "reject", "omar")
    assert again.operation_status == "closed" and again.replayed
    told = [a for a in desk.get_case(held.case_id)["actions"] if a["name"] == "refunds.close"]
    assert len(told) == 1


def test_a_followup_on_a_held_refund_the_order_can_no_longer_pay(desk: SupportDesk,
                                                                engine: Engine) -> None:
    held = _send(desk, WHEELS)
    desk.store.add_refund("O-2002", 100, "by hand", today=TODAY)
    followup = _send(desk, "Any news on my refund?", case_id=held.case_id)
    assert followup.status == "resolved"
    assert "can no longer be issued" in followup.reply
    assert desk.list_approvals("held") == []
    told = [a for a in desk.get_case(held.case_id)["actions"] if a["name"] == "refunds.close"]
    assert len(told) == 1


@pytest.mark.parametrize("ask", ["Please refund zero dollars.", "Please refund a million dollars.",
                                 "Please refund -$.50.", "Please refund ＄０."])
def test_impossible_amounts_in_any_form_are_refused_with_422(desk: SupportDesk,
                                                             engine: Engine, ask: str) -> None:
    before = snapshot(engine)
    with pytest.raises(InvalidInput) as exc:
        desk.prepare(f"{ANA} {ask}")
    assert exc.value.code == "invalid_amount" and exc.value.status_code == 422
    assert snapshot(engine) == before

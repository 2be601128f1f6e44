"""The desk: routes other than refund/account, validation, cases, approvals, restarts."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from handlers.desk import SupportDesk, build_desk
from handlers.services.cases import cases
from handlers.services.store import snapshot
from router.errors import Conflict, InvalidInput, NotFound
from router.storage.db import make_engine, migrate
from tests.handlers.helpers import FIXTURE, TODAY, decision, new_refunds
from tests.messages import WHEELS


def _case_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(cases)).scalar_one()


def _held(desk: SupportDesk) -> tuple[str, str]:
    out = desk.handle_message(WHEELS, None, "ben.ortiz@example.com", decision("refund"))
    assert out.status == "awaiting_approval"
    (row,) = desk.list_approvals("held")
    return out.case_id, row["operation"]


def test_other_is_handed_off_to_people_and_changes_nothing(desk: SupportDesk,
                                                           engine: Engine) -> None:
    before = snapshot(engine)
    text = "The courier was rude to my mother and I want to complain."  # no FAQ answers it
    out = desk.handle_message(text, None, None, decision("other"))
    assert out.status == "handed_off" and out.route == "other"
    assert "support team" in out.reply and "person" in out.reply
    assert [(a["name"], a["code"]) for a in out.actions] == [("handoff.human_queue",
                                                              "handed_off")]
    assert snapshot(engine) == before


def test_clarify_asks_one_question_and_keeps_the_text(desk: SupportDesk,
                                                      engine: Engine) -> None:
    before = snapshot(engine)
    first = desk.handle_message("Hi, ana.novak@example.com here, I need help with O-1001.",
                                None, "ana.novak@example.com", decision("clarify"))
    assert first.status == "awaiting_customer" and first.reply.count("?") == 2
    assert snapshot(engine) == before
    assert desk.prepare("x", case_id=first.case_id).case_route is None  # the model decides
    second = desk.handle_message("The teapot arrived broken, please refund it.",
                                 first.case_id, None, decision("refund"))
    assert second.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]


@pytest.mark.parametrize(("kwargs", "error", "code"), [
    ({"case_id": "c-unknown"}, NotFound, "unknown_case"),
    ({"customer": "nobody@example.com"}, InvalidInput, "unknown_customer"),
    ({"customer": "A-999"}, InvalidInput, "unknown_customer"),
])
def test_prepare_refuses_bad_references(desk: SupportDesk, engine: Engine, kwargs: dict,
                                        error: type, code: str) -> None:
    with pytest.raises(error) as exc:
        desk.prepare("refund O-1001", **kwargs)
    assert exc.value.code == code
    assert _case_count(engine) == 0


@pytest.mark.parametrize("text", [
    "ana.novak@example.com: refund -$50 for O-1001",
    "ana.novak@example.com: refund $0 for O-1001",
    "ana.novak@example.com: refund $999,999,999 for O-1001",
])
def test_invalid_amounts_are_refused_before_anything_is_written(desk: SupportDesk,
                                                                engine: Engine,
                                                                text: str) -> None:
    before = snapshot(engine)
    with pytest.raises(InvalidInput) as exc:
        desk.handle_message(text, None, None, decision("refund"))
    assert exc.value.code == "invalid_amount"
    assert snapshot(engine) == before and _case_count(engine) == 0


def test_prepare_gives_new_cases_an_id_without_writing(desk: SupportDesk,
                                                       engine: Engine) -> None:
    facts = desk.prepare("hello")
    assert facts.is_new and facts.case_id.startswith("c-")
    assert _case_count(engine) == 0


def test_get_case_has_messages_decisions_actions_and_refunds(desk: SupportDesk) -> None:
    case_id, op = _held(desk)
    desk.decide_approval(op, "approve", "maria")
    view = desk.get_case(case_id)
    assert view["status"] == "resolved"
    assert [m["role"] for m in view["messages"]] == ["customer", "desk", "desk"]
    assert view["decisions"][0]["route"] == "refund"
    assert [a["name"] for a in view["actions"]][-1] == "refunds.decide"
    assert view["refunds"][0]["refund_id"] == 2
    with pytest.raises(NotFound, match="no case"):
        desk.get_case("c-nope")


def test_approve_issues_once_and_tells_the_customer(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    case_id, op = _held(desk)
    outcome = desk.decide_approval(op, "approve", "maria")
    assert outcome.operation_status == "issued" and outcome.refund_id == 2
    assert outcome.case_status == "resolved" and not outcome.replayed
    assert outcome.reply == ("A supervisor approved your refund of $350.00 for order O-2002. "
                             "It has been issued (refund 2).")
    again = desk.decide_approval(op, "approve", "maria")
    assert again.replayed and again.refund_id == 2
    assert new_refunds(before, snapshot(engine)) == [("O-2002", 35000)]
    replies = [m for m in desk.get_case(case_id)["messages"] if m["role"] == "desk"]
    assert len(replies) == 2  # the hold, then one approval reply (not one per call)


def test_reject_never_issues(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    case_id, op = _held(desk)
    outcome = desk.decide_approval(op, "reject", "maria")
    assert outcome.operation_status == "rejected" and outcome.refund_id is None
    assert "did not approve" in outcome.reply and "No refund has been issued" in outcome.reply
    assert snapshot(engine) == before
    assert desk.list_approvals("rejected")[0]["operation"] == op
    assert desk.get_case(case_id)["status"] == "resolved"


def test_approve_then_reject_stays_approved(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    _, op = _held(desk)
    desk.decide_approval(op, "approve", "maria")
    with pytest.raises(Conflict) as exc:
        desk.decide_approval(op, "reject", "omar")
    assert exc.value.code == "already_decided"
    assert new_refunds(before, snapshot(engine)) == [("O-2002", 35000)]


def test_a_review_shows_the_case_the_order_and_what_it_was_refunded_before(
        desk: SupportDesk) -> None:
    case_id, op = _held(desk)
    review = desk.review_approval(op)
    assert (review["approval"]["operation"], review["approval"]["amount"]) == (op, "$350.00")
    assert review["case"]["case_id"] == case_id
    assert [m["text"] for m in review["case"]["messages"] if m["role"] == "customer"] == [
        WHEELS]
    assert (review["order"]["id"], review["order"]["total"]) == ("O-2002", "$350.00")
    assert review["account"]["email"] == "ben.ortiz@example.com"
    assert review["earlier_refunds"] == []
    desk.decide_approval(op, "approve", "maria", principal="sup-maria",
                         note="Photos checked.\nCourier confirmed.")
    after = desk.review_approval(op)
    assert [(r["amount"], r["order_id"]) for r in after["earlier_refunds"]] == [
        ("$350.00", "O-2002")]
    assert after["approval"]["decided_by"] == "sup-maria"
    (told,) = [a for a in after["case"]["actions"] if a["name"] == "refunds.decide"]
    assert told["artifacts"]["note"] == "Photos checked.\nCourier confirmed."
    with pytest.raises(NotFound) as exc:
        desk.review_approval("op-nope")
    assert exc.value.code == "unknown_operation"


def test_approval_through_a_lost_response(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    _, op = _held(desk)
    desk.refunds.faults.arm("lost_response")
    outcome = desk.decide_approval(op, "approve", "maria")
    assert outcome.refund_id == 2 and "(refund 2)" in outcome.reply
    assert new_refunds(before, snapshot(engine)) == [("O-2002", 35000)]


@pytest.mark.parametrize(("args", "error", "code"), [
    (("op-nope", "approve", "maria"), NotFound, "unknown_operation"),
    (("{op}", "maybe", "maria"), InvalidInput, "invalid_decision"),
    (("{op}", "approve", "  "), InvalidInput, "invalid_supervisor"),
    (("{op}", "approve", "maria", "x" * 1001), InvalidInput, "invalid_note"),
    (("{op}", "approve", "maria", "bell\x07"), InvalidInput, "invalid_note"),
])
def test_bad_decisions_change_nothing(desk: SupportDesk, engine: Engine, args: tuple,
                                      error: type, code: str) -> None:
    _, op = _held(desk)
    before = snapshot(engine)
    operation, choice, supervisor, *note = (a.format(op=op) for a in args)
    with pytest.raises(error) as exc:
        desk.decide_approval(operation, choice, supervisor, note=note[0] if note else "")
    assert exc.value.code == code
    assert snapshot(engine) == before and desk.list_approvals("held")[0]["operation"] == op


def test_unknown_approval_filter(desk: SupportDesk) -> None:
    with pytest.raises(InvalidInput) as exc:
        desk.list_approvals("pending")
    assert exc.value.code == "invalid_status"


def test_restart_between_hold_and_approval_issues_exactly_once(db_url: str) -> None:
    url = db_url
    first_engine = make_engine(url)
    migrate(first_engine)
    first = build_desk(first_engine, fixture_path=FIXTURE, today=TODAY)
    case_id, op = _held(first)
    first_engine.dispose()  # the gateway stops; nothing of the hold lives in memory

    second_engine = make_engine(url)

    migrate(second_engine)
    second = build_desk(second_engine, fixture_path=FIXTURE, today=TODAY)
    assert [r["operation"] for r in second.list_approvals("held")] == [op]
    assert second.prepare("news?", case_id=case_id).case_has_held_refund
    outcome = second.decide_approval(op, "approve", "maria")
    second.decide_approval(op, "approve", "maria")
    assert outcome.refund_id == 2
    refunds = [r for r in snapshot(second_engine)["refunds"] if r["order_id"] == "O-2002"]
    assert [(r["id"], r["amount_cents"]) for r in refunds] == [(2, 35000)]
    second_engine.dispose()


def test_twenty_concurrent_identical_messages_on_a_case_refund_once(any_db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = make_engine(any_db_url)

    migrate(engine)
    try:
        desk = build_desk(engine, fixture_path=FIXTURE, today=TODAY)
        before = snapshot(engine)
        opened = desk.handle_message("hello", None, None, decision("clarify"))
        text = ("Hi, this is ana.novak@example.com. My ceramic teapot (order O-1001) arrived "
                "broken. Please refund the full amount.")
        with ThreadPoolExecutor(max_workers=20) as pool:
            outs = list(pool.map(lambda _: desk.handle_message(
                text, opened.case_id, "ana.novak@example.com", decision("refund")), range(20)))
        assert {o.status for o in outs} == {"resolved"}
        # Every one got the refund's receipt (one fresh, the rest replayed), none a
        # refusal from a policy check that saw the winner's refund half-way.
        assert {o.actions[-1]["name"] for o in outs} == {"refunds.request"}
        assert sorted(o.actions[-1]["artifacts"]["replayed"] for o in outs) == \
            [False] + [True] * 19
        assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
        assert len(desk.get_case(opened.case_id)["messages"]) == 2 + 2 * 20
    finally:
        engine.dispose()


def test_concurrent_decisions_on_one_hold_tell_the_customer_once(desk: SupportDesk,
                                                                 engine: Engine) -> None:
    """Approvals and rejections at once: one decision wins, one message to the customer."""
    from concurrent.futures import ThreadPoolExecutor

    case_id, op = _held(desk)
    choices = ["approve", "reject"] * 6

    def decide(choice: str) -> str:
        try:
            desk.decide_approval(op, choice, "maria")
            return choice
        except Conflict:
            return "refused"

    with ThreadPoolExecutor(max_workers=len(choices)) as pool:
        results = list(pool.map(decide, choices))
    (winner,) = set(results) - {"refused"}
    assert results.count(winner) == 6 and results.count("refused") == 6
    told = [a for a in desk.get_case(case_id)["actions"] if a["name"] == "refunds.decide"]
    assert len(told) == 1
    expected = [("O-2002", 35000)] if winner == "approve" else []
    assert [(r["order_id"], r["amount_cents"]) for r in snapshot(engine)["refunds"]
            if r["id"] > 1] == expected


def test_the_decider_recorded_is_the_principal_and_the_name_only_a_display(
        desk: SupportDesk) -> None:
    case_id, op = _held(desk)
    outcome = desk.decide_approval(op, "approve", " Maria Lopez ", principal="key-sup-1")
    assert (outcome.decided_by, outcome.supervisor) == ("key-sup-1", "Maria Lopez")
    (row,) = desk.list_approvals("approved")
    assert row["decided_by"] == "key-sup-1"
    told = [a for a in desk.get_case(case_id)["actions"] if a["name"] == "refunds.decide"]
    assert told[0]["artifacts"] | {"decided_by": "key-sup-1", "display_name": "Maria Lopez"} \
        == told[0]["artifacts"]
    # Someone else repeating the decision names no one new: the first decider stands.
    again = desk.decide_approval(op, "approve", "Mallory", principal="key-other")
    assert again.replayed and again.decided_by == "key-sup-1"
    assert desk.list_approvals("approved")[0]["decided_by"] == "key-sup-1"


def test_without_a_principal_the_operator_decides(desk: SupportDesk) -> None:
    from handlers.desk import OPERATOR_PRINCIPAL

    _, op = _held(desk)
    assert desk.decide_approval(op, "reject", "maria").decided_by == OPERATOR_PRINCIPAL

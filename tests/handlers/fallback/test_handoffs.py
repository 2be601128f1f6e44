"""The human queue: listing handed-off cases and a person's reply."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.fallback.handoffs import check_reply
from router.errors import Conflict, InvalidInput, NotFound
from tests.handlers.helpers import decision
from tests.messages import COMPLAINT
from tests.tables import row_counts


def test_the_queue_lists_handed_off_cases_and_a_reply_resolves_one(desk: SupportDesk) -> None:
    out = desk.handle_message(COMPLAINT, None, None, decision("other"))
    desk.handle_message("Which payment methods do you accept?", None, None, decision("other"))
    (row,) = desk.list_handoffs()
    assert row["case_id"] == out.case_id and row["last_customer_message"] == COMPLAINT
    assert row["reason"] == "no_confident_answer"

    done = desk.reply_handoff(out.case_id, " sam ", "Sorry to hear that; I've told the courier.")
    assert (done.agent, done.case_status) == ("sam", "resolved")
    assert desk.list_handoffs() == []
    case = desk.get_case(out.case_id)
    assert case["status"] == "resolved"
    assert (case["messages"][-1]["role"], case["messages"][-1]["text"]) == (
        "agent",
        "Sorry to hear that; I've told the courier.",
    )
    assert case["actions"][-1]["name"] == "handoff.agent_reply"
    assert case["actions"][-1]["artifacts"]["agent"] == "sam"


@pytest.mark.parametrize(
    ("case", "agent", "text", "error", "code"),
    [
        ("queued", "", "hello", InvalidInput, "invalid_agent"),
        ("queued", "sam\x00", "hello", InvalidInput, "invalid_agent"),
        ("queued", "sam", "   ", InvalidInput, "empty_text"),
        ("queued", "sam", "x" * 4001, InvalidInput, "text_too_long"),
        ("queued", "sam", "bell\x07", InvalidInput, "control_characters"),
        ("c-unknown", "sam", "hello", NotFound, "unknown_case"),
        ("resolved", "sam", "hello", Conflict, "not_handed_off"),
    ],
)
def test_bad_replies_are_refused_and_write_nothing(
    desk: SupportDesk,
    engine: Engine,
    case: str,
    agent: str,
    text: str,
    error: type[Exception],
    code: str,
) -> None:
    queued = desk.handle_message(COMPLAINT, None, None, decision("other")).case_id
    resolved = desk.handle_message(
        "Which payment methods do you accept?", None, None, decision("other")
    ).case_id
    case_id = {"queued": queued, "resolved": resolved}.get(case, case)
    before = row_counts(engine)
    with pytest.raises(error) as caught:
        desk.reply_handoff(case_id, agent, text)
    assert caught.value.code == code  # type: ignore[attr-defined]
    assert row_counts(engine) == before
    assert [r["case_id"] for r in desk.list_handoffs()] == [queued]


def test_check_reply_strips_and_keeps_text() -> None:
    assert check_reply("  maria ", " Hello\nthere ") == ("maria", "Hello\nthere")

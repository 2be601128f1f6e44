"""The human queue: listing handed-off cases and a person's reply."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from handlers.desk import OPERATOR_PRINCIPAL, SupportDesk, build_desk
from handlers.fallback.handoffs import MAX_PAGE_SIZE, check_reply
from router.errors import Conflict, InvalidInput, NotFound
from tests.handlers.helpers import FIXTURE, TODAY, decision
from tests.messages import COMPLAINT
from tests.tables import row_counts


def test_the_queue_lists_handed_off_cases_and_a_reply_resolves_one(desk: SupportDesk) -> None:
    out = desk.handle_message(COMPLAINT, None, None, decision("other"))
    desk.handle_message("Which payment methods do you accept?", None, None, decision("other"))
    page = desk.list_handoffs()
    (row,) = page.items
    assert (page.next_cursor, page.total) == (None, 1)
    assert row["case_id"] == out.case_id and row["last_customer_message"] == COMPLAINT
    assert row["reason"] == "no_confident_answer"

    done = desk.reply_handoff(out.case_id, " sam ", "Sorry to hear that; I've told the courier.",
                              principal="key-agent-7")
    assert (done.agent, done.principal, done.case_status) == ("sam", "key-agent-7", "resolved")
    assert desk.list_handoffs().items == []
    case = desk.get_case(out.case_id)
    assert case["status"] == "resolved"
    assert (case["messages"][-1]["role"], case["messages"][-1]["text"]) == (
        "agent",
        "Sorry to hear that; I've told the courier.",
    )
    assert case["actions"][-1]["name"] == "handoff.agent_reply"
    # The audit trail names the authenticated caller; the typed name is for display.
    assert case["actions"][-1]["artifacts"] | {"principal": "key-agent-7", "agent": "sam"} \
        == case["actions"][-1]["artifacts"]


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
    assert [r["case_id"] for r in desk.list_handoffs().items] == [queued]


def test_check_reply_strips_and_keeps_text() -> None:
    assert check_reply("  maria ", " Hello\nthere ") == ("maria", "Hello\nthere")


def test_twenty_agents_replying_at_once_resolve_the_case_once(desk: SupportDesk,
                                                              engine: Engine) -> None:
    case_id = desk.handle_message(COMPLAINT, None, None, decision("other")).case_id
    start = threading.Barrier(20)

    def reply(i: int) -> str:
        start.wait()
        try:
            desk.reply_handoff(case_id, f"agent {i}", f"Reply number {i}.",
                               principal=f"key-{i}")
            return "ok"
        except Conflict as exc:
            return exc.code

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(reply, range(20)))
    assert sorted(results) == ["not_handed_off"] * 19 + ["ok"]
    case = desk.get_case(case_id)
    replies = [m for m in case["messages"] if m["role"] == "agent"]
    recorded = [a for a in case["actions"] if a["name"] == "handoff.agent_reply"]
    assert len(replies) == 1 and len(recorded) == 1 and case["status"] == "resolved"
    # The one reply the customer reads is the one the audit trail names.
    winner = recorded[0]["artifacts"]["principal"]
    assert replies[0]["text"] == f"Reply number {winner.removeprefix('key-')}."


def test_without_a_principal_the_operator_is_recorded(desk: SupportDesk) -> None:
    case_id = desk.handle_message(COMPLAINT, None, None, decision("other")).case_id
    assert desk.reply_handoff(case_id, "sam", "On it.").principal == OPERATOR_PRINCIPAL


class _Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 3, 15, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


def test_the_queue_is_paged_oldest_first_and_filtered_by_age(engine: Engine) -> None:
    clock = _Clock()
    desk = build_desk(engine, fixture_path=FIXTURE, today=TODAY, now=clock)
    queued = []
    for i in range(7):  # one a minute, the same second twice (the id breaks the tie)
        clock.at += timedelta(minutes=1 if i != 4 else 0)
        queued.append(desk.handle_message(f"{COMPLAINT} ({i})", None, None,
                                          decision("other")).case_id)
    queued[3:5] = sorted(queued[3:5])
    resolved = queued.pop(1)
    desk.reply_handoff(resolved, "sam", "Done.")
    seen, cursor, pages = [], None, 0
    while True:
        page = desk.list_handoffs(limit=2, cursor=cursor)
        assert page.total == 6 and len(page.items) <= 2
        seen += [row["case_id"] for row in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == queued and pages == 3
    assert [r["last_customer_message"] for r in desk.list_handoffs(limit=1).items] == \
        [f"{COMPLAINT} (0)"]
    clock.at = datetime(2026, 3, 15, 8, 10, tzinfo=UTC)
    old = desk.list_handoffs(older_than_s=360)  # last written by 08:04: cases 0, 2, 3, 4
    assert [r["case_id"] for r in old.items] == queued[:4] and old.total == 4


def test_the_queue_is_filtered_by_language_and_a_waiting_window(engine: Engine) -> None:
    """The language is that of the newest customer message; the window bounds the wait
    from both sides; `total` counts the matching cases on every page."""
    clock = _Clock()
    desk = build_desk(engine, fixture_path=FIXTURE, today=TODAY, now=clock)
    texts = [COMPLAINT, "Der Kurier war unfreundlich und ich möchte mich bitte beschweren.",
             COMPLAINT, "Le livreur était impoli et je veux me plaindre de la commande."]
    cases = []
    for text in texts:  # one every ten minutes, from 08:10
        clock.at += timedelta(minutes=10)
        cases.append(desk.handle_message(text, None, None, decision("other")).case_id)
    english = desk.list_handoffs(lang="en", limit=1)
    assert [r["case_id"] for r in english.items] == [cases[0]] and english.total == 2
    assert english.items[0]["lang"] == "en"
    assert [r["case_id"] for r in desk.list_handoffs(
        lang="en", cursor=english.next_cursor).items] == [cases[2]]
    assert [r["case_id"] for r in desk.list_handoffs(lang="de").items] == [cases[1]]
    assert desk.list_handoffs(lang="sv").total == 0
    clock.at += timedelta(minutes=5)  # waits: 35, 25, 15 and 5 minutes
    window = desk.list_handoffs(older_than_s=10 * 60, newer_than_s=30 * 60)
    assert [r["case_id"] for r in window.items] == cases[1:3] and window.total == 2


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"lang": "xx"}, "invalid_lang"),
    ({"newer_than_s": -1}, "invalid_newer_than"),
    ({"limit": 0}, "invalid_limit"),
    ({"limit": MAX_PAGE_SIZE + 1}, "invalid_limit"),
    ({"cursor": "not-a-cursor"}, "invalid_cursor"),
    ({"cursor": "WzEsMl0"}, "invalid_cursor"),  # base64 of [1,2]: JSON, not a key
    ({"older_than_s": -1}, "invalid_older_than"),
])
def test_bad_paging_is_refused(desk: SupportDesk, kwargs: dict, code: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        desk.list_handoffs(**kwargs)
    assert caught.value.code == code

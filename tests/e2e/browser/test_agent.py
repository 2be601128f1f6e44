"""An agent's work in a real browser: the hand-off queue (filters, paging), a case's
history, and the one reply that resolves it."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page

from tests.e2e.browser.conftest import ConsoleServer, screenshot
from tests.messages import ANA, COMPLAINT

GERMAN = "Der Kurier war sehr unfreundlich und ich möchte mich bitte beschweren."


def _hand_off(server: ConsoleServer, text: str, customer: str | None = None, *,
              kind: str | None = "other") -> str:
    """A customer message the desk hands to a person, sent through the API: its case id.
    By default as the chat form's "something else" (`kind: other`), so the model's doubts
    about a short or foreign text do not turn it into a question."""
    body = {"text": text} | ({"customer": customer} if customer else {}) | (
        {"kind": kind} if kind else {})
    with server.api("chat-gateway") as api:
        answer = api.post("/v1/messages", json=body).json()
    assert answer["status"] == "handed_off", answer
    return str(answer["case_id"])


def _queue(page: Page) -> list[str]:
    return [row.get_attribute("data-case") or ""
            for row in page.locator("tr[data-case]").all()]


def test_an_agent_answers_a_hand_off_and_exactly_one_reply_resolves_it(
        console_server: ConsoleServer, sign_in: Callable[[str], Page]) -> None:
    case_id = _hand_off(console_server, COMPLAINT, ANA, kind=None)  # scored by the model
    ana, bo = sign_in("agent-ana"), sign_in("agent-bo")
    ana.click("header nav >> text=Hand-offs")
    assert case_id in _queue(ana)
    screenshot(ana, "handoffs")

    for page in (ana, bo):
        page.goto(f"/console/handoffs/{case_id}")
    assert COMPLAINT in ana.get_by_test_id("messages").inner_text()
    screenshot(ana, "handoff-case")
    ana.fill("#text", "I am sorry about the courier, Ana. We have raised it with them.")
    ana.click("text=Send and resolve")
    outcome = ana.get_by_test_id("outcome").inner_text()
    assert "agent-ana" in outcome and "resolved" in outcome
    screenshot(ana, "handoff-answered")

    # Bo had the case open too: his reply is refused, and the customer got one reply.
    bo.fill("#text", "Hello from Bo.")
    with bo.expect_response(f"**/console/handoffs/{case_id}/reply") as answer:
        bo.click("text=Send and resolve")
    assert answer.value.status == 409
    assert bo.locator("[data-code=not_handed_off]").is_visible()
    with console_server.api("chat-gateway") as api:
        case = api.get(f"/v1/cases/{case_id}").json()
    agent_messages = [m["text"] for m in case["messages"] if m["role"] == "agent"]
    assert agent_messages == ["I am sorry about the courier, Ana. We have raised it with them."]
    assert case["status"] == "resolved"
    (reply,) = [a for a in case["actions"] if a["name"] == "handoff.agent_reply"]
    assert reply["artifacts"]["principal"] == "agent-ana"
    ana.goto("/console/handoffs")
    assert case_id not in _queue(ana)


def test_the_queue_filters_by_language_and_waiting_time_and_pages(
        console_server: ConsoleServer, agent_page: Page) -> None:
    german = _hand_off(console_server, GERMAN)
    english = [_hand_off(console_server, f"{COMPLAINT} Case {i}.") for i in range(26)]
    page = agent_page
    page.goto("/console/handoffs")
    page.select_option("select[name=lang]", "de")
    page.click("text=Filter")
    assert _queue(page) == [german]
    page.select_option("select[name=lang]", "sv")
    page.click("text=Filter")
    assert page.get_by_test_id("empty").inner_text() == "No waiting case matches these filters."
    screenshot(page, "handoffs-empty-filter")

    page.select_option("select[name=lang]", "")
    page.select_option("select[name=min_wait]", "86400")
    page.click("text=Filter")
    assert _queue(page) == []  # nothing has waited a day yet

    page.select_option("select[name=min_wait]", "")
    page.select_option("select[name=lang]", "en")
    page.click("text=Filter")
    first = _queue(page)
    total = int(page.get_by_test_id("total").inner_text().split()[0])
    assert len(first) == 25 and total >= len(english)
    page.click("a[rel=next]")
    second = _queue(page)
    assert second and not set(first) & set(second)
    assert set(english) <= set(first) | set(second)
    assert "lang=en" in page.url

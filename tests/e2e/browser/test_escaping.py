"""Text from customers, agents and supervisors is rendered as text: the payloads known to
be dangerous, posted through the API, execute nothing on any console page.

For each page: no dialog opens and no script error is raised, a flag the payloads would
set (`window.__pwned`) stays unset, no element the payloads describe exists (an
`<img src=x>`, a `<script>`, a `javascript:` link, an `onerror` attribute), and the
payloads appear on the page literally, as the characters that were sent. The page's
Content-Security-Policy would stop inline script too; the element checks are what show
the escaping itself.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests.e2e.browser.conftest import ConsoleServer, screenshot, watch
from tests.messages import BEN, COMPLAINT, WHEELS

SCRIPT = "<script>window.__pwned = true</script>"
IMG = '"><img src=x onerror="window.__pwned = true">'
LINK = '<a href="javascript:window.__pwned = true">see my order</a>'
PAYLOADS = (SCRIPT, IMG, LINK)
DANGEROUS = "\n".join(PAYLOADS)
"""No digits: the refund flow must still read one amount ($350) from the text."""


@pytest.fixture(scope="module")
def dangerous_cases(console_server: ConsoleServer) -> dict[str, str]:
    """A hand-off waiting, a hand-off answered, a held refund decided: each carrying the
    payloads as customer text, and as the agent's and the supervisor's words."""
    with console_server.api("chat-gateway") as gateway:
        waiting = gateway.post("/v1/messages", json={
            "text": f"{COMPLAINT}\n{DANGEROUS}", "kind": "other"}).json()
        answered = gateway.post("/v1/messages", json={
            "text": f"{COMPLAINT}\n{IMG}", "kind": "other"}).json()
        held = gateway.post("/v1/messages", json={
            "text": f"{WHEELS}\n{DANGEROUS}", "kind": "refund", "customer": BEN}).json()
    assert [waiting["status"], answered["status"], held["status"]] == [
        "handed_off", "handed_off", "awaiting_approval"]
    with console_server.api("agent-ana") as agent:
        replied = agent.post(f"/v1/handoffs/{answered['case_id']}/reply",
                             json={"agent": SCRIPT, "text": f"Sorry!\n{DANGEROUS}"})
        assert replied.status_code == 200, replied.text
    with console_server.api("supervisor-maria") as supervisor:
        (row,) = supervisor.get("/v1/approvals").json()
        decided = supervisor.post(f"/v1/approvals/{row['operation']}/decision", json={
            "decision": "reject", "supervisor": IMG, "note": DANGEROUS})
        assert decided.status_code == 200, decided.text
    return {"waiting": waiting["case_id"], "answered": answered["case_id"],
            "operation": row["operation"]}


def _assert_inert(page: Page, path: str, expected: tuple[str, ...]) -> None:
    seen = watch(page)
    response = page.goto(path)
    assert response is not None and response.status == 200, path
    page.wait_for_load_state("load")
    assert page.evaluate("typeof window.__pwned") == "undefined", path
    assert page.locator("img[src=x], [onerror], a[href^='javascript:' i]").count() == 0, path
    assert page.evaluate("document.scripts.length") == 0, path
    text = page.locator("main").inner_text()
    for payload in expected:
        assert payload in text, (path, payload)
    assert (seen.dialogs, seen.errors) == ([], []), path


def test_the_agents_pages_render_the_payloads_as_text(
        dangerous_cases: dict[str, str], sign_in: Callable[[str], Page]) -> None:
    page = sign_in("agent-bo")
    _assert_inert(page, "/console/handoffs", (IMG,))  # the queue shows one line of each
    _assert_inert(page, f"/console/handoffs/{dangerous_cases['waiting']}", PAYLOADS)
    screenshot(page, "escaping-handoff")
    _assert_inert(page, f"/console/handoffs/{dangerous_cases['answered']}", PAYLOADS)


def test_the_supervisors_pages_render_the_payloads_as_text(
        dangerous_cases: dict[str, str], sign_in: Callable[[str], Page]) -> None:
    page = sign_in("supervisor-sam")
    _assert_inert(page, f"/console/approvals/{dangerous_cases['operation']}", PAYLOADS)
    _assert_inert(page, "/console/approvals", ())

"""A supervisor's work in a real browser: approve a held refund, and two supervisors on
the same refund at once.

Each test gets a gateway of its own (the fixture shop has one order a refund can be held
on), the race one with two worker processes, so the two decisions may land in different
processes and only the database can keep them to one outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import create_engine, select

from handlers.services.store import refunds
from router.app.training import TrainResult
from tests.e2e.browser.conftest import (
    ConsoleServer,
    open_signed_in,
    screenshot,
    start_console_server,
)
from tests.messages import BEN, WHEELS


@pytest.fixture
def console_server(trained: TrainResult, tmp_path: Path) -> Iterator[ConsoleServer]:
    with start_console_server(trained, tmp_path) as server:
        yield server


def _hold(server: ConsoleServer) -> tuple[str, str]:
    """A $350 refund held for a supervisor, asked through the API: (case id, operation)."""
    with server.api("chat-gateway") as api:
        body = api.post("/v1/messages", json={"text": WHEELS, "kind": "refund",
                                              "customer": BEN}).json()
    assert body["status"] == "awaiting_approval", body
    with server.api("supervisor-maria") as api:
        (row,) = api.get("/v1/approvals").json()
    return body["case_id"], row["operation"]


def _issued(server: ConsoleServer, order_id: str) -> list[int]:
    engine = create_engine(server.database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(refunds.c.amount_cents)
                                     .where(refunds.c.order_id == order_id)).scalars())
    finally:
        engine.dispose()


def test_a_supervisor_approves_a_held_refund_and_the_customer_is_told(
        console_server: ConsoleServer, supervisor_page: Page) -> None:
    case_id, operation = _hold(console_server)
    page = supervisor_page
    page.click("header nav >> text=Approvals")
    row = page.locator(f"tr[data-operation='{operation}']")
    assert "$350.00" in row.inner_text() and "O-2002" in row.inner_text()
    screenshot(page, "approvals")

    row.locator("a").click()
    assert WHEELS in page.get_by_test_id("messages").inner_text()
    assert "refund" in page.get_by_test_id("decisions").inner_text()
    assert page.get_by_test_id("no-earlier-refunds").is_visible()
    screenshot(page, "approval-review")

    page.fill("#note", "Photos of the cracks checked.")
    page.click("button[value=approve]")
    outcome = page.get_by_test_id("outcome")
    assert "supervisor-maria" in outcome.inner_text() and "issued" in outcome.inner_text()
    told = page.get_by_test_id("customer-reply").inner_text()
    assert "approved your refund of $350.00" in told
    assert "Photos of the cracks checked." in page.get_by_test_id("actions").inner_text()
    screenshot(page, "approval-decided")

    assert _issued(console_server, "O-2002") == [35000]
    with console_server.api("chat-gateway") as api:
        case = api.get(f"/v1/cases/{case_id}").json()
    assert case["messages"][-1]["text"] == told
    (decided,) = [a for a in case["actions"] if a["name"] == "refunds.decide"]
    assert decided["artifacts"]["decided_by"] == "supervisor-maria"
    page.click("text=← Held refunds")
    assert page.get_by_test_id("empty").is_visible()


def test_two_supervisors_deciding_at_once_get_one_outcome(
        browser: Browser, trained: TrainResult, tmp_path: Path) -> None:
    with start_console_server(trained, tmp_path / "two-workers", workers=2) as server:
        _, operation = _hold(server)
        maria = open_signed_in(browser, server, "supervisor-maria")
        sam = open_signed_in(browser, server, "supervisor-sam")
        try:
            for page in (maria, sam):
                page.goto(f"/console/approvals/{operation}")
            # Both forms are sent before either answer is read.
            with maria.expect_navigation() as approved, sam.expect_navigation() as rejected:
                maria.click("button[value=approve]", no_wait_after=True)
                sam.click("button[value=reject]", no_wait_after=True)
            statuses = sorted([approved.value.status if approved.value else 0,
                               rejected.value.status if rejected.value else 0])
            assert statuses == [200, 409], statuses
            winner, loser = (maria, sam) if approved.value and approved.value.status == 200 \
                else (sam, maria)
            assert loser.locator("[data-code=already_decided]").is_visible()
            screenshot(loser, "approval-already-decided")
            name = "supervisor-maria" if winner is maria else "supervisor-sam"
            assert name in loser.locator("[data-code=already_decided]").inner_text()

            with server.api("supervisor-maria") as api:
                (row,) = api.get("/v1/approvals", params={"status": "all"}).json()
            assert row["decided_by"] == name
            expected = [35000] if row["decision"] == "approve" else []
            assert row["status"] == ("issued" if expected else "rejected")
            assert _issued(server, "O-2002") == expected
        finally:
            maria.context.close()
            sam.context.close()

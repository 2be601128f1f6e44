"""Signing in and out of the console in a real browser, per role.

Each role sees its own areas in the nav and only those; a gateway key and a wrong key
get no session; after sign-out the old session cookie opens nothing, in this browser or
any other client that kept a copy of it.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import Browser, Page

from router.gateway.console.sessions import SESSION_COOKIE
from tests.e2e.browser.conftest import (
    BY_ROLE,
    PEOPLE,
    VIEWPORT,
    ConsoleServer,
    screenshot,
)

NAV_BY_ROLE = {
    "agent": ["Hand-offs"],
    "supervisor": ["Approvals"],
    "admin": [],
}


def _nav(page: Page) -> list[str]:
    return [text.strip() for text in page.locator("header nav a").all_inner_texts()]


def _code(page: Page) -> str:
    return page.locator("[data-code]").first.get_attribute("data-code") or ""


@pytest.mark.parametrize("role", ["agent", "supervisor", "admin"])
def test_each_role_signs_in_and_sees_only_its_areas(
        role: str, sign_in: Callable[[str], Page]) -> None:
    page = sign_in(BY_ROLE[role])
    assert page.get_by_test_id("principal").inner_text() == BY_ROLE[role]
    assert [n for n in _nav(page) if n in sum(NAV_BY_ROLE.values(), [])] == NAV_BY_ROLE[role]
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies[SESSION_COOKIE]
    assert (session["httpOnly"], session["sameSite"], session["path"]) == (
        True, "Strict", "/console")
    screenshot(page, f"home-{role}")


def test_an_agent_is_refused_the_supervisors_page(agent_page: Page) -> None:
    response = agent_page.goto("/console/approvals")
    assert response is not None and response.status == 403
    assert _code(agent_page) == "console_forbidden"
    assert agent_page.locator("h1").inner_text() == "Not allowed"


def test_a_gateway_key_and_a_wrong_key_get_no_session(
        browser: Browser, console_server: ConsoleServer) -> None:
    context = browser.new_context(viewport=VIEWPORT, base_url=console_server.url)
    try:
        page = context.new_page()
        page.goto("/console/sign-in")
        screenshot(page, "sign-in")
        page.fill("#key", PEOPLE["chat-gateway"].key)
        with page.expect_response("**/console/sign-in") as answer:
            page.click("button[type=submit]")
        assert answer.value.status == 403
        assert _code(page) == "console_forbidden"
        screenshot(page, "sign-in-gateway-refused")

        page.goto("/console/sign-in")
        page.fill("#key", PEOPLE["chat-gateway"].key + "x")
        with page.expect_response("**/console/sign-in") as answer:
            page.click("button[type=submit]")
        assert answer.value.status == 401
        assert _code(page) == "console_unknown_key"
        assert SESSION_COOKIE not in {c["name"] for c in context.cookies()}
        page.goto("/console/")
        assert page.url.endswith("/console/sign-in")
    finally:
        context.close()


def test_sign_out_ends_the_session_for_every_copy_of_the_cookie(
        supervisor_page: Page, browser: Browser, console_server: ConsoleServer) -> None:
    (cookie,) = [c for c in supervisor_page.context.cookies() if c["name"] == SESSION_COOKIE]
    supervisor_page.click("form.who button")
    supervisor_page.wait_for_url("**/console/sign-in")
    assert SESSION_COOKIE not in {c["name"] for c in supervisor_page.context.cookies()}

    # A copy kept elsewhere (another browser, a script) opens nothing either.
    other = browser.new_context(viewport=VIEWPORT, base_url=console_server.url)
    try:
        other.add_cookies([cookie])
        page = other.new_page()
        page.goto("/console/approvals")
        assert page.url.endswith("/console/sign-in")
    finally:
        other.close()
    replay = httpx.get(f"{console_server.url}/console/approvals",
                       cookies={SESSION_COOKIE: cookie["value"]}, follow_redirects=False)
    assert (replay.status_code, replay.headers["location"]) == (303, "/console/sign-in")

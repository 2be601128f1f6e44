"""Every console page is protected by construction, and the pure pieces behave.

A page added without `require_console_role(...)`, or a form that writes without
`CheckedForm`, fails here instead of shipping unprotected; so does a nav entry whose role
does not exist.
"""

from __future__ import annotations

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from router.access import ROLES
from router.errors import InvalidInput
from router.gateway.console import PAGES
from router.gateway.console.csrf import tokens_match
from router.gateway.console.deps import checked_form, get_console_session
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.forms import parse_form
from router.gateway.console.nav import NAV, visible_nav
from router.gateway.console.templating import format_age

SIGNED_IN_ONLY = {"/", "/sign-out"}
"""Pages every signed-in person may open."""
OPEN = {"/sign-in", "/static/{name}"}
"""Pages for people not signed in yet."""


def _calls(dependant: Dependant) -> set[object]:
    found: set[object] = set()
    for dependency in dependant.dependencies:
        found.add(dependency.call)
        found |= _calls(dependency)
    return found


def _routes() -> list[APIRoute]:
    return [route for page in PAGES for route in page.routes if isinstance(route, APIRoute)]


def test_every_page_declares_a_role_or_is_deliberately_open() -> None:
    unprotected = []
    for route in _routes():
        calls = _calls(route.dependant)
        roles = {getattr(call, "role", None) for call in calls} & set(ROLES)
        if route.path in OPEN:
            continue
        if not roles and not (route.path in SIGNED_IN_ONLY and get_console_session in calls):
            unprotected.append(route.path)
    assert unprotected == []
    assert _routes(), "no console pages found"


def test_every_form_that_writes_checks_its_csrf_token() -> None:
    unchecked = [route.path for route in _routes() if "POST" in route.methods
                 and route.path != "/sign-in" and checked_form not in _calls(route.dependant)]
    assert unchecked == []


def test_every_page_renders_its_errors_as_html() -> None:
    assert all(isinstance(route, ConsoleRoute) for route in _routes())


def test_the_nav_shows_each_role_its_own_areas() -> None:
    assert {item.role for item in NAV} <= set(ROLES)
    assert [item.path for item in visible_nav(["agent"])] == ["/handoffs"]
    assert [item.path for item in visible_nav(["supervisor", "agent"])] == [
        "/approvals", "/handoffs", "/policies", "/reports"]  # supervisors read those two
    assert [item.path for item in visible_nav(["admin"])] == [
        "/policies", "/experiments", "/reports"]
    assert {r for item in NAV for r in item.also} <= set(ROLES)
    assert visible_nav(["gateway"]) == []


@pytest.mark.parametrize(("expected", "presented", "match"), [
    ("abc", "abc", True), ("abc", "abd", False), ("abc", "", False), ("", "", False),
    (None, "abc", False), ("abc", None, False),
])
def test_tokens_must_be_present_and_equal(expected: str | None, presented: str | None,
                                          match: bool) -> None:
    assert tokens_match(expected, presented) is match


def test_a_form_body_is_read_as_utf8_fields() -> None:
    form = parse_form(b"note=caf%C3%A9+%3Cb%3E&decision=approve&note=second")
    assert dict(form) == {"note": "café <b>", "decision": "approve"}
    assert form.require("decision") == "approve"
    with pytest.raises(InvalidInput, match="no field 'text'"):
        form.require("text")
    with pytest.raises(InvalidInput, match="could not be read"):
        parse_form(b"note=%FF")


@pytest.mark.parametrize(("seconds", "said"), [
    (0, "0 s"), (59.9, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h"),
    (3900, "1 h 5 min"), (86400, "1 d"), (90000, "1 d 1 h"), (-5, "0 s"),
])
def test_ages_read_as_people_say_them(seconds: float, said: str) -> None:
    assert format_age(seconds) == said

"""The web console: server-rendered pages for the people around the queue, at `/console`.

Served by the gateway itself, for supervisors (held refunds), agents (the hand-off
queue), the data team (labelling: `pages/labels.py`) and admins, signed in with the API
keys and roles the API uses. What it promises and where each promise lives:

- sessions (`sessions.py`, rows in router/storage/console_sessions.py): a key typed once
  becomes a server-side session in the database; HttpOnly, SameSite=Strict, Secure
  over https; expiry; sign-out revokes the row everywhere;
- CSRF (`csrf.py`): a token on every form, the sign-in form included, and an Origin check;
- roles (`deps.py`, `nav.py`): the same rule as the API, on every page and in the nav;
- escaping (`templating.py`): Jinja2 autoescape on every template and a strict
  Content-Security-Policy (the calibration report is escaped by its own autoescaped
  templates, `pages/reports.py`);
- errors (`errors.py`): an HTML page with the stable code, never JSON or a traceback.

Pages are thin: parse the form, call one use case of the desk (or the app) with the
session's key name as `principal`, render a template. Each area is a module in `pages/`
with its own `router` (route class `ConsoleRoute`), listed in `PAGES` below, and a
`NavItem` in `nav.py`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from router.errors import NotFound
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.pages import (
    agent,
    experiments,
    labels,
    policies,
    reports,
    signin,
    static,
    supervisor,
)
from router.gateway.console.templating import CONSOLE_PREFIX

PAGES: tuple[APIRouter, ...] = (signin.router, static.router, supervisor.router, agent.router,
                                labels.router, policies.router, experiments.router,
                                reports.router)
"""Every area's router, mounted under `/console` in this order."""


def console_router() -> APIRouter:
    """Every console page under `/console`, then a 404 page for any other path there."""
    console = APIRouter(prefix=CONSOLE_PREFIX, include_in_schema=False,
                        route_class=ConsoleRoute)
    for page in PAGES:
        console.include_router(page)

    @console.api_route("/{rest:path}", methods=["GET", "POST"])
    def unknown_page(request: Request, rest: str) -> None:
        raise NotFound("there is no such console page", code="console_not_found")

    return console


__all__ = ["CONSOLE_PREFIX", "PAGES", "console_router"]

"""The console's Jinja2 environment and `render`: templates shipped in the package.

Autoescape is on for every template (they are all HTML), so customer text, addresses,
agent replies, names and labels are rendered as text by the engine, never by hand; a
value is marked safe nowhere in the console but one: the calibration report, which
`calibration.report`'s own autoescaped templates rendered (pages/reports.py). A missing
value is an error (`StrictUndefined`), not an empty cell.

Every page gets: `session` (the signed-in session, or None), `nav` (the areas its roles
may open), `csrf_token` (the token the page's forms must carry), `base` (the console's
URL prefix, behind any `root_path`), `static` (a function from a file name to its URL)
and `request`; filters `ago` (time since a timestamp), `when` (a UTC timestamp) and
`percent`. Responses carry a strict Content-Security-Policy (scripts, styles and
images from the gateway itself only, no inline script) and are never cached.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from router.gateway.console.nav import visible_nav

CONSOLE_PREFIX = "/console"

SECURITY_HEADERS = {
    # No inline script or style at all: a payload that escaped escaping still would not
    # run. Forms post only to the gateway; no page can be framed.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def format_age(seconds: float) -> str:
    """A duration as people say it: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h` (pure)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _ago(value: datetime | str | None) -> str:
    if value is None:
        return ""
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return format_age((datetime.now(UTC) - _aware(at)).total_seconds())


def _when(value: datetime | str | None) -> str:
    """A UTC timestamp to the second, as `2026-12-03 12:55:11 UTC`."""
    if value is None:
        return ""
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return _aware(at).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@cache
def environment() -> Environment:
    """The one environment (templates are compiled once per process)."""
    env = Environment(
        loader=PackageLoader("router.gateway.console", "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["ago"] = _ago
    env.filters["when"] = _when
    env.filters["percent"] = lambda value: "" if value is None else f"{100 * value:.1f} %"
    return env


def console_base(request: Request) -> str:
    """The console's URL prefix as the browser sees it (a proxy's `root_path` first)."""
    return f"{request.scope.get('root_path', '')}{CONSOLE_PREFIX}"


def page_context(request: Request) -> dict[str, Any]:
    """What every page's layout needs, from the request's session (if any)."""
    session = getattr(request.state, "console_session", None)
    base = console_base(request)
    csrf = session.csrf_token if session is not None else getattr(
        request.state, "console_presession_csrf", "")
    return {
        "request": request, "session": session, "base": base, "csrf_token": csrf,
        "nav": visible_nav(session.roles) if session is not None else [],
        "static": lambda name: f"{base}/static/{name}",
    }


def render(request: Request, template: str, *, status_code: int = 200,
           headers: dict[str, str] | None = None, **context: Any) -> HTMLResponse:
    """`templates/<template>` with the page context and `context`, as a response."""
    html = environment().get_template(template).render(page_context(request) | context)
    return HTMLResponse(html, status_code=status_code,
                        headers=SECURITY_HEADERS | (headers or {}))

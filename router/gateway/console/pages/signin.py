"""Sign-in, sign-out and the console's home page.

In open mode (no API keys configured) nobody is signed in: the sign-in page explains how
to make keys (`support-router keys new`) and the form is not shown.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from router.gateway.console.csrf import check_origin, check_token
from router.gateway.console.deps import CheckedForm, ConsoleSession
from router.gateway.console.errors import ConsoleError, ConsoleRoute, console_forbidden
from router.gateway.console.forms import read_form
from router.gateway.console.sessions import (
    PRESESSION_COOKIE,
    SESSION_COOKIE,
    clear_cookie,
    load_session,
    new_token,
    session_store,
    set_cookie,
    sign_in,
)
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.deps import ServicesDep
from router.gateway.middleware.access import get_access

router = APIRouter(route_class=ConsoleRoute)

PRESESSION_MAX_AGE_S = 3600


def _redirect(request: Request, path: str) -> RedirectResponse:
    return RedirectResponse(f"{console_base(request)}{path}", status_code=303,
                            headers=SECURITY_HEADERS)


def _sign_in_page(request: Request, *, status_code: int = 200, error: ConsoleError | None = None,
                  ) -> Response:
    """The form, with a fresh double-submit token in the page and in a cookie."""
    open_mode = get_access(request).open_mode
    token = new_token()
    request.state.console_presession_csrf = token
    response = render(request, "sign_in.html", status_code=status_code, open_mode=open_mode,
                      error=error)
    if not open_mode:
        set_cookie(request, response, PRESESSION_COOKIE, token, max_age=PRESESSION_MAX_AGE_S)
    return response


@router.get("/")
def home(request: Request, session: ConsoleSession) -> Response:
    """What the signed-in key may open."""
    return render(request, "home.html")


@router.get("/sign-in")
async def sign_in_form(request: Request) -> Response:
    access = get_access(request)
    if await load_session(request, access.keys) is not None:
        return _redirect(request, "/")
    return _sign_in_page(request)


@router.post("/sign-in")
async def sign_in_submit(request: Request, services: ServicesDep) -> Response:
    """Turn the typed key into a session, or say why not (no session is made then)."""
    access = get_access(request)
    check_origin(request)
    form = await read_form(request)
    if access.open_mode:
        raise console_forbidden("no API keys are configured, so the console signs nobody "
                                "in; make keys with `support-router keys new`",
                                code="console_open_mode")
    check_token(form, request.cookies.get(PRESESSION_COOKIE))
    if access.limiter is not None:
        # Per client address: guessing keys costs the same as calling the API with them.
        client = request.client.host if request.client else "unknown"
        wait = await access.limiter.acquire(f"console-sign-in:ip:{client}")
        if wait > 0:
            raise ConsoleError("too many sign-in attempts; wait a moment and try again",
                               code="rate_limited", status_code=429)
    try:
        token, session = await run_in_threadpool(
            sign_in, access.keys, session_store(request), form.get("key", ""),
            ttl_s=services.settings.console_session_ttl_s, now=datetime.now(UTC))
    except ConsoleError as refused:
        if refused.code != "console_unknown_key":
            raise
        return _sign_in_page(request, status_code=refused.status_code, error=refused)
    response = _redirect(request, "/")
    set_cookie(request, response, SESSION_COOKIE, token,
               max_age=int(services.settings.console_session_ttl_s))
    clear_cookie(request, response, PRESESSION_COOKIE)
    return response


@router.post("/sign-out")
async def sign_out(request: Request, session: ConsoleSession, form: CheckedForm) -> Response:
    """Revoke the session's row (every worker and host stops honouring it) and the cookie."""
    token = request.cookies.get(SESSION_COOKIE, "")
    await run_in_threadpool(session_store(request).revoke, token, now=datetime.now(UTC))
    response = _redirect(request, "/sign-in")
    clear_cookie(request, response, SESSION_COOKIE)
    return response


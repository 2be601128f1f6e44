"""The console's dependencies: the signed-in session, its role, and a checked form.

Pages declare what they need, as the API's routes do with `require_role`:

    @router.get("/approvals")
    def approvals(request: Request, session: SupervisorSession, ...) -> HTMLResponse:

    @router.post("/approvals/{operation}/decision")
    def decide(..., session: SupervisorSession, form: CheckedForm) -> Response:

`require_console_role(role)` answers a request without a live session with a redirect to
the sign-in page, one whose session lacks `role` with 403 `console_forbidden` (the
same rule as the API: router/access.py `allows`), and applies the caller's rate limit
(the API's limiter, bucket `key:<name>`). `CheckedForm` is the POST's form after its
Origin and the session's CSRF token were checked (403 `console_bad_origin`,
`console_csrf`); a page that writes must take it, so a refused POST reaches no use case.
The session's `key_name` is the principal every use case records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from router.access import ROLES
from router.gateway.console.csrf import check_origin, check_token
from router.gateway.console.errors import SignInRequired, console_forbidden
from router.gateway.console.forms import Form, read_form
from router.gateway.console.sessions import load_session
from router.gateway.middleware.access import get_access
from router.gateway.middleware.rate_limit import retry_after_seconds
from router.storage.console_sessions import ConsoleSessionRow


async def get_console_session(request: Request) -> ConsoleSessionRow:
    """The live session, or `SignInRequired`; rate-limited per key like the API."""
    access = get_access(request)
    session = await load_session(request, access.keys)
    if session is None:
        raise SignInRequired()
    if access.limiter is not None:
        wait = await access.limiter.acquire(f"key:{session.key_name}")
        if wait > 0:
            raise HTTPException(
                429, "too many requests; wait a moment and reload",
                headers={"Retry-After": str(retry_after_seconds(wait))})
    return session


ConsoleSession = Annotated[ConsoleSessionRow, Depends(get_console_session)]


def require_console_role(role: str, *also: str) -> Callable[..., Awaitable[ConsoleSessionRow]]:
    """Dependency: the session, if it holds `role` (or one of `also`, for a page other
    roles may read); 403 `console_forbidden` otherwise."""
    roles = (role, *also)
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown role {unknown[0]!r}; roles are {ROLES}")

    async def check(session: ConsoleSession) -> ConsoleSessionRow:
        if not any(r in session.roles for r in roles):
            needs = " or ".join(f"`{r}`" for r in roles)
            raise console_forbidden(f"the key {session.key_name!r} lacks the {needs} role "
                                    "this page needs")
        return session

    check.__name__ = f"require_console_{'_or_'.join(roles)}"
    check.role = role  # type: ignore[attr-defined]  # read by the test that every page has one
    return check


AgentSession = Annotated[ConsoleSessionRow, Depends(require_console_role("agent"))]
SupervisorSession = Annotated[ConsoleSessionRow, Depends(require_console_role("supervisor"))]
AdminSession = Annotated[ConsoleSessionRow, Depends(require_console_role("admin"))]
LabellerSession = Annotated[ConsoleSessionRow, Depends(require_console_role("labeller"))]
ReaderSession = Annotated[ConsoleSessionRow,
                          Depends(require_console_role("admin", "supervisor"))]
"""The policies and reports pages: admins, and supervisors reading (no forms)."""


async def checked_form(request: Request, session: ConsoleSession) -> Form:
    """The POST's form, its Origin and CSRF token checked against the session."""
    check_origin(request)
    form = await read_form(request)
    check_token(form, session.csrf_token)
    return form


CheckedForm = Annotated[Form, Depends(checked_form)]

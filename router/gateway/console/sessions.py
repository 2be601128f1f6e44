"""Console sessions: a key typed once becomes a server-side session, until sign-out.

Sign-in (`sign_in`) looks the typed key up in the same `KeyRing` as the API (sha256,
compared with every configured digest in constant time) and refuses:

- an unknown key: 401 `console_unknown_key`, and no session;
- a key whose roles are none of the console's (`gateway` only): 403 `console_forbidden`,
  and no session;
- any key in open mode (no keys configured): 403 `console_open_mode`; the sign-in page
  says how to make keys instead, because without keys there is nobody to record.

A session is a random token (256 bits) in a cookie; the database keeps only its sha256
(router/storage/console_sessions.py) with the key's name, its roles, a CSRF token of its
own and its expiry (`console_session_ttl_s`). Every request re-reads the row, so a
sign-out on one worker or host ends the session everywhere, and checks that the key is
still configured with the digest it was signed in with: its *current* roles are the
session's roles, so removing a key or a role from `SUPPORT_ROUTER_API_KEYS` takes effect
on the next page, and rotating a key (same name, new secret) ends the sessions made with
the old one.

The cookie: `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page
can make the browser send it), `Path=/console`, `Secure` when the request came over
https (directly, or from a trusted proxy's `X-Forwarded-Proto`:
router/gateway/middleware/forwarded.py), `Max-Age` the session's lifetime.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from datetime import UTC, datetime

from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool

from router.access import ApiKey, KeyRing
from router.gateway.console.errors import ConsoleError, console_forbidden
from router.gateway.console.nav import CONSOLE_ROLES
from router.gateway.console.templating import CONSOLE_PREFIX
from router.storage.console_sessions import ConsoleSessionRow, ConsoleSessionStore

SESSION_COOKIE = "sr_console_session"
PRESESSION_COOKIE = "sr_console_signin"
"""The sign-in form's double-submit CSRF token, before there is a session."""


def _now() -> datetime:
    return datetime.now(UTC)


def new_token() -> str:
    """256 bits from the OS's CSPRNG, URL-safe."""
    return secrets.token_urlsafe(32)


def console_roles(key: ApiKey) -> tuple[str, ...]:
    """The console roles `key` holds, in the console's order (pure)."""
    return tuple(role for role in CONSOLE_ROLES if role in key.roles)


def sign_in(keys: KeyRing, store: ConsoleSessionStore, presented: str, *, ttl_s: float,
            now: datetime) -> tuple[str, ConsoleSessionRow]:
    """A new session for the typed key: the cookie's token and the stored row."""
    if len(keys) == 0:
        raise console_forbidden(
            "no API keys are configured, so the console signs nobody in; make keys with "
            "`support-router keys new`", code="console_open_mode")
    key = keys.authenticate(presented.strip())
    if key is None:
        raise ConsoleError("that key is not recognised; check it and try again",
                           code="console_unknown_key", status_code=401)
    roles = console_roles(key)
    if not roles:
        raise console_forbidden(
            f"the key {key.name!r} has no console role (agent, supervisor or admin); "
            "gateway keys are for the calling systems, not for people")
    token = new_token()
    return token, store.create(token, key_name=key.name, key_sha256=key.sha256, roles=roles,
                               csrf_token=new_token(), now=now, ttl_s=ttl_s)


def live_session(keys: KeyRing, store: ConsoleSessionStore, token: str | None, *,
                 now: datetime) -> ConsoleSessionRow | None:
    """The session `token` stands for, with the key's current console roles; None when
    there is no token, the row is unknown, expired or revoked, or the key is gone or was
    rotated since (its name now has another digest)."""
    if not token:
        return None
    session = store.find(token, now=now)
    if session is None:
        return None
    key = next((k for k in keys.keys if k.name == session.key_name), None)
    if key is None or not hmac.compare_digest(key.sha256, session.key_sha256 or ""):
        return None
    roles = console_roles(key)
    if not roles:
        return None
    return session.model_copy(update={"roles": roles}) if roles != session.roles else session


def is_https(request: Request) -> bool:
    """The scheme the browser used (a trusted proxy's `X-Forwarded-Proto` applied)."""
    return request.url.scheme == "https"


def set_cookie(request: Request, response: Response, name: str, value: str, *,
               max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=_cookie_path(request),
                        secure=is_https(request), httponly=True, samesite="strict")


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(name, path=_cookie_path(request), secure=is_https(request),
                           httponly=True, samesite="strict")


def _cookie_path(request: Request) -> str:
    return f"{request.scope.get('root_path', '')}{CONSOLE_PREFIX}"


def session_store(request: Request) -> ConsoleSessionStore:
    return ConsoleSessionStore(request.app.state.services.engine)


async def load_session(request: Request, keys: KeyRing,
                       clock: Callable[[], datetime] = _now) -> ConsoleSessionRow | None:
    """The request's live session (read once per request), also kept on `request.state`."""
    if hasattr(request.state, "console_session"):
        cached: ConsoleSessionRow | None = request.state.console_session
        return cached
    token = request.cookies.get(SESSION_COOKIE)
    session = await run_in_threadpool(live_session, keys, session_store(request), token,
                                      now=clock())
    request.state.console_session = session
    if session is not None:
        request.state.principal = session.key_name
    return session

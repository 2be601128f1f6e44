"""What every request handler needs, built once per app and declared as `Annotated` aliases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials

from router.access import ROLES
from router.app.services import Services
from router.gateway.middleware.access import api_key_scheme, bearer_scheme, check_access


async def get_services(request: Request) -> Services:
    """Async on purpose: FastAPI runs a plain `def` dependency on a worker thread, a
    thread hop per request for one attribute read."""
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_principal(request: Request) -> str:
    """Who the request is from, as `require_role` authenticated it: the API key's name, or
    `anonymous@loopback` in open mode. Routes that record an actor use this, never a name
    from the body."""
    principal = getattr(request.state, "principal", None)
    if not principal:
        # Only a route without `require_role` gets here; it must not record anyone.
        raise RuntimeError("no principal: the route declares no role")
    return str(principal)


PrincipalDep = Annotated[str, Depends(get_principal)]


def require_role(role: str) -> Callable[..., Awaitable[None]]:
    """Dependency for role checks: `Depends(require_role("admin"))` on a route or router.

    The key (`Authorization: Bearer` or `X-API-Key`), its role and the caller's rate limit
    are checked in `router.gateway.middleware.access.check_access`. Async, so the check runs on the
    event loop instead of taking a threadpool slot before the handler does.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {ROLES}")

    async def check(
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
        header_key: Annotated[str | None, Depends(api_key_scheme)],
    ) -> None:
        await check_access(request, role, bearer, header_key)

    check.__name__ = f"require_{role}"
    check.role = role  # type: ignore[attr-defined]  # read by the test that every route has one
    return check

"""Who may call what: API keys, roles and the per-caller rate limit, as FastAPI glue.

Every protected route declares `Depends(require_role(...))` (router/gateway/deps.py),
which lands in `check_access` here. The order is: who are you (401), may you (403), not
too fast (429). Health, metrics and the OpenAPI docs declare no role and stay open.

Without configured keys the gateway is in *open* mode: roles are not checked, the rate
limit is per client address, and requests that reached the server on a non-loopback
address are refused. `support-router serve` already refuses to bind anything but
loopback in that mode; this check also covers `uvicorn router.gateway.asgi:app --host
0.0.0.0` run by hand.

Keys never reach logs or error bodies: messages name the header, never its value, and a
recognised caller is recorded by its key's *name* (`request.state.principal`). In open
mode the principal is `ANONYMOUS_PRINCIPAL`: the audit trail (who decided a refund, who
replied to a customer) then says that nobody was authenticated, whatever name a request
body gives.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from router.access import ApiKey, KeyRing, allows
from router.gateway.errors import error_responses
from router.gateway.middleware.rate_limit import RateLimiter, retry_after_seconds
from router.gateway.middleware.shared_rate_limit import SharedRateLimiter
from router.settings import Settings

logger = logging.getLogger(__name__)

API_KEY_HEADER = "X-API-Key"
# auto_error=False: these only read the headers (and document them in OpenAPI);
# the decisions and error bodies are ours, in the one error shape.
bearer_scheme = HTTPBearer(auto_error=False, description="`Authorization: Bearer <key>`")
api_key_scheme = APIKeyHeader(
    name=API_KEY_HEADER, auto_error=False, description="the same key, as `X-API-Key`"
)

ANONYMOUS_PRINCIPAL = "anonymous@loopback"
"""The principal of every request in open (keyless, loopback-only) mode."""

ACCESS_RESPONSES = error_responses(401, 403, 429)
"""For the protected routers' OpenAPI `responses`, so clients see these codes documented."""


@dataclass
class AccessControl:
    """The key ring and rate limiter of one app, built from its settings."""

    keys: KeyRing
    limiter: RateLimiter | SharedRateLimiter | None

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessControl:
        rate = effective_rate(settings)
        limiter: RateLimiter | SharedRateLimiter | None = None
        if rate > 0 and settings.redis_url:
            limiter = SharedRateLimiter(settings.redis_url, rate, settings.rate_limit_burst,
                                        prefix=settings.redis_prefix)
        elif rate > 0:
            limiter = RateLimiter(rate, settings.rate_limit_burst)
        return cls(KeyRing(settings.api_keys), limiter)

    @property
    def open_mode(self) -> bool:
        return len(self.keys) == 0


DEFAULT_KEYED_RATE_PER_S = 50.0


def effective_rate(settings: Settings) -> float:
    """Requests/s per caller; 0 means no limit.

    Unset, keys get 50/s and keyless (loopback-only) mode gets no limit: its callers are
    the machine's own tests, benchmarks and developer, which a per-address limit would
    only get in the way of. Set explicitly, the rate applies in both modes.
    """
    if settings.rate_limit_per_s is not None:
        return settings.rate_limit_per_s
    return DEFAULT_KEYED_RATE_PER_S if settings.api_keys else 0.0


_build_lock = threading.Lock()


def get_access(request: Request) -> AccessControl:
    """The app's access control, built on first use from the services' settings.

    Lazily, because apps built with ready-made services (tests) never run the lifespan
    in some clients; the lock makes sure one limiter exists per app.
    """
    state = request.app.state
    access = getattr(state, "access", None)
    if access is None:
        with _build_lock:
            access = getattr(state, "access", None)
            if access is None:
                access = AccessControl.from_settings(state.services.settings)
                state.access = access
    return access


def install_access(app: FastAPI) -> None:
    """Build the access control at start-up and say how requests are let in.

    At start rather than on the first request, so a bad key list fails the start and the
    operator reads the mode (open on loopback, or keyed) in the log straight away.
    """
    settings: Settings = app.state.services.settings
    app.state.access = AccessControl.from_settings(settings)
    if settings.api_keys:
        logger.info("%s", describe_mode(settings))
    else:
        logger.warning("%s", describe_mode(settings))


def describe_mode(settings: Settings) -> str:
    """One line for the start-up log: how requests are let in."""
    rate = effective_rate(settings)
    caller = "key" if settings.api_keys else "client address"
    shared = "shared in Redis" if settings.redis_url else "per worker process"
    limit = (
        f"{rate:g}/s per {caller}, burst {settings.rate_limit_burst}, {shared}" if rate > 0
        else "no rate limit"
    )
    if not settings.api_keys:
        return (
            "no API keys configured (SUPPORT_ROUTER_API_KEYS): every endpoint is open to "
            f"local clients, so the gateway only answers on loopback; {limit}"
        )
    return f"{len(settings.api_keys)} API key(s) configured; {limit}"


def is_loopback_host(host: str | None) -> bool:
    """True for loopback IP literals and `localhost`; unknown names are not loopback."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _arrived_off_loopback(request: Request) -> bool:
    """The request came in on a non-loopback interface (ASGI `server` is the local end).

    Only IP literals count: the test client's made-up "testserver" and Unix sockets
    (no address) are local by construction.
    """
    server = request.scope.get("server")
    host = server[0] if server else None
    if host is None:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not is_loopback_host(host)


def _presented_key(
    bearer: HTTPAuthorizationCredentials | None, header_key: str | None
) -> str | None:
    if bearer is not None:
        return bearer.credentials
    return header_key or None


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


async def check_access(
    request: Request,
    role: str,
    bearer: HTTPAuthorizationCredentials | None,
    header_key: str | None,
) -> None:
    """Authenticate, authorise and rate-limit one request for `role`; raise on refusal."""
    access = get_access(request)
    if access.open_mode:
        if _arrived_off_loopback(request):
            raise HTTPException(
                403,
                "no API keys are configured, so this gateway only answers on loopback; "
                "configure SUPPORT_ROUTER_API_KEYS to serve other interfaces",
            )
        request.state.principal = ANONYMOUS_PRINCIPAL
        caller = f"ip:{request.client.host if request.client else 'unknown'}"
    else:
        presented = _presented_key(bearer, header_key)
        if presented is None:
            raise _unauthorized(
                f"an API key is required: send `Authorization: Bearer <key>` "
                f"or `{API_KEY_HEADER}: <key>`"
            )
        key: ApiKey | None = access.keys.authenticate(presented)
        if key is None:
            # The route template, not the raw path (which may carry ids); never the key.
            route = getattr(request.scope.get("route"), "path", "?")
            logger.warning("rejected a request to %s: unknown API key", route)
            raise _unauthorized("the API key is not recognised")
        request.state.principal = key.name
        if not allows(key, role):
            raise HTTPException(403, f"this key lacks the `{role}` role needed here")
        caller = f"key:{key.name}"
    if access.limiter is not None:
        wait = await access.limiter.acquire(caller)
        if wait > 0:
            raise HTTPException(
                429,
                "too many requests; retry after the number of seconds in Retry-After",
                headers={"Retry-After": str(retry_after_seconds(wait))},
            )

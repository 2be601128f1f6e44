"""Errors on console pages: an HTML page with the stable code, never JSON or a traceback.

The API's handlers (router/gateway/errors.py) answer JSON; console routes use
`ConsoleRoute`, which turns the same errors into the error page with the same status
and code: our errors (`SupportRouterError`, with their own codes), form or path values
that do not validate (422 `invalid_request`), HTTP errors, a database that is away (503
`store_unavailable`) and anything unexpected (500 `internal_error`, logged with its
traceback, shown without). A page that needs a session and has none is not an error:
`SignInRequired` sends the browser to the sign-in page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from router.errors import SupportRouterError
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.errors import (
    STORE_RETRY_AFTER_S,
    describe_database_error,
    describe_validation,
    is_store_outage,
)

logger = logging.getLogger(__name__)


class ConsoleError(SupportRouterError):
    """A refusal on a console page, with its own status and stable code."""

    def __init__(self, message: str, *, code: str, status_code: int) -> None:
        super().__init__(message, code=code)
        self.status_code = status_code


def console_forbidden(message: str, code: str = "console_forbidden") -> ConsoleError:
    return ConsoleError(message, code=code, status_code=403)


class SignInRequired(Exception):
    """No live session: the browser goes to the sign-in page (303)."""


_TITLES = {
    400: "Bad request", 401: "Not signed in", 403: "Not allowed", 404: "Not found",
    409: "Already changed", 415: "Not a form", 422: "Not accepted", 429: "Too many requests",
    503: "Unavailable", 500: "Something went wrong",
}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized",
               403: "forbidden", 429: "rate_limited"}


def error_page(request: Request, status: int, code: str, message: str,
               headers: dict[str, str] | None = None) -> Response:
    """The error page for one refusal."""
    return render(request, "error.html", status_code=status, headers=headers,
                  title=_TITLES.get(status, "Error"), status=status, code=code,
                  message=message,
                  request_id=getattr(request.state, "request_id", None) or "")


def handle_console_error(request: Request, exc: Exception) -> Response:
    """The response for an exception raised by a console page or its dependencies."""
    if isinstance(exc, SignInRequired):
        return RedirectResponse(f"{console_base(request)}/sign-in", status_code=303,
                                headers=SECURITY_HEADERS)
    if isinstance(exc, SupportRouterError):
        if exc.status_code >= 500:
            logger.error("console request failed: %s (%s)", exc.code, exc.message)
        return error_page(request, exc.status_code, exc.code, exc.message)
    if isinstance(exc, RequestValidationError):
        code, message = describe_validation(exc)
        return error_page(request, 422, code, message)
    if isinstance(exc, StarletteHTTPException):
        return error_page(request, exc.status_code,
                          _HTTP_CODES.get(exc.status_code, "http_error"), str(exc.detail),
                          dict(exc.headers or {}))
    if isinstance(exc, SQLAlchemyError) and is_store_outage(exc):
        logger.error("the database is unavailable: %s", describe_database_error(exc))
        return error_page(request, 503, "store_unavailable",
                          "the database is unavailable; nothing was done, try again in "
                          f"{STORE_RETRY_AFTER_S} s",
                          {"Retry-After": str(STORE_RETRY_AFTER_S)})
    logger.exception("unexpected error on a console page")
    return error_page(request, 500, "internal_error", "internal error; see server logs")


class ConsoleRoute(APIRoute):
    """A route whose failures (its dependencies' too) render the console's error page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a page
                return handle_console_error(request, exc)

        return handle

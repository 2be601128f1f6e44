"""One JSON error shape for every failure: `{"error": {"code", "message", "request_id"}}`.

Every error the API can produce goes through here, so clients can rely on a stable
`code` and nothing ever answers with a traceback.

A database that cannot be reached, or whose schema is not the one this code expects
(dropped, recreated empty, not migrated), answers 503 `store_unavailable` with a
`Retry-After`, on every endpoint: the request may succeed later, and nothing of it was
done. Its log line names the error's class and SQLSTATE only: a driver's message can
quote the values of the statement (a unique violation's DETAIL does), and those are
customer data. The engine hides bound parameters too (router/storage/db.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from router.errors import SupportRouterError
from router.gateway.schemas import CUSTOM_ERROR_CODES, ErrorOut

logger = logging.getLogger(__name__)

_DESCRIPTIONS = {
    400: "the body is not UTF-8 JSON (`invalid_json`, `invalid_encoding`) or nests too deep "
         "(`json_too_deep`)",
    401: "missing or unknown API key (`unauthorized`)",
    403: "the key lacks the role this endpoint needs (`forbidden`), or a policy forbids it",
    404: "no such case, operation or experiment (`not_found`, `unknown_case`, "
         "`unknown_operation`, `unknown_experiment`)",
    408: "the body did not arrive within `body_timeout_s` (`body_timeout`); the connection "
         "is closed",
    409: "conflicts with the current state (`conflict` and more specific codes)",
    413: "the body is larger than `max_body_bytes` (`body_too_large`)",
    414: "the request target is longer than `max_request_line_bytes` (`uri_too_long`)",
    415: "the body is not sent as `application/json` (`unsupported_media_type`)",
    422: "the JSON does not fit the request model (`invalid_request`, `empty_text`, "
         "`text_too_long`, `control_characters`, …), a policy would not route "
         "(`invalid_policy`), or an experiment does not validate or load "
         "(`invalid_experiment`, `invalid_variant`)",
    429: "rate limit exceeded (`rate_limited`), see `Retry-After`",
    431: "more header fields than `max_header_count` (`too_many_headers`)",
    503: "the gateway is starting (`starting`), or a dependency is unavailable "
         "(`store_unavailable`, `model_unavailable`, `store_error`); see `Retry-After`",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for these statuses, each with the one error model.

    Declared so that clients (and the schemathesis test) see every status the gateway can
    answer with, and that FastAPI's default 422 schema (`{"detail": [...]}`, a shape we
    never send) is replaced by ours.
    """
    return {status: {"model": ErrorOut, "description": _DESCRIPTIONS[status]}
            for status in statuses}


ERROR_RESPONSES = error_responses(400, 408, 413, 414, 415, 422, 431, 503)
"""Every route: bodies and parameters are checked (middleware/body_limits.py, validation),
and every route answers 503 while the gateway starts or the database is away."""

STORE_RETRY_AFTER_S = 5

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def error_response(
    request: Request, status: int, code: str, message: str,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    request_id = getattr(request.state, "request_id", None) or uuid.uuid4().hex
    body = {"error": {"code": code, "message": message, "request_id": request_id}}
    return JSONResponse(body, status_code=status, headers=headers)


def describe_validation(exc: RequestValidationError) -> tuple[str, str]:
    """The stable code and a message naming the first field at fault."""
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    if first.get("type") == "json_invalid":
        return "invalid_json", "the request body is not valid JSON"
    if first.get("type") in CUSTOM_ERROR_CODES:
        return first["type"], first["msg"]
    where = f"field '{location}'" if location else "the request body"
    return "invalid_request", f"{where}: {first.get('msg', 'invalid value')}"


def refusing_route(refuse: Callable[[str], SupportRouterError]) -> type[APIRoute]:
    """A route class whose body that does not fit its model is refused with `refuse(message
    naming the field)` (say 422 `invalid_policy`) instead of `invalid_request`, so that a
    client can tell a refused artifact from a malformed request; bad JSON stays 400."""

    class RefusingRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def handle(request: Request) -> Response:
                try:
                    return await handler(request)
                except RequestValidationError as exc:
                    code, message = describe_validation(exc)
                    if code == "invalid_json":
                        raise
                    raise refuse(message) from None

            return handle

    return RefusingRoute


def is_store_outage(exc: SQLAlchemyError) -> bool:
    """The database is away or not the expected schema (retry), not a refused statement.

    Connection failures, missing tables or columns (`OperationalError`,
    `ProgrammingError`, …), a pool that has no connection to give: an outage. A statement
    the database refused for its values (`IntegrityError`, `DataError`) is a bug or a
    conflict, not something a retry fixes.
    """
    if isinstance(exc, IntegrityError | DataError):
        return False
    return isinstance(exc, DBAPIError | DisconnectionError | PoolTimeout)


def describe_database_error(exc: SQLAlchemyError) -> str:
    """The error's class, the driver's class and its error code: never a message or a
    value."""
    described = type(exc).__name__
    original = getattr(exc, "orig", None)
    if original is not None:
        described += f" ({type(original).__name__}"
        sqlstate = getattr(original, "sqlstate", None)  # psycopg
        if sqlstate:
            described += f", SQLSTATE {sqlstate}"
        elif getattr(original, "sqlite_errorname", None):
            described += f", {original.sqlite_errorname}"
        described += ")"
    return described


def install_error_handlers(
    app: FastAPI, *,
    pages: tuple[str, Callable[[Request, Exception], Response]] | None = None,
) -> None:
    """JSON error bodies for the API; with `pages` (a path prefix and a handler), the
    HTTP errors raised by routing below that prefix (a 405 for a wrong method) get the
    handler's page instead, as the pages' own failures do."""

    @app.exception_handler(SupportRouterError)
    async def _ours(request: Request, exc: SupportRouterError) -> JSONResponse:
        if exc.status_code >= 500:
            logger.error("request failed: %s (%s)", exc.code, exc.message)
        return error_response(request, exc.status_code, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        code, message = describe_validation(exc)
        status = 400 if code == "invalid_json" else 422
        return error_response(request, status, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if pages is not None and request.url.path.startswith(pages[0]):
            return pages[1](request, exc)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(request, exc.status_code, code, str(exc.detail), exc.headers)

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        if is_store_outage(exc):
            logger.error("the database is unavailable: %s", describe_database_error(exc))
            return error_response(
                request, 503, "store_unavailable",
                "the database is unavailable or its schema is not current; nothing was "
                f"done, retry after {STORE_RETRY_AFTER_S} s",
                {"Retry-After": str(STORE_RETRY_AFTER_S)})
        logger.error("the database refused a statement: %s", describe_database_error(exc))
        return error_response(request, 500, "internal_error", "internal error; see server logs")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error")
        # Starlette answers this one outside every middleware, so the request-id
        # middleware never sees the response: the header is set here.
        request_id = getattr(request.state, "request_id", None)
        headers = {"X-Request-ID": request_id} if request_id else None
        return error_response(
            request, 500, "internal_error", "internal error; see server logs", headers
        )

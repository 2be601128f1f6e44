"""One JSON error shape for every failure: `{"error": {"code", "message", "request_id"}}`.

Every error the API can produce goes through here, so clients can rely on a stable
`code` and nothing ever answers with a traceback.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from router.errors import SupportRouterError
from router.gateway.schemas import CUSTOM_ERROR_CODES, ErrorOut

logger = logging.getLogger(__name__)

_DESCRIPTIONS = {
    400: "the body is not UTF-8 JSON (`invalid_json`, `invalid_encoding`) or nests too deep "
         "(`json_too_deep`)",
    401: "missing or unknown API key (`unauthorized`)",
    403: "the key lacks the role this endpoint needs (`forbidden`), or a policy forbids it",
    404: "no such case or operation (`not_found`, `unknown_case`, `unknown_operation`)",
    409: "conflicts with the current state (`conflict` and more specific codes)",
    413: "the body is larger than `max_body_bytes` (`body_too_large`)",
    415: "the body is not sent as `application/json` (`unsupported_media_type`)",
    422: "the JSON does not fit the request model (`invalid_request`, `empty_text`, "
         "`text_too_long`, `control_characters`, …)",
    429: "rate limit exceeded (`rate_limited`), see `Retry-After`",
    503: "a dependency is unavailable (`model_unavailable`, `store_error`)",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for these statuses, each with the one error model.

    Declared so that clients (and the schemathesis test) see every status the gateway can
    answer with, and that FastAPI's default 422 schema (`{"detail": [...]}`, a shape we
    never send) is replaced by ours.
    """
    return {status: {"model": ErrorOut, "description": _DESCRIPTIONS[status]}
            for status in statuses}


ERROR_RESPONSES = error_responses(400, 413, 415, 422)
"""Every route: bodies and parameters are checked (middleware/body_limits.py, validation)."""

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


def _describe_validation(exc: RequestValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    if first.get("type") == "json_invalid":
        return "invalid_json", "the request body is not valid JSON"
    if first.get("type") in CUSTOM_ERROR_CODES:
        return first["type"], first["msg"]
    where = f"field '{location}'" if location else "the request body"
    return "invalid_request", f"{where}: {first.get('msg', 'invalid value')}"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SupportRouterError)
    async def _ours(request: Request, exc: SupportRouterError) -> JSONResponse:
        if exc.status_code >= 500:
            logger.error("request failed: %s (%s)", exc.code, exc.message)
        return error_response(request, exc.status_code, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        code, message = _describe_validation(exc)
        status = 400 if code == "invalid_json" else 422
        return error_response(request, status, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(request, exc.status_code, code, str(exc.detail), exc.headers)

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

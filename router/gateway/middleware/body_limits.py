"""Request limits that hold before any endpoint sees a request: head, body size and time,
media type, encoding, depth.

Why a pure ASGI middleware and not FastAPI validation:

- **Size** has to be enforced while the body streams in. FastAPI reads the whole body into
  memory before validating it, so a 1 GB upload would be buffered first and refused after.
  Here a declared `Content-Length` above `max_body_bytes` is refused before a byte is
  read, and a chunked (or lying) body is refused as soon as the running total passes the
  limit; at most `max_body_bytes` are ever held.
- **JSON depth** has to be checked before the JSON is parsed: a deeply nested document
  costs the parser recursion (and a `RecursionError` would be a 500). The depth is found
  by one linear scan over the text.
- **Time**: the body must arrive within `body_timeout_s` of the head (408, and the
  connection is closed), so a client that declares a body and sends it a byte at a
  time, or not at all, holds a connection for seconds, not for ever. The server closes
  connections whose head is unfinished (router/gateway/server.py); a body is the app's
  to read, so its clock is here.
- **Head**: the server bounds the request line and headers together; the request target
  (414 `uri_too_long`) and the number of header fields (431 `too_many_headers`) get the
  operator's narrower limits here.
- **Media type and encoding**: bodies are JSON, except under `form_path_prefixes` (the
  web console), whose bodies are URL-encoded UTF-8 forms. FastAPI quietly treats a
  non-JSON content type as raw bytes (and then reports a confusing "not a dictionary"),
  and the JSON parser accepts UTF-16/32 bodies, `NaN`/`Infinity` and escaped lone
  surrogates (which later fail to encode when the text is written to the database). Each
  is refused here with its own stable code instead.

Every refusal uses the one error shape of `router.gateway.errors` (under
`form_path_prefixes`, the `form_error` page the app passes in: the console's HTML error
page with the same status and code), happens before routing, so nothing is written and
no decision is made or logged. A body that passes is replayed to the app unchanged.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router.gateway.errors import error_response
from router.settings import Settings

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
ErrorPage = Callable[[Request, int, str, str, dict[str, str] | None], Response]
"""(request, status, code, message, headers) → the refusal, as `error_response` takes them."""
JSON_CHARSETS = frozenset({"utf-8", "utf8"})
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class BadBody(Exception):
    """One reason to refuse a request body, as (status, stable code, message)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json` or `application/<x>+json`, with no charset or a UTF-8 one."""
    if not content_type:
        return False
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    if not (media == "application/json" or
            (media.startswith("application/") and media.endswith("+json"))):
        return False
    for param in params:
        name, _, value = param.partition("=")
        if name.strip() == "charset" and value.strip().strip('"') not in JSON_CHARSETS:
            return False
    return True


def json_depth_exceeds(text: str, max_depth: int) -> bool:
    """Whether objects/arrays nest deeper than `max_depth`, ignoring brackets in strings.

    A linear scan that never recurses, so it is safe on any input (valid JSON or not).
    Nesting can go no deeper than the number of opening brackets, so a body with few of
    them (every ordinary request) is answered by two counts in C, not a Python loop over
    every character.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _strings(value: Any) -> Iterable[str]:
    """Every string in a parsed JSON value, keys included (iteratively: depth is bounded,
    but a wide document should not cost recursion either)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"


def check_form_body(content_type: str | None, body: bytes) -> None:
    """A browser form's body (the console's pages): URL-encoded, UTF-8."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media != FORM_MEDIA_TYPE:
        raise BadBody(415, "unsupported_media_type",
                      f"send the form as Content-Type: {FORM_MEDIA_TYPE} "
                      f"(got {content_type or 'none'})")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBody(400, "invalid_encoding", "the form body is not UTF-8") from None


def check_json_body(content_type: str | None, body: bytes, *, max_depth: int) -> None:
    """Raise `BadBody` unless `body` is UTF-8 JSON of acceptable depth, sent as JSON."""
    if not is_json_media_type(content_type):
        raise BadBody(
            415, "unsupported_media_type",
            f"send the body as Content-Type: application/json (got {content_type or 'none'})",
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBody(400, "invalid_encoding",
                      f"the request body is not valid UTF-8 (byte {exc.start})") from None
    if json_depth_exceeds(text, max_depth):
        raise BadBody(400, "json_too_deep",
                      f"the JSON nests deeper than {max_depth} objects or arrays")
    try:
        parsed = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, and NaN/Infinity from _reject_constant
        raise BadBody(400, "invalid_json", f"the request body is not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text):
        for string in _strings(parsed):
            try:
                string.encode("utf-8")
            except UnicodeEncodeError:
                raise BadBody(400, "invalid_encoding",
                              "the JSON contains an escaped lone surrogate (\\ud800-\\udfff), "
                              "which is not a character") from None


@dataclass(frozen=True)
class Limits:
    """The limits one app enforces, from its settings."""

    max_body_bytes: int
    max_json_depth: int
    max_request_line_bytes: int
    max_header_count: int
    body_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(settings.max_body_bytes, settings.max_json_depth,
                   settings.max_request_line_bytes, settings.max_header_count,
                   settings.body_timeout_s)


DEFAULT_LIMITS = Limits(*(Settings.model_fields[name].default for name in (
    "max_body_bytes", "max_json_depth", "max_request_line_bytes", "max_header_count",
    "body_timeout_s")))
"""The settings' defaults, for an app whose settings are not loaded yet."""


class RequestLimits:
    """ASGI middleware: refuse oversized heads, slow, oversized, non-JSON, badly encoded or
    too-deep bodies.

    The limits are the running app's settings (`max_body_bytes`, `max_json_depth`,
    `max_request_line_bytes`, `max_header_count`, `body_timeout_s`), taken from
    `app.state.services` once it exists, because the app is built before its settings
    are loaded (they are loaded in the lifespan). Explicit values override them.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int | None = None,
                 max_json_depth: int | None = None,
                 form_path_prefixes: tuple[str, ...] = (),
                 form_error: ErrorPage | None = None) -> None:
        self.app = app
        # Paths whose bodies are browser forms, not JSON (the console's pages), and the
        # page their refusals are (a person reads it in a browser, not a client).
        self.form_path_prefixes = form_path_prefixes
        self.form_error = form_error
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self._resolved: Limits | None = None

    def _limits(self, scope: Scope) -> Limits:
        if self._resolved is not None:
            return self._resolved
        services = getattr(getattr(scope.get("app"), "state", None), "services", None)
        settings = getattr(services, "settings", None)
        limits = Limits.from_settings(settings) if settings is not None else DEFAULT_LIMITS
        limits = replace(limits, max_body_bytes=self.max_body_bytes or limits.max_body_bytes,
                         max_json_depth=self.max_json_depth or limits.max_json_depth)
        if settings is not None:
            self._resolved = limits  # settings do not change while an app runs
        return limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self._limits(scope)
        headers = Headers(scope=scope)
        extra_headers: dict[str, str] | None = None
        is_form = bool(self.form_path_prefixes) and \
            scope["path"].startswith(self.form_path_prefixes)
        try:
            _check_head(scope, limits)
            _check_declared_length(headers.get("content-length"), limits.max_body_bytes)
            if scope["method"] not in BODY_METHODS:
                await self.app(scope, receive, send)
                return
            try:
                async with asyncio.timeout(limits.body_timeout_s):
                    body = await _read_body(receive, limits.max_body_bytes)
            except TimeoutError:
                # The rest of the body may still come: the connection cannot be reused.
                extra_headers = {"Connection": "close"}
                raise BadBody(408, "body_timeout",
                              f"the request body did not arrive within "
                              f"{limits.body_timeout_s:g} s") from None
            if body is None:  # the client went away while sending; nobody to answer
                return
            if body and is_form:
                check_form_body(headers.get("content-type"), body)
            elif body:
                check_json_body(headers.get("content-type"), body,
                                max_depth=limits.max_json_depth)
        except BadBody as bad:
            page = self.form_error if is_form and self.form_error is not None \
                else error_response
            response = page(Request(scope), bad.status, bad.code, bad.message,
                            extra_headers)
            await response(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _check_head(scope: Scope, limits: Limits) -> None:
    """The request target and the number of header fields, within the app's limits.

    The server has already bounded both (the whole head fits in its buffer); these are
    the narrower limits an operator set.
    """
    target = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
    if target > limits.max_request_line_bytes:
        raise BadBody(414, "uri_too_long",
                      f"the request target is longer than the limit of "
                      f"{limits.max_request_line_bytes} bytes")
    if len(scope["headers"]) > limits.max_header_count:
        raise BadBody(431, "too_many_headers",
                      f"the request has more than {limits.max_header_count} header fields")


def _too_large(max_bytes: int) -> BadBody:
    return BadBody(413, "body_too_large",
                   f"the request body is larger than the limit of {max_bytes} bytes")


def _check_declared_length(declared: str | None, max_bytes: int) -> None:
    if declared is None:
        return
    if not re.fullmatch(r"[0-9]+", declared.strip()):  # str.isdigit() also takes "²"
        raise BadBody(400, "bad_request", "Content-Length is not a number")
    if int(declared) > max_bytes:
        raise _too_large(max_bytes)


async def _read_body(receive: Receive, max_bytes: int) -> bytes | None:
    """The whole body, or `BadBody` as soon as it passes the limit (never buffered past)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then defers to the server
    (so the app still hears about a client disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay

"""Bad input through the real app: every case is a 4xx with a stable code, and writes nothing.

One table of (body, headers, expected status, expected code). Each row is sent to the
customer endpoints (`POST /v1/route`, `POST /v1/messages`), a supervisor endpoint
(`POST /v1/approvals/{operation}/decision`) and an agent endpoint with customer-visible text
(`POST /v1/handoffs/{case_id}/reply`); the text rows go to the endpoints that take text.
Each row checks the one error shape, the request id, and that no table gained a row (no
decision, case, message or refund). The streaming size limit is checked at the ASGI level
with a body that would never end, so "refused while streaming" is observable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import pytest
from fastapi.testclient import TestClient

from router.gateway.app import create_app
from router.gateway.middleware.body_limits import json_depth_exceeds
from router.gateway.schemas import MAX_TEXT_CHARS
from router.settings import Settings
from tests.tables import row_counts

JSON = {"content-type": "application/json"}
MAX_BODY = Settings.model_fields["max_body_bytes"].default
MAX_DEPTH = Settings.model_fields["max_json_depth"].default

# path, a valid body, and the text field (None: the endpoint takes no customer text).
ENDPOINTS: dict[str, tuple[str, dict, str | None]] = {
    "route": ("/v1/route", {"text": "Please refund my broken kettle, O-1001"}, "text"),
    "messages": ("/v1/messages", {"text": "Please refund my broken kettle, O-1001"}, "text"),
    "approval": ("/v1/approvals/op-unknown/decision",
                 {"decision": "approve", "supervisor": "maria"}, None),
    "handoff_reply": ("/v1/handoffs/c-unknown/reply",
                      {"agent": "sam", "text": "Your parcel is on its way."}, "text"),
}
TEXT_ENDPOINTS = [name for name, (_, _, text_field) in ENDPOINTS.items() if text_field]


def _nested(depth: int) -> object:
    """A value that is `depth` arrays deep: `[[[...]]]`."""
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()


@dataclass(frozen=True)
class Row:
    """One bad request: `body(valid_body)` gives its bytes, sent with `headers`."""

    name: str
    body: Callable[[dict], bytes]
    status: int
    code: str
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))
    text_only: bool = False


def _with_text(text: str) -> Callable[[dict], bytes]:
    return lambda valid: _dumps({**valid, "text": text})


ROWS = [
    # size
    Row("body_over_limit", lambda v: _dumps({**v, "pad": "x" * MAX_BODY}),
        413, "body_too_large"),
    Row("declared_length_over_limit", _dumps, 413, "body_too_large",
        headers={**JSON, "content-length": str(MAX_BODY + 1)}),
    # media type
    Row("text_plain", _dumps, 415, "unsupported_media_type",
        headers={"content-type": "text/plain"}),
    Row("form_encoded", lambda v: b"text=hello", 415, "unsupported_media_type",
        headers={"content-type": "application/x-www-form-urlencoded"}),
    Row("no_content_type", _dumps, 415, "unsupported_media_type", headers={}),
    Row("json_latin1_charset", _dumps, 415, "unsupported_media_type",
        headers={"content-type": "application/json; charset=latin-1"}),
    # syntax and encoding
    Row("invalid_json", lambda v: b'{"text": "unterminated', 400, "invalid_json"),
    Row("trailing_garbage", lambda v: _dumps(v) + b" }", 400, "invalid_json"),
    Row("nan_is_not_json", lambda v: b'{"text": NaN}', 400, "invalid_json"),
    Row("not_utf8", lambda v: b'{"text": "caf\xe9 \xff"}', 400, "invalid_encoding"),
    Row("utf16", lambda v: json.dumps(v).encode("utf-16"), 400, "invalid_encoding"),
    Row("lone_surrogate_escape", lambda v: b'{"text": "hi \\ud800 there"}', 400,
        "invalid_encoding"),
    # depth: the outer object is level 1
    Row("too_deep", lambda v: _dumps({**v, "x": _nested(MAX_DEPTH)}), 400, "json_too_deep"),
    Row("deep_but_allowed_then_unknown_field",
        lambda v: _dumps({**v, "x": _nested(MAX_DEPTH - 1)}), 422, "invalid_request"),
    # shape
    Row("empty_body", lambda v: b"", 422, "invalid_request"),
    Row("array_body", lambda v: b"[]", 422, "invalid_request"),
    # customer text
    Row("empty_text", _with_text(""), 422, "empty_text", text_only=True),
    Row("whitespace_text", _with_text(" \n\t\u00a0\u3000 "), 422, "empty_text", text_only=True),
    Row("nul", _with_text("refund\x00me"), 422, "control_characters", text_only=True),
    Row("escape_sequence", _with_text("\x1b[31mrefund\x1b[0m"), 422, "control_characters",
        text_only=True),
    Row("c1_control", _with_text("refund\x85me"), 422, "control_characters", text_only=True),
    Row("text_too_long", _with_text("x" * (MAX_TEXT_CHARS + 1)), 422, "text_too_long",
        text_only=True),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_is_refused_with_a_stable_code_and_writes_nothing(
    client: TestClient, row: Row
) -> None:
    engine = client.app.state.services.engine
    before = row_counts(engine)
    for name in TEXT_ENDPOINTS if row.text_only else ENDPOINTS:
        path, valid, _ = ENDPOINTS[name]
        response = client.post(path, content=row.body(valid), headers=row.headers)
        assert (response.status_code, response.headers["content-type"]) == (
            row.status, "application/json"), (name, response.text)
        error = response.json()["error"]
        assert error["code"] == row.code, (name, error)
        assert error["message"], name
        assert error["request_id"] == response.headers["x-request-id"], name
    assert row_counts(engine) == before


def test_the_valid_bodies_of_the_table_are_accepted(client: TestClient) -> None:
    """The rows differ from these bodies only by the fault, so the faults are what's refused."""
    statuses = {name: client.post(path, content=_dumps(valid), headers=JSON).status_code
                for name, (path, valid, _) in ENDPOINTS.items()}
    # The approval and the hand-off name things that do not exist: well-formed, not found.
    assert statuses == {"route": 200, "messages": 200, "approval": 404, "handoff_reply": 404}


def test_json_content_types_with_a_suffix_or_utf8_charset_are_accepted(
    client: TestClient,
) -> None:
    path, valid, _ = ENDPOINTS["route"]
    for content_type in ("application/json; charset=UTF-8", "application/merge-patch+json"):
        response = client.post(path, content=_dumps(valid), headers={"content-type": content_type})
        assert response.status_code == 200, (content_type, response.text)


def test_body_size_is_enforced_while_streaming(client: TestClient) -> None:
    """A chunked body with no Content-Length that never ends is cut off just past the limit.

    Driven at the ASGI level, so we can count how much of the body the app asked for: a
    server that buffered the whole body first would read all of it.
    """
    chunk = b"x" * 4096
    total_chunks = 10_000  # 40 MB if read to the end
    read: list[int] = []
    sent: list[dict] = []

    async def receive() -> dict:
        read.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": len(read) < total_chunks}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/route", "raw_path": b"/v1/route", "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/json"),
                                     (b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {},
    }
    engine = client.app.state.services.engine
    before = row_counts(engine)
    anyio.run(client.app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert start["status"] == 413
    assert json.loads(body)["error"]["code"] == "body_too_large"
    assert sum(read) <= MAX_BODY + len(chunk)
    assert row_counts(engine) == before


def test_limits_come_from_settings(settings: Settings) -> None:
    """`max_body_bytes` and `max_json_depth` are settings, read by the running app."""
    small = settings.model_copy(update={"max_body_bytes": 2048, "max_json_depth": 3})
    with TestClient(create_app(small)) as small_client:
        too_big = small_client.post("/v1/route", json={"text": "x" * 3000})
        too_deep = small_client.post("/v1/route", json={"text": "hi", "x": [[[0]]]})
        fine = small_client.post("/v1/route", json={"text": "refund my kettle"})
    assert too_big.status_code == 413
    assert (too_deep.status_code, too_deep.json()["error"]["code"]) == (400, "json_too_deep")
    assert fine.status_code == 200


def test_brackets_inside_strings_do_not_count_as_depth(client: TestClient) -> None:
    text = "[{" * MAX_DEPTH + ' \\" ' + "refund my kettle"
    response = client.post("/v1/route", json={"text": text})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("text", "max_depth", "exceeds"),
    [
        ("[" * 4 + "]" * 4, 3, True),
        ("[" * 3 + "]" * 3, 3, False),
        ("[" + "[]," * 50 + "[]]", 3, False),  # many brackets, two levels
        ('{"a": "[[[[[[", "b": [[1]]}', 3, False),  # brackets in a string do not nest
        ('{"a": "\\"[[[[", "b": [[[1]]]}', 3, True),  # an escaped quote ends no string
    ],
)
def test_json_depth_counts_nesting_not_brackets(text: str, max_depth: int, exceeds: bool) -> None:
    assert json_depth_exceeds(text, max_depth) is exceeds

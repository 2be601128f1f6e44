"""Structured logs through the real app: JSON lines, the request id, customer data masked.

The served app (`router.gateway.asgi`, i.e. `create_app(json_logs=True)`) installs the
JSON handler on the root logger while it runs; the handler writes to whatever `sys.stderr`
is at the time, so `capsys` sees exactly the lines an operator would.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from router.gateway.app import create_app
from router.settings import Settings
from router.telemetry.logs import JsonFormatter, JsonLogHandler, excerpt, mask
from tests.messages import ANA, TEAPOT
from tests.servers import GatewayProcess

REQUEST_FIELDS = {"ts", "level", "logger", "message", "request_id", "method", "path", "status",
                  "duration_ms"}


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The real app as it is served: with JSON logs (this module's own `client`)."""
    with TestClient(create_app(settings, json_logs=True)) as test_client:
        yield test_client


def json_lines(text: str) -> list[dict]:
    """Every line must be one JSON object (uvicorn's or anyone's plain text would fail)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def access_line(lines: list[dict], request_id: str) -> dict:
    (line,) = [x for x in lines if x["logger"] == "router.requests"
               and x["request_id"] == request_id]
    return line


def test_access_line_is_json_with_the_request_id_of_the_response(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    response = client.post("/v1/route", json={"text": TEAPOT, "kind": "refund"})
    missing = client.get("/v1/cases/case-does-not-exist")
    lines = json_lines(capsys.readouterr().err)

    line = access_line(lines, response.headers["X-Request-ID"])
    assert set(line) == REQUEST_FIELDS
    assert (line["level"], line["method"], line["path"], line["status"]) == (
        "INFO", "POST", "/v1/route", 200)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert datetime.fromisoformat(line["ts"]).tzinfo is not None
    assert response.json()["request_id"] == line["request_id"]

    other = access_line(lines, missing.headers["X-Request-ID"])
    assert (other["path"], other["status"]) == ("/v1/cases/{case_id}", 404)
    assert "case-does-not-exist" not in json.dumps(other)


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("lb-7f3a.01_X", True), ("x" * 64, True), ("x" * 65, False), ("has space", False),
     ("semi;colon", False), ("", False)],
)
def test_incoming_request_id_is_logged_only_when_sane(
    client: TestClient, capsys: pytest.CaptureFixture[str], sent: str, kept: bool
) -> None:
    capsys.readouterr()
    response = client.get("/healthz", headers={"X-Request-ID": sent})
    returned = response.headers["X-Request-ID"]
    assert returned != sent and len(returned) == 32 and int(returned, 16) >= 0
    line = access_line(json_lines(capsys.readouterr().err), returned)
    assert line.get("client_request_id") == (sent if kept else None)


def test_a_repeated_client_request_id_cannot_collide_in_the_decision_log(
    client: TestClient,
) -> None:
    headers = {"X-Request-ID": "retry-1"}
    first = client.post("/v1/route", json={"text": TEAPOT}, headers=headers)
    again = client.post("/v1/route", json={"text": TEAPOT}, headers=headers)
    message = client.post("/v1/messages", json={"text": TEAPOT}, headers=headers)
    assert [r.status_code for r in (first, again, message)] == [200, 200, 200]
    ids = {first.json()["request_id"], again.json()["request_id"],
           message.json()["decision"]["request_id"]}
    assert len(ids) == 3


def test_error_body_carries_the_same_request_id(client: TestClient) -> None:
    response = client.post("/v1/route", json={"text": ""}, headers={"X-Request-ID": "err-1"})
    assert response.status_code == 422
    assert response.json()["error"]["request_id"] == response.headers["X-Request-ID"]


def test_customer_data_is_masked_by_default(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    response = client.post("/v1/messages",
                           json={"text": TEAPOT, "kind": "refund", "customer": ANA})
    assert response.json()["status"] == "resolved"
    out = capsys.readouterr().err
    lines = json_lines(out)
    # The refund service logs the operation deep inside the handler, in the threadpool:
    # the contextvar still carries this request's id there.
    (refund,) = [x for x in lines if x["logger"] == "handlers.services.refunds"]
    assert refund["request_id"] == response.headers["X-Request-ID"]
    assert "order [id]" in refund["message"]
    for secret in ("O-1001", "ana.novak@example.com", "ceramic teapot"):
        assert secret not in out


def test_retention_setting_lets_customer_data_through(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    allowed = settings.model_copy(update={"log_customer_data": True})
    with TestClient(create_app(allowed, json_logs=True)) as client:
        capsys.readouterr()
        client.post("/v1/messages", json={"text": TEAPOT, "kind": "refund", "customer": ANA})
        lines = json_lines(capsys.readouterr().err)
    (refund,) = [x for x in lines if x["logger"] == "handlers.services.refunds"]
    assert "order O-1001" in refund["message"]


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("no account for ben.ortiz@example.com (order #O-2002)")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("handlers.test", logging.WARNING, __file__, 1, message, args,
                             exc_info)


def test_formatter_masks_message_extra_fields_and_tracebacks() -> None:
    record = _record("customer %s asked about o1002, О-1003 and A-100", "ana@example.com",
                     exc=True)
    record.customer = "ana@example.com"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "customer [email] asked about [id], [id] and [id]"
    assert line["customer"] == "[email]"
    assert "ben.ortiz" not in line["exc_info"] and "O-2002" not in line["exc_info"]
    assert "ValueError" in line["exc_info"]

    shown = json.loads(JsonFormatter(mask_customer_data=False).format(record))
    assert shown["message"] == "customer ana@example.com asked about o1002, О-1003 and A-100"


def test_masking_leaves_ids_that_are_not_customer_data_alone() -> None:
    text = "model local-tfidf-lr@2904b577c9eb policy local-default-9cf435f2 case case-9f3a"
    assert mask(text) == text
    assert excerpt(TEAPOT, limit=40) == "Hi, this is [email]. My ceramic teapot (…"


def test_long_messages_are_cut() -> None:
    line = json.loads(JsonFormatter().format(_record("x" * 9000)))
    assert len(line["message"]) < 4100 and line["message"].endswith("more characters]")


@pytest.fixture
def served(cli_env: Settings, tmp_path: Path) -> Iterator[GatewayProcess]:
    """`support-router serve` as a real process on loopback, stderr to a file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMETHEUS_MULTIPROC")}
    with GatewayProcess() as server:
        server.start(env, [], tmp_path / "serve.log")
        server.wait_ready(60)
        yield server


def test_serve_writes_only_json_lines_and_one_access_line_per_request(
    served: GatewayProcess,
) -> None:
    log = served.log
    response = httpx.post(f"{served.url}/v1/route", json={"text": TEAPOT},
                          headers={"X-Request-ID": "served-1"}, timeout=10)
    request_id = response.headers["X-Request-ID"]
    deadline = time.monotonic() + 10  # the line is written just after the response
    while request_id not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = json_lines(log.read_text())  # the server's start-up lines included
    assert any(x["request_id"] is None for x in lines)  # logged outside any request
    requests = [x for x in lines if x["request_id"] == request_id]
    assert [x["logger"] for x in requests] == ["router.requests"]
    assert requests[0]["client_request_id"] == "served-1"
    assert requests[0]["path"] == "/v1/route" and requests[0]["status"] == 200


def test_an_unexpected_error_is_logged_with_the_request_id_and_masked(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(settings, json_logs=True)

    def broken() -> None:
        raise RuntimeError("lookup failed for ana.novak@example.com")

    app.add_api_route("/v1/broken", broken)  # a bug in an endpoint, as the app sees one
    with TestClient(app, raise_server_exceptions=False) as client:
        capsys.readouterr()
        response = client.get("/v1/broken", headers={"X-Request-ID": "boom-1"})
        out = capsys.readouterr().err
    assert response.status_code == 500
    request_id = response.json()["error"]["request_id"]
    assert response.headers["X-Request-ID"] == request_id
    lines = [x for x in json_lines(out) if x["request_id"] == request_id]
    assert {x["client_request_id"] for x in lines} == {"boom-1"}
    assert {x["logger"] for x in lines} == {"router.requests", "router.gateway.errors"}
    error = next(x for x in lines if x["logger"] == "router.gateway.errors")
    assert "RuntimeError" in error["exc_info"] and "ana.novak" not in out
    assert access_line(lines, request_id)["status"] == 500


def test_the_root_logger_is_left_as_it_was_found(settings: Settings) -> None:
    """Apps built in a CLI command or a test must not leave a JSON handler behind."""
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    with TestClient(create_app(settings)):
        assert (list(root.handlers), root.level) == before  # not served: untouched
    with TestClient(create_app(settings, json_logs=True)):
        assert any(isinstance(h, JsonLogHandler) for h in root.handlers)
    assert (list(root.handlers), root.level) == before

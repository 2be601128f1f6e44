"""What the console promises about sessions, CSRF and roles, through the real app on a
real SQLite file: each refusal has its status and stable code, and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from router.access import hash_key, new_key
from router.gateway.app import create_app
from router.gateway.console.sessions import PRESESSION_COOKIE, SESSION_COOKIE, new_token
from router.settings import Settings
from router.storage.console_sessions import ConsoleSessionStore, console_sessions
from tests.messages import BEN, WHEELS
from tests.router.gateway.console.conftest import (
    KEYS,
    NAMES,
    codes_of,
    csrf_of,
    entries,
    sign_in,
)
from tests.tables import row_counts


def _sessions(client: TestClient) -> list[tuple[str, datetime | None]]:
    with client.app.state.services.engine.connect() as conn:
        return [(r.key_name, r.revoked_at) for r in conn.execute(select(console_sessions))]


def _hold(client: TestClient) -> str:
    """A $350 refund held for a supervisor, through the API; its operation."""
    answer = client.post("/v1/messages", json={"text": WHEELS, "kind": "refund",
                                               "customer": BEN},
                         headers={"X-API-Key": KEYS["gateway"]}).json()
    assert answer["status"] == "awaiting_approval"
    (row,) = client.get("/v1/approvals", headers={"X-API-Key": KEYS["supervisor"]}).json()
    return str(row["operation"])


def _set_cookies(response_headers: list[str]) -> dict[str, str]:
    return {header.split("=", 1)[0]: header for header in response_headers}


# ---------------------------------------------------------------- signing in


@pytest.mark.parametrize("role", ["agent", "supervisor", "admin"])
def test_a_person_key_becomes_a_session_with_strict_cookie_flags(
        console: TestClient, role: str) -> None:
    form = console.get("/console/sign-in")
    presession = _set_cookies(form.headers.get_list("set-cookie"))[PRESESSION_COOKIE]
    answer = console.post("/console/sign-in", data={"csrf_token": csrf_of(form.text),
                                                    "key": KEYS[role]},
                          follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/")
    cookie = _set_cookies(answer.headers.get_list("set-cookie"))[SESSION_COOKIE]
    for header in (cookie, presession):
        assert "HttpOnly" in header and "SameSite=strict" in header
        assert "Path=/console" in header and "Secure" not in header  # plain http here
    assert "Max-Age=28800" in cookie  # console_session_ttl_s, 8 h by default
    assert _sessions(console) == [(NAMES[role], None)]
    home = console.get("/console/")
    assert f'data-testid="principal">{NAMES[role]}<' in home.text


def test_over_https_the_cookies_are_secure(keyed_settings: Settings) -> None:
    with TestClient(create_app(keyed_settings), base_url="https://testserver") as client:
        form = client.get("/console/sign-in")
        assert "Secure" in _set_cookies(form.headers.get_list("set-cookie"))[PRESESSION_COOKIE]
        answer = client.post("/console/sign-in", data={"csrf_token": csrf_of(form.text),
                                                       "key": KEYS["agent"]},
                             follow_redirects=False)
        assert "Secure" in _set_cookies(answer.headers.get_list("set-cookie"))[SESSION_COOKIE]


def test_behind_a_trusted_proxy_that_terminates_tls_the_cookies_are_secure(
        keyed_settings: Settings) -> None:
    proxied = keyed_settings.model_copy(update={"trusted_proxies": ["127.0.0.1/32"]})
    # TestClient's peer is "testclient", which is no address: give the app a real one.
    with TestClient(create_app(proxied), client=("127.0.0.1", 50000)) as client:
        form = client.get("/console/sign-in", headers={"X-Forwarded-Proto": "https"})
        assert "Secure" in _set_cookies(form.headers.get_list("set-cookie"))[PRESESSION_COOKIE]
        plain = client.get("/console/sign-in")
        assert "Secure" not in _set_cookies(plain.headers.get_list("set-cookie"))[
            PRESESSION_COOKIE]


@pytest.mark.parametrize(("key", "status", "code"), [
    (KEYS["gateway"], 403, "console_forbidden"),
    (KEYS["gateway"] + "x", 401, "console_unknown_key"),
    ("", 401, "console_unknown_key"),
], ids=["gateway-key", "wrong-key", "no-key"])
def test_a_gateway_key_or_a_wrong_key_gets_no_session(
        console: TestClient, key: str, status: int, code: str) -> None:
    form = console.get("/console/sign-in")
    answer = console.post("/console/sign-in", data={"csrf_token": csrf_of(form.text),
                                                    "key": key}, follow_redirects=False)
    assert (answer.status_code, codes_of(answer.text)[0]) == (status, code)
    assert answer.headers["content-type"].startswith("text/html")
    assert SESSION_COOKIE not in answer.headers.get("set-cookie", "")
    assert _sessions(console) == []


def test_in_open_mode_nobody_is_signed_in(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        page = client.get("/console/sign-in")
        assert page.status_code == 200 and "support-router keys new" in page.text
        assert "<input" not in page.text and PRESESSION_COOKIE not in page.headers.get(
            "set-cookie", "")
        answer = client.post("/console/sign-in", data={"csrf_token": "x", "key": "sr_x"})
        assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_open_mode")
        assert client.get("/console/approvals", follow_redirects=False).status_code == 303
        assert _sessions(client) == []


# ---------------------------------------------------------------- CSRF and Origin


@pytest.mark.parametrize("token", [None, "", "not-the-token"], ids=["missing", "empty", "wrong"])
def test_the_sign_in_form_needs_its_double_submit_token(
        console: TestClient, token: str | None) -> None:
    console.get("/console/sign-in")  # sets the pre-session cookie
    data = {"key": KEYS["agent"]} | ({"csrf_token": token} if token is not None else {})
    answer = console.post("/console/sign-in", data=data)
    assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_csrf")
    assert _sessions(console) == []


def test_a_sign_in_token_without_its_cookie_is_refused(console: TestClient) -> None:
    token = csrf_of(console.get("/console/sign-in").text)
    console.cookies.clear()  # another site can post the field, not set our cookie
    answer = console.post("/console/sign-in", data={"csrf_token": token, "key": KEYS["agent"]})
    assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_csrf")
    assert _sessions(console) == []


@pytest.mark.parametrize("token", [None, "not-the-token"], ids=["missing", "wrong"])
def test_a_decision_without_the_sessions_token_changes_nothing(
        console: TestClient, token: str | None) -> None:
    operation = _hold(console)
    sign_in(console, "supervisor")
    before = row_counts(console.app.state.services.engine)
    data = {"decision": "approve"} | ({"csrf_token": token} if token else {})
    answer = console.post(f"/console/approvals/{operation}/decision", data=data)
    assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_csrf")
    assert row_counts(console.app.state.services.engine) == before
    (row,) = console.get("/v1/approvals", headers={"X-API-Key": KEYS["supervisor"]}).json()
    assert row["status"] == "held"


def test_a_post_from_another_origin_is_refused(console: TestClient) -> None:
    operation = _hold(console)
    csrf = sign_in(console, "supervisor")
    before = row_counts(console.app.state.services.engine)
    for origin in ({"Origin": "https://evil.example"}, {"Origin": "null"},
                   {"Referer": "https://evil.example/page"}):
        answer = console.post(f"/console/approvals/{operation}/decision",
                              data={"csrf_token": csrf, "decision": "approve"}, headers=origin)
        assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_bad_origin")
    assert row_counts(console.app.state.services.engine) == before
    same = console.post(f"/console/approvals/{operation}/decision",
                        data={"csrf_token": csrf, "decision": "approve"},
                        headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert same.status_code == 303


def test_a_form_that_is_not_url_encoded_is_refused_before_routing(console: TestClient) -> None:
    csrf = sign_in(console, "supervisor")
    answer = console.post("/console/sign-out", content=f'{{"csrf_token": "{csrf}"}}',
                          headers={"Content-Type": "application/json"})
    assert answer.status_code == 415
    assert console.get("/console/", follow_redirects=False).status_code == 200


@pytest.mark.parametrize(("body", "content_type", "status", "code"), [
    (b"note=" + b"x" * (65 * 1024), "application/x-www-form-urlencoded", 413,
     "body_too_large"),
    (b"note=\xff\xfe", "application/x-www-form-urlencoded", 400, "invalid_encoding"),
    (b'{"note": 1}', "application/json", 415, "unsupported_media_type"),
], ids=["too-large", "not-utf8", "not-a-form"])
def test_a_form_refused_before_routing_gets_the_console_error_page(
        console: TestClient, body: bytes, content_type: str, status: int, code: str) -> None:
    """A person who pastes too much into a form sees a console page, not the API's JSON."""
    csrf = sign_in(console, "supervisor")
    answer = console.post("/console/sign-out", content=body,
                          headers={"Content-Type": content_type})
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/html")
    assert codes_of(answer.text)[:1] == [code]
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert csrf and console.get("/console/", follow_redirects=False).status_code == 200


def test_a_wrong_method_on_a_console_page_gets_the_console_error_page(
        console: TestClient) -> None:
    """Routing's own refusals (405 here) are pages under /console, and JSON elsewhere."""
    sign_in(console, "supervisor")
    answer = console.delete("/console/approvals")
    assert answer.status_code == 405
    assert answer.headers["content-type"].startswith("text/html")
    assert codes_of(answer.text)[:1] == ["method_not_allowed"]
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    api = console.delete("/v1/route")
    assert api.status_code == 405
    assert api.json()["error"]["code"] == "method_not_allowed"


# ---------------------------------------------------------------- sessions end


def test_sign_out_revokes_the_row_and_the_old_cookie_opens_nothing(
        console: TestClient) -> None:
    csrf = sign_in(console, "agent")
    token = console.cookies[SESSION_COOKIE]
    answer = console.post("/console/sign-out", data={"csrf_token": csrf},
                          follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    ((name, revoked),) = _sessions(console)
    assert name == NAMES["agent"] and revoked is not None
    console.cookies.set(SESSION_COOKIE, token)
    again = console.get("/console/handoffs", follow_redirects=False)
    assert (again.status_code, again.headers["location"]) == (303, "/console/sign-in")


def test_an_expired_session_opens_nothing(console: TestClient) -> None:
    token = new_token()
    long_ago = datetime.now(UTC) - timedelta(hours=9)
    ConsoleSessionStore(console.app.state.services.engine).create(
        token, key_name=NAMES["agent"], key_sha256=hash_key(KEYS["agent"]), roles=("agent",),
        csrf_token=new_token(), now=long_ago, ttl_s=8 * 3600)
    console.cookies.set(SESSION_COOKIE, token)
    answer = console.get("/console/handoffs", follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")


def test_a_session_is_honoured_by_every_process_on_the_database_and_follows_its_key(
        keyed_settings: Settings) -> None:
    """Two apps on one database stand for two workers or hosts. A key removed from the
    second one's configuration ends the session there on the next page."""
    with TestClient(create_app(keyed_settings)) as first:
        sign_in(first, "agent")
        token = first.cookies[SESSION_COOKIE]
    with TestClient(create_app(keyed_settings)) as second:
        second.cookies.set(SESSION_COOKIE, token)
        assert second.get("/console/handoffs").status_code == 200
    without_agent = keyed_settings.model_copy(update={
        "api_keys": [e for e in entries() if e.name != NAMES["agent"]]})
    with TestClient(create_app(without_agent)) as third:
        third.cookies.set(SESSION_COOKIE, token)
        assert third.get("/console/handoffs", follow_redirects=False).status_code == 303


def test_a_rotated_key_ends_the_sessions_signed_in_with_the_old_one(
        keyed_settings: Settings) -> None:
    """Rotating a leaked key keeps its name and roles but changes its secret: whoever
    signed in with the old secret must not keep a session for the rest of its lifetime."""
    with TestClient(create_app(keyed_settings)) as first:
        sign_in(first, "agent")
        token = first.cookies[SESSION_COOKIE]
    rotated = keyed_settings.model_copy(update={"api_keys": [
        entry.model_copy(update={"sha256": hash_key(new_key())})
        if entry.name == NAMES["agent"] else entry for entry in entries()]})
    with TestClient(create_app(rotated)) as second:
        second.cookies.set(SESSION_COOKIE, token)
        answer = second.get("/console/handoffs", follow_redirects=False)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")


# ---------------------------------------------------------------- roles and errors


@pytest.mark.parametrize(("role", "path", "allowed"), [
    ("agent", "/console/handoffs", True),
    ("agent", "/console/approvals", False),
    ("supervisor", "/console/approvals", True),
    ("supervisor", "/console/handoffs", False),
    ("admin", "/console/approvals", False),
    ("admin", "/console/handoffs", False),
])
def test_pages_check_the_same_roles_as_the_api(console: TestClient, role: str, path: str,
                                               allowed: bool) -> None:
    sign_in(console, role)
    answer = console.get(path)
    api = console.get(path.replace("/console", "/v1"), headers={"X-API-Key": KEYS[role]})
    assert (answer.status_code == 200) is allowed is (api.status_code == 200)
    if not allowed:
        assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_forbidden")
    nav = console.get("/console/").text.split("<main", 1)[0]
    assert (f'href="{path}"' in nav) is allowed


def test_an_agent_cannot_decide_a_refund(console: TestClient) -> None:
    operation = _hold(console)
    csrf = sign_in(console, "agent")
    before = row_counts(console.app.state.services.engine)
    answer = console.post(f"/console/approvals/{operation}/decision",
                          data={"csrf_token": csrf, "decision": "approve"})
    assert (answer.status_code, codes_of(answer.text)[0]) == (403, "console_forbidden")
    assert row_counts(console.app.state.services.engine) == before


@pytest.mark.parametrize(("method", "path", "data", "status", "code"), [
    ("get", "/console/no-such-page", None, 404, "console_not_found"),
    ("get", "/console/approvals/op-nope", None, 404, "unknown_operation"),
    ("get", "/console/approvals/bad%20id!", None, 422, "invalid_request"),
    ("post", "/console/approvals/{operation}/decision", {"decision": "maybe"}, 422,
     "invalid_decision"),
    ("post", "/console/approvals/{operation}/decision",
     {"decision": "approve", "note": "x" * 1001}, 422, "invalid_note"),
], ids=["unknown-page", "unknown-operation", "bad-id", "bad-decision", "long-note"])
def test_errors_are_html_pages_with_the_stable_code_and_write_nothing(
        console: TestClient, method: str, path: str, data: dict[str, str] | None,
        status: int, code: str) -> None:
    operation = _hold(console)
    csrf = sign_in(console, "supervisor")
    before = row_counts(console.app.state.services.engine)
    kwargs = {"data": {"csrf_token": csrf} | data} if data is not None else {}
    answer = getattr(console, method)(path.format(operation=operation), **kwargs)
    assert (answer.status_code, codes_of(answer.text)[0]) == (status, code)
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.text.startswith("<!doctype html>") and "Traceback" not in answer.text
    assert row_counts(console.app.state.services.engine) == before


def test_pages_carry_a_strict_content_security_policy(console: TestClient) -> None:
    page = console.get("/console/sign-in")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["cache-control"] == "no-store"
    css = console.get("/console/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert console.get("/console/static/../app.py").status_code == 404


def test_sign_in_attempts_are_rate_limited_per_client_address(
        keyed_settings: Settings) -> None:
    limited = keyed_settings.model_copy(update={"rate_limit_per_s": 0.001,
                                                "rate_limit_burst": 2})
    with TestClient(create_app(limited)) as client:
        page, statuses = client.get("/console/sign-in"), []
        for _ in range(3):  # each refusal's page carries a fresh form token
            page = client.post("/console/sign-in", data={"csrf_token": csrf_of(page.text),
                                                         "key": KEYS["agent"] + "x"})
            statuses.append(page.status_code)
        assert statuses == [401, 401, 429]
        assert codes_of(page.text)[0] == "rate_limited"
        token = csrf_of(client.get("/console/sign-in").text)
        right = client.post("/console/sign-in", data={"csrf_token": token,
                                                      "key": KEYS["agent"]})
        assert right.status_code == 429  # the right key waits its turn like any guess
        assert _sessions(client) == []

"""API keys and roles: the pure key ring, the `keys` CLI, and every route through the app."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import MetaData, select
from typer.testing import CliRunner

from router.access import ROLES, ApiKey, InvalidApiKeys, KeyRing, hash_key, new_key
from router.cli.main import app as cli_app
from router.gateway.app import create_app
from router.gateway.console import CONSOLE_PREFIX
from router.gateway.middleware.access import is_loopback_host
from router.settings import Settings, get_settings
from tests.tables import row_counts

# Every route that needs no key. Anything else must declare `require_role(...)`.
OPEN_PATHS = {
    "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc",
    "/docs/assets/{name}",
}

# One real request per protected endpoint, with the role it needs. The body does not have
# to succeed: a key with the role must get past the access check (not 401/403), one
# without it must get 403.
ENDPOINTS: list[tuple[str, str, str, dict | None]] = [
    ("gateway", "post", "/v1/route", {"text": "where is my order?"}),
    ("gateway", "post", "/v1/messages", {"text": "where is my order?"}),
    ("gateway", "get", "/v1/cases/c-doesnotexist", None),
    ("agent", "get", "/v1/handoffs", None),
    ("agent", "post", "/v1/handoffs/c-doesnotexist/reply", {"agent": "ana", "text": "hi"}),
    ("supervisor", "get", "/v1/approvals", None),
    ("supervisor", "post", "/v1/approvals/op-doesnotexist/decision",
     {"decision": "approve", "supervisor": "sam"}),
    ("admin", "get", "/v1/admin/policy", None),
    ("admin", "post", "/v1/admin/policy/reload", None),
    ("admin", "post", "/v1/admin/policy/rollback", None),
    ("admin", "get", "/v1/admin/experiments", None),
    ("admin", "post", "/v1/admin/experiments", {"name": "e", "variants": []}),
    ("admin", "post", "/v1/admin/experiments/none/stop", None),
]

KEYS = {role: new_key() for role in ROLES}
ALL_ROLES_KEY = new_key()


def _entries() -> list[ApiKey]:
    entries = [ApiKey(name=f"{role}-1", sha256=hash_key(key), roles=(role,))
               for role, key in KEYS.items()]
    entries.append(ApiKey(name="everything", sha256=hash_key(ALL_ROLES_KEY), roles=ROLES))
    return entries


@pytest.fixture
def keyed(settings: Settings) -> Iterator[TestClient]:
    """The real app with one key per role (and one with all of them), no rate limit."""
    keyed_settings = settings.model_copy(update={"api_keys": _entries(), "rate_limit_per_s": 0})
    with TestClient(create_app(keyed_settings)) as client:
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ---------------------------------------------------------------- the key ring (pure)


def test_a_key_is_found_by_its_digest_and_nothing_else() -> None:
    ring = KeyRing(_entries())
    assert ring.authenticate(KEYS["agent"]).name == "agent-1"
    assert ring.authenticate(ALL_ROLES_KEY).roles == ROLES
    assert ring.authenticate(hash_key(KEYS["agent"])) is None  # the digest is not a key
    assert ring.authenticate(KEYS["agent"] + "x") is None
    assert ring.authenticate("") is None
    assert ring.authenticate(None) is None


def test_every_configured_digest_is_compared_even_after_a_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No early exit: the work done does not reveal which key (or none) matched."""
    calls: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(b)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    ring = KeyRing(_entries())
    for presented in (KEYS["gateway"], ALL_ROLES_KEY, "not-a-key"):
        calls.clear()
        ring.authenticate(presented)
        assert len(calls) == len(ring) == len(ROLES) + 1


def test_settings_hold_digests_never_keys() -> None:
    key = new_key()
    with pytest.raises(ValidationError, match="never the key itself"):
        ApiKey(name="desk-1", sha256=key, roles=("gateway",))
    with pytest.raises(ValidationError):
        ApiKey(name="desk-1", sha256=hash_key(key), roles=("root",))
    with pytest.raises(ValidationError):
        ApiKey(name="desk-1", sha256=hash_key(key), roles=())
    upper = ApiKey(name="desk-1", sha256=hash_key(key).upper(), roles=("gateway",))
    assert upper.sha256 == hash_key(key)


def test_duplicate_names_or_digests_are_refused() -> None:
    one = ApiKey(name="a", sha256=hash_key("k1"), roles=("gateway",))
    with pytest.raises(InvalidApiKeys, match="unique"):
        KeyRing([one, ApiKey(name="a", sha256=hash_key("k2"), roles=("agent",))])
    with pytest.raises(InvalidApiKeys, match="same sha256"):
        KeyRing([one, ApiKey(name="b", sha256=hash_key("k1"), roles=("agent",))])


def test_keys_are_read_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"name": "desk-1", "sha256": hash_key("k"), "roles": ["gateway", "agent"]}
    monkeypatch.setenv("SUPPORT_ROUTER_API_KEYS", json.dumps([entry]))
    assert Settings().api_keys == [ApiKey.model_validate(entry)]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("::ffff:127.0.0.1", True), ("0.0.0.0", False), ("::", False),
     ("10.0.0.5", False), ("example.com", False)],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


# ---------------------------------------------------------------- `support-router keys`


def test_keys_new_prints_a_key_once_and_an_entry_that_authenticates_it(
    settings: Settings,
) -> None:
    result = CliRunner().invoke(
        cli_app, ["keys", "new", "--name", "desk-7", "--role", "gateway", "--role", "agent",
                  "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    entry = ApiKey.model_validate(printed["entry"])
    assert entry.name == "desk-7" and entry.roles == ("gateway", "agent")
    assert printed["key"] not in json.dumps(printed["entry"])

    keyed_settings = settings.model_copy(update={"api_keys": [entry]})
    with TestClient(create_app(keyed_settings)) as client:
        ok = client.get("/v1/handoffs", headers=_bearer(printed["key"]))
        assert ok.status_code == 200
        assert client.get("/v1/approvals", headers=_bearer(printed["key"])).status_code == 403

    plain = CliRunner().invoke(cli_app, ["keys", "new", "--name", "desk-8", "--role", "admin"])
    assert plain.exit_code == 0 and "shown once" in plain.output


def test_keys_list_shows_names_and_roles_only(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"name": "desk-1", "sha256": hash_key("k"), "roles": ["gateway", "agent"]}
    monkeypatch.setenv("SUPPORT_ROUTER_API_KEYS", json.dumps([entry]))
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli_app, ["keys", "list"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0
    assert result.output.split() == ["desk-1", "gateway,agent"]


def test_keys_new_refuses_an_unknown_role() -> None:
    result = CliRunner().invoke(cli_app, ["keys", "new", "--name", "x", "--role", "root"])
    assert result.exit_code == 2
    assert ("'root' is not one of 'gateway', 'agent', 'supervisor', 'labeller', 'admin'"
            in result.output)


# ---------------------------------------------------------------- every route, over HTTP


def _api_routes(routes: list) -> list[APIRoute]:
    """Every API route, inside included routers too (FastAPI keeps those as one entry
    each); the console's pages have a test of their own (tests/router/gateway/console/)."""
    found: list[APIRoute] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            if included.prefix != CONSOLE_PREFIX:
                found += _api_routes(included.routes)
        elif isinstance(route, APIRoute):
            found.append(route)
    return found


def test_every_route_declares_a_role_or_is_deliberately_open(keyed: TestClient) -> None:
    """A new endpoint without `require_role` fails here instead of shipping unprotected."""
    unprotected = []
    routes = _api_routes(keyed.app.routes)
    assert len(routes) > len(ENDPOINTS)  # the walk found the routers' routes
    for route in routes:
        if route.path in OPEN_PATHS:
            continue
        roles = {getattr(dep.call, "role", None) for dep in route.dependant.dependencies}
        if not roles & set(ROLES):
            unprotected.append(route.path)
    assert unprotected == []


@pytest.mark.parametrize(("role", "method", "path", "body"), ENDPOINTS)
def test_each_endpoint_needs_a_key_with_its_role(
    keyed: TestClient, role: str, method: str, path: str, body: dict | None
) -> None:
    send = getattr(keyed, method)
    kwargs = {"json": body} if body is not None else {}

    missing = send(path, **kwargs)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "unauthorized"
    assert missing.headers["WWW-Authenticate"] == "Bearer"

    unknown = send(path, headers=_bearer(new_key()), **kwargs)
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] == "unauthorized"

    for other in ROLES:
        response = send(path, headers=_bearer(KEYS[other]), **kwargs)
        if other == role:
            assert response.status_code not in (401, 403), response.text
        else:
            assert response.status_code == 403, (other, response.text)
            assert response.json()["error"]["code"] == "forbidden"
            assert set(response.json()["error"]) == {"code", "message", "request_id"}

    with_all = send(path, headers={"X-API-Key": ALL_ROLES_KEY}, **kwargs)
    assert with_all.status_code not in (401, 403)


def test_a_refused_request_writes_nothing(keyed: TestClient) -> None:
    before = row_counts(keyed.app.state.services.engine)
    for headers in ({}, _bearer(KEYS["agent"])):
        assert keyed.post("/v1/messages", json={"text": "refund O-1002 please"},
                          headers=headers).status_code in (401, 403)
    assert row_counts(keyed.app.state.services.engine) == before


def test_the_bearer_scheme_is_case_insensitive_and_other_schemes_are_no_key(
    keyed: TestClient,
) -> None:
    key = KEYS["gateway"]
    body = {"text": "hello"}
    assert keyed.post("/v1/route", json=body,
                      headers={"Authorization": f"bearer {key}"}).status_code == 200
    basic = keyed.post("/v1/route", json=body, headers={"Authorization": f"Basic {key}"})
    assert basic.status_code == 401


def test_health_metrics_and_docs_stay_open(keyed: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/redoc",
                 "/docs/assets/swagger-ui-bundle.js"):
        assert keyed.get(path).status_code == 200, path
    assert keyed.get("/metrics").status_code == 200


def test_the_openapi_schema_documents_both_ways_to_send_a_key(keyed: TestClient) -> None:
    schema = keyed.get("/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    assert schemes["APIKeyHeader"]["name"] == "X-API-Key"
    route = schema["paths"]["/v1/route"]["post"]
    assert {"401", "403", "429"} <= set(route["responses"])
    assert "security" not in schema["paths"]["/healthz"]["get"]


def _all_rows(client: TestClient) -> list[str]:
    """Every row of every table, as text (to look for keys in what was written)."""
    engine = client.app.state.services.engine
    meta = MetaData()
    meta.reflect(engine)
    rows: list[str] = []
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            rows.extend(repr(tuple(row)) for row in conn.execute(select(table)))
    return rows


def test_keys_never_reach_logs_errors_or_the_database(
    keyed: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = new_key()
    seen: list[str] = []
    for headers in (_bearer(wrong), {"X-API-Key": wrong}, _bearer(KEYS["agent"]),
                    _bearer(KEYS["gateway"])):
        response = keyed.post("/v1/messages", json={"text": "where is order O-1002?"},
                              headers=headers)
        seen.append(response.text)
        seen.extend(f"{k}: {v}" for k, v in response.headers.items())
    written = "\n".join(_all_rows(keyed))
    assert written  # the accepted request was logged and its case written
    for key in (wrong, KEYS["agent"], KEYS["gateway"]):
        for where, text in (("logs", caplog.text), ("responses", "\n".join(seen)),
                            ("database", written)):
            assert key not in text, where
            assert hash_key(key) not in text, where


# ---------------------------------------------------------------- no keys: open on loopback


def test_without_keys_every_endpoint_is_open_on_loopback(client: TestClient) -> None:
    assert client.post("/v1/route", json={"text": "hello"}).status_code == 200
    assert client.get("/v1/handoffs").status_code == 200
    assert client.get("/v1/approvals").status_code == 200


@pytest.mark.parametrize("base_url", ["http://10.1.2.3:8000", "http://[2001:db8::1]:8000"])
def test_without_keys_a_request_that_arrived_off_loopback_is_refused(
    settings: Settings, base_url: str
) -> None:
    """`uvicorn router.gateway.asgi:app --host 0.0.0.0` by hand still cannot expose it."""
    with TestClient(create_app(settings), base_url=base_url) as client:
        refused = client.post("/v1/route", json={"text": "hello"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        assert "loopback" in refused.json()["error"]["message"]
        assert client.get("/healthz").status_code == 200
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        assert client.post("/v1/route", json={"text": "hello"}).status_code == 200

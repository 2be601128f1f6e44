"""Schemathesis against the gateway's own OpenAPI schema, over real HTTP on loopback.

The app is the real one (`create_app` on the test settings, lifespan and all middleware)
served by uvicorn on 127.0.0.1, so requests go through a real HTTP parser too. Every
operation gets a bounded number of generated requests (valid and invalid ones), and each
response must not be a 5xx, must have a status the schema declares for that operation, and
must match the schema declared for that status (the one error model for every 4xx).

Why this exists: the schema is the contract clients generate code from; a status or body
shape the schema does not mention is a bug even when the request was nonsense.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from router.app.training import TrainResult
from router.gateway.app import create_app
from router.settings import Settings
from tests.messages import BEN, COMPLAINT, WHEELS
from tests.servers import free_port

# Per operation; raise it for a longer hunt: SCHEMATHESIS_MAX_EXAMPLES=300 pytest this file.
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def gateway_url(server_settings: Settings) -> Iterator[str]:
    """The real app under uvicorn on a loopback port, for the whole module."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(
        create_app(server_settings), host="127.0.0.1", port=port, log_level="warning",
        lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the gateway did not become ready within 30s")
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="module")
def server_settings(tmp_path_factory: pytest.TempPathFactory, trained: TrainResult) -> Settings:
    """Test settings for a module-scoped server: fresh database, the session's model, and no
    rate limit (hundreds of generated requests arrive within seconds from one address)."""
    var_dir = tmp_path_factory.mktemp("schemathesis-var")
    return Settings(var_dir=var_dir, model_dir=trained.model_path.parent,
                    policy_path=trained.policy_path, rate_limit_per_s=0)


# The schema the app serves at /openapi.json, built without starting it (it depends on the
# routes only), so pytest can make one test per operation at collection time;
# `test_served_schema_is_the_one_tested` proves it is the one the server serves.
SCHEMA = create_app().openapi()
schema = schemathesis.openapi.from_dict(SCHEMA)


# One of everything the list endpoints show, so their responses are checked with rows in
# them (an empty list conforms to any item schema): a hand-off, a refund held for a
# supervisor (over the $200 limit) and the cases behind them.
SEED_MESSAGES = [
    {"text": COMPLAINT, "kind": "other"},
    {"text": WHEELS, "kind": "refund", "customer": BEN},
]


@pytest.fixture(scope="module")
def seeded_cases(gateway_url: str) -> list[str]:
    statuses, cases = [], []
    for body in SEED_MESSAGES:
        answer = httpx.post(f"{gateway_url}/v1/messages", json=body, timeout=10)
        assert answer.status_code == 200, answer.text
        statuses.append(answer.json()["status"])
        cases.append(answer.json()["case_id"])
    assert statuses == ["handed_off", "awaiting_approval"]
    return cases


def test_served_schema_is_the_one_tested(gateway_url: str) -> None:
    assert httpx.get(f"{gateway_url}/openapi.json", timeout=5).json() == SCHEMA


def test_seeded_rows_conform(gateway_url: str, seeded_cases: list[str]) -> None:
    """Schemathesis cannot guess a case id; these are real ones, with messages and actions."""
    for case_id in seeded_cases:
        case = schema["/v1/cases/{case_id}"]["GET"].Case(path_parameters={"case_id": case_id})
        assert case.call_and_validate(base_url=gateway_url, checks=CHECKS).status_code == 200
    for path, query in (("/v1/handoffs", None), ("/v1/approvals", {"status": "held"})):
        case = schema[path]["GET"].Case(query=query)
        response = case.call_and_validate(base_url=gateway_url, checks=CHECKS)
        body = response.json()
        assert len(body["items"] if path == "/v1/handoffs" else body) == 1, path


# One test per operation with its own id (`schema.parametrize()` gives every operation the
# same node id, and pytest-xdist, which keys tests by node id, would run only one of them).
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_gateway_conforms_to_its_own_openapi_schema(
    operation: APIOperation, gateway_url: str, seeded_cases: list[str]
) -> None:
    cases = st.one_of(*(operation.as_strategy(generation_mode=mode) for mode in GenerationMode))

    @given(case=cases)
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def conforms(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=gateway_url, checks=CHECKS, timeout=10)

    conforms()

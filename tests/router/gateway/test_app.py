"""The HTTP gateway through the real app (TestClient runs the lifespan and middleware)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from router.gateway.middleware.observability import REQUEST_ID_HEADER
from router.storage.decision_log import decisions


def _logged(client: TestClient) -> int:
    engine = client.app.state.services.engine
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(decisions)).scalar_one()


def test_route_returns_a_logged_decision(client: TestClient) -> None:
    response = client.post("/v1/route", json={"text": "Please refund my broken kettle, O-1001"})
    assert response.status_code == 200
    body = response.json()
    assert body["route"] in ("refund", "clarify")
    assert body["scores"]["choice"] == "refund"
    assert body["request_id"] == response.headers[REQUEST_ID_HEADER]
    assert body["policy_version"].startswith("local-default-")
    assert _logged(client) == 1


def test_form_kind_rule_decides_before_the_model(client: TestClient) -> None:
    body = client.post("/v1/route", json={"text": "hello", "kind": "account"}).json()
    assert (body["route"], body["reason"], body["scores"]) == ("account", "rule:form_kind", None)


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"text": ""}, 422, "empty_text"),
        ({"text": "   \n\t "}, 422, "empty_text"),
        ({"text": "x" * 8001}, 422, "text_too_long"),
        ({"text": "refund\x00me"}, 422, "control_characters"),
        ({}, 422, "invalid_request"),
        ({"text": 42}, 422, "invalid_request"),
        ({"text": "hi", "surprise": 1}, 422, "invalid_request"),
        ({"text": "hi", "kind": "delete_everything"}, 422, "invalid_request"),
        ({"text": "hi", "case_id": "../../etc"}, 422, "invalid_request"),
    ],
)
def test_bad_input_is_a_4xx_with_a_stable_code_and_logs_nothing(
    client: TestClient, payload: dict, status: int, code: str
) -> None:
    response = client.post("/v1/route", json=payload)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert _logged(client) == 0


@pytest.mark.parametrize(
    ("content", "content_type", "code"),
    [
        (b'{"text": "unterminated', "application/json", "invalid_json"),
        (b"\xff\xfe not utf-8", "application/json", "invalid_encoding"),
    ],
)
def test_malformed_bodies(client: TestClient, content: bytes, content_type: str, code: str) -> None:
    response = client.post("/v1/route", content=content, headers={"content-type": content_type})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert _logged(client) == 0


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"model_and_policy": True, "database": True,
                                      "schema": True}


def test_unknown_path_uses_the_error_shape(client: TestClient) -> None:
    response = client.get("/v1/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"

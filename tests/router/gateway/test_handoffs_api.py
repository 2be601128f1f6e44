"""`GET /v1/handoffs` and `POST /v1/handoffs/{case_id}/reply` through the real app."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from router.settings import Settings
from tests.messages import COMPLAINT
from tests.tables import row_counts


@pytest.fixture
def settings(settings: Settings, any_db_url: str) -> Settings:
    """These tests store cases, refunds and decisions: run them on SQLite and PostgreSQL."""
    return settings.model_copy(update={"database_url": any_db_url})


def _hand_off(client: TestClient) -> str:
    body = client.post("/v1/messages", json={"text": COMPLAINT, "kind": "other"}).json()
    assert body["status"] == "handed_off" and "a person will reply" in body["reply"]
    return body["case_id"]


def test_list_and_reply(client: TestClient) -> None:
    case_id = _hand_off(client)
    rows = client.get("/v1/handoffs").json()
    assert [(r["case_id"], r["last_customer_message"]) for r in rows] == [(case_id, COMPLAINT)]
    response = client.post(
        f"/v1/handoffs/{case_id}/reply",
        json={"agent": "sam", "text": "Sorry! I've told the courier."},
    )
    assert response.status_code == 200
    assert response.json() == {
        "case_id": case_id,
        "agent": "sam",
        "reply": "Sorry! I've told the courier.",
        "case_status": "resolved",
    }
    assert client.get("/v1/handoffs").json() == []
    case = client.get(f"/v1/cases/{case_id}").json()
    assert case["status"] == "resolved" and case["messages"][-1]["role"] == "agent"


def test_an_faq_question_is_answered_and_not_queued(client: TestClient) -> None:
    body = client.post(
        "/v1/messages", json={"text": "How much does shipping cost?", "kind": "other"}
    ).json()
    assert (body["route"], body["status"]) == ("other", "resolved")
    assert "$50" in body["reply"]
    assert client.get("/v1/handoffs").json() == []


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/handoffs/{case}/reply", {"agent": "sam"}, 422, "invalid_request"),
        ("/v1/handoffs/{case}/reply", {"agent": "sam", "text": "  "}, 422, "empty_text"),
        ("/v1/handoffs/{case}/reply", {"agent": "", "text": "hi"}, 422, "invalid_request"),
        (
            "/v1/handoffs/{case}/reply",
            {"agent": "sam", "text": "hi", "refund": 500},
            422,
            "invalid_request",
        ),
        (
            "/v1/handoffs/{case}/reply",
            {"agent": "sam", "text": "bell\u0007"},
            422,
            "control_characters",
        ),
        ("/v1/handoffs/c-nope/reply", {"agent": "sam", "text": "hi"}, 404, "unknown_case"),
        ("/v1/handoffs/{resolved}/reply", {"agent": "sam", "text": "hi"}, 409, "not_handed_off"),
        ("/v1/handoffs/bad%20id!/reply", {"agent": "sam", "text": "hi"}, 422, "invalid_request"),
    ],
)
def test_bad_input_is_a_4xx_and_writes_nothing(
    client: TestClient, path: str, body: dict, status: int, code: str
) -> None:
    case = _hand_off(client)
    resolved = client.post(
        "/v1/messages", json={"text": "How much does shipping cost?", "kind": "other"}
    ).json()["case_id"]
    before = row_counts(client.app.state.services.engine)
    response = client.post(path.format(case=case, resolved=resolved), json=body)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert row_counts(client.app.state.services.engine) == before


def test_a_body_that_is_not_json_is_a_400(client: TestClient) -> None:
    case = _hand_off(client)
    response = client.post(
        f"/v1/handoffs/{case}/reply",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400

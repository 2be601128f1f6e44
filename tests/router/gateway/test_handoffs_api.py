"""`GET /v1/handoffs` and `POST /v1/handoffs/{case_id}/reply` through the real app."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from router.access import ApiKey, hash_key, new_key
from router.gateway.app import create_app
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
    page = client.get("/v1/handoffs").json()
    assert (page["next_cursor"], page["total"]) == (None, 1)
    assert [(r["case_id"], r["last_customer_message"]) for r in page["items"]] == \
        [(case_id, COMPLAINT)]
    response = client.post(
        f"/v1/handoffs/{case_id}/reply",
        json={"agent": "sam", "text": "Sorry! I've told the courier."},
    )
    assert response.status_code == 200
    assert response.json() == {
        "case_id": case_id,
        "agent": "sam",
        "principal": "anonymous@loopback",
        "reply": "Sorry! I've told the courier.",
        "case_status": "resolved",
    }
    assert client.get("/v1/handoffs").json()["items"] == []
    case = client.get(f"/v1/cases/{case_id}").json()
    assert case["status"] == "resolved" and case["messages"][-1]["role"] == "agent"
    # Keyless: the record says nobody was authenticated; "sam" is only displayed.
    assert case["actions"][-1]["artifacts"] | {"principal": "anonymous@loopback",
                                               "agent": "sam"} == case["actions"][-1]["artifacts"]


def test_an_faq_question_is_answered_and_not_queued(client: TestClient) -> None:
    body = client.post(
        "/v1/messages", json={"text": "How much does shipping cost?", "kind": "other"}
    ).json()
    assert (body["route"], body["status"]) == ("other", "resolved")
    assert "$50" in body["reply"]
    assert client.get("/v1/handoffs").json()["items"] == []


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


def test_the_queue_comes_a_page_at_a_time(client: TestClient) -> None:
    cases = [_hand_off(client) for _ in range(5)]
    seen, cursor = [], None
    for _ in range(5):
        query = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/handoffs", params=query).json()
        assert len(page["items"]) <= 2 and page["total"] == 5
        seen += [r["case_id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == cases  # oldest first, each once
    assert client.get("/v1/handoffs", params={"older_than_s": 3600}).json() == {
        "items": [], "next_cursor": None, "total": 0}
    assert client.get("/v1/handoffs", params={"newer_than_s": 3600}).json()["total"] == 5
    english = client.get("/v1/handoffs", params={"lang": "en"}).json()
    assert english["total"] == 5 and {r["lang"] for r in english["items"]} == {"en"}
    assert client.get("/v1/handoffs", params={"lang": "de"}).json()["total"] == 0


@pytest.mark.parametrize(("query", "code"), [
    ({"limit": 0}, "invalid_request"),
    ({"limit": 201}, "invalid_request"),
    ({"limit": "many"}, "invalid_request"),
    ({"cursor": "bad cursor!"}, "invalid_request"),
    ({"cursor": "bm90LWpzb24"}, "invalid_cursor"),
    ({"older_than_s": -5}, "invalid_request"),
    ({"newer_than_s": -5}, "invalid_request"),
    ({"lang": "klingon"}, "invalid_request"),
    ({"lang": "xx"}, "invalid_lang"),
])
def test_bad_paging_is_a_422(client: TestClient, query: dict, code: str) -> None:
    response = client.get("/v1/handoffs", params=query)
    assert (response.status_code, response.json()["error"]["code"]) == (422, code)


def test_a_keyed_reply_records_the_keys_name(settings: Settings) -> None:
    key = new_key()
    keyed = settings.model_copy(update={"rate_limit_per_s": 0, "api_keys": [
        ApiKey(name="agent-sam", sha256=hash_key(key), roles=("gateway", "agent"))]})
    with TestClient(create_app(keyed), headers={"X-API-Key": key}) as client:
        case_id = _hand_off(client)
        body = client.post(f"/v1/handoffs/{case_id}/reply",
                           json={"agent": "Maria (supervisor)", "text": "On it."}).json()
        assert (body["agent"], body["principal"]) == ("Maria (supervisor)", "agent-sam")
        action = client.get(f"/v1/cases/{case_id}").json()["actions"][-1]
        assert (action["artifacts"]["principal"], action["artifacts"]["agent"]) == \
            ("agent-sam", "Maria (supervisor)")

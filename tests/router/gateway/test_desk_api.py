"""The desk's endpoints through the real app: messages, approvals, cases, bad input.

Messages carry a form `kind` where a test needs a given route, so these tests exercise
the HTTP layer and the handlers whatever the embedded model currently decides.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from router.gateway.app import create_app
from router.settings import Settings
from router.storage.decision_log import decisions
from tests.messages import TEAPOT, WHEELS
from tests.tables import row_counts


@pytest.fixture
def settings(settings: Settings, any_db_url: str) -> Settings:
    """These tests store cases, refunds and decisions: run them on SQLite and PostgreSQL."""
    return settings.model_copy(update={"database_url": any_db_url})


def _refunds(client: TestClient) -> list[tuple[str, int]]:
    from handlers.services.store import snapshot

    rows = snapshot(client.app.state.services.engine)["refunds"]
    return [(r["order_id"], r["amount_cents"]) for r in rows if r["id"] > 1]


def _hold(client: TestClient) -> tuple[str, str]:
    body = client.post("/v1/messages", json={"text": WHEELS, "kind": "refund"}).json()
    assert body["status"] == "awaiting_approval"
    (row,) = client.get("/v1/approvals").json()
    return body["case_id"], row["operation"]


def test_message_is_routed_handled_and_answered(client: TestClient) -> None:
    response = client.post("/v1/messages", json={"text": TEAPOT, "kind": "refund"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"case_id", "decision", "route", "status", "reply", "actions"}
    assert (body["route"], body["status"]) == ("refund", "resolved")
    assert body["decision"]["reason"] == "rule:form_kind"
    assert "It has been issued (refund 2)" in body["reply"]
    assert body["actions"][-1]["name"] == "refunds.request"
    assert _refunds(client) == [("O-1001", 4800)]
    engine = client.app.state.services.engine
    with engine.connect() as conn:
        row = conn.execute(select(decisions)).one()
    assert (row.case_id, row.outcome) == (body["case_id"], "resolved")


def test_model_routed_message_gets_a_reply(client: TestClient) -> None:
    body = client.post("/v1/messages", json={"text": TEAPOT}).json()
    assert body["route"] in ("refund", "clarify") and body["reply"]
    assert body["decision"]["scores"] is not None


def test_a_later_message_continues_the_case_by_rule(client: TestClient) -> None:
    first = client.post(
        "/v1/messages",
        json={
            "text": "This is ana.novak@example.com. Please change my shipping address to "
            "12 Oak Street.",
            "kind": "account",
        },
    ).json()
    assert first["status"] == "awaiting_customer"
    second = client.post(
        "/v1/messages", json={"text": "80-002 Gdansk, Poland.", "case_id": first["case_id"]}
    ).json()
    assert second["decision"]["reason"] == "rule:awaiting_customer_answer"
    assert (second["route"], second["status"]) == ("account", "resolved")
    case = client.get(f"/v1/cases/{first['case_id']}").json()
    assert [m["role"] for m in case["messages"]] == ["customer", "desk"] * 2
    assert len(case["decisions"]) == 2 and case["status"] == "resolved"


def test_an_answer_to_the_routers_question_is_scored_with_what_it_answers(
    client: TestClient,
) -> None:
    model = client.app.state.services.router.primary.model
    first = client.post("/v1/messages", json={"text": "hello?"}).json()
    assert first["route"] == "clarify"
    answer = "It's order O-1001."
    second = client.post(
        "/v1/messages", json={"text": answer, "case_id": first["case_id"]}
    ).json()
    together = model.score(f"hello?\n{answer}")
    alone = model.score(answer)
    expected = max(together.confidence, alone.confidence)
    assert second["decision"]["scores"]["confidence"] == pytest.approx(expected)
    engine = client.app.state.services.engine
    with engine.connect() as conn:
        texts = set(conn.execute(select(decisions.c.text)).scalars())
    assert texts == {"hello?", answer}


def test_held_case_is_routed_to_the_refund_flow_by_rule(client: TestClient) -> None:
    case_id, _ = _hold(client)
    body = client.post("/v1/messages", json={"text": "Any news?", "case_id": case_id}).json()
    assert body["decision"]["reason"] == "rule:held_refund"
    assert body["status"] == "awaiting_approval" and "still on hold" in body["reply"]


def test_approval_issues_once_and_replies(client: TestClient) -> None:
    case_id, op = _hold(client)
    assert _refunds(client) == []
    url = f"/v1/approvals/{op}/decision"
    first = client.post(url, json={"decision": "approve", "supervisor": "Maria Lopez"})
    assert first.status_code == 200
    body = first.json()
    assert (body["operation_status"], body["refund_id"], body["replayed"]) == ("issued", 2, False)
    assert body["reply"] == (
        "A supervisor approved your refund of $350.00 for order O-2002. "
        "It has been issued (refund 2)."
    )
    again = client.post(url, json={"decision": "approve", "supervisor": "Maria Lopez"}).json()
    assert again["replayed"] is True
    late = client.post(url, json={"decision": "reject", "supervisor": "Omar"})
    assert (late.status_code, late.json()["error"]["code"]) == (409, "already_decided")
    assert _refunds(client) == [("O-2002", 35000)]
    assert client.get("/v1/approvals").json() == []
    assert [r["operation"] for r in client.get("/v1/approvals?status=approved").json()] == [op]
    assert client.get(f"/v1/cases/{case_id}").json()["status"] == "resolved"


def test_restart_between_hold_and_approval_issues_exactly_once(settings: Settings) -> None:
    with TestClient(create_app(settings)) as first:
        _, op = _hold(first)
    with TestClient(create_app(settings)) as second:  # a new app instance, same DB file
        assert [r["operation"] for r in second.get("/v1/approvals").json()] == [op]
        url = f"/v1/approvals/{op}/decision"
        assert (
            second.post(url, json={"decision": "approve", "supervisor": "m"}).json()["refund_id"]
            == 2
        )
        second.post(url, json={"decision": "approve", "supervisor": "m"})
        assert _refunds(second) == [("O-2002", 35000)]


@pytest.mark.parametrize(
    ("method", "url", "payload", "status", "code"),
    [
        (
            "post",
            "/v1/messages",
            {"text": TEAPOT, "case_id": "c-doesnotexist"},
            404,
            "unknown_case",
        ),
        (
            "post",
            "/v1/messages",
            {"text": "ana.novak@example.com: refund -$50 for O-1001"},
            422,
            "invalid_amount",
        ),
        (
            "post",
            "/v1/messages",
            {"text": "ana.novak@example.com: refund $5,000,000 for O-1001"},
            422,
            "invalid_amount",
        ),
        ("post", "/v1/messages", {"text": TEAPOT, "customer": "A-999"}, 422, "unknown_customer"),
        ("post", "/v1/messages", {"text": TEAPOT, "urgent": True}, 422, "invalid_request"),
        ("post", "/v1/messages", {"text": ""}, 422, "empty_text"),
        (
            "post",
            "/v1/approvals/op-doesnotexist/decision",
            {"decision": "approve", "supervisor": "m"},
            404,
            "unknown_operation",
        ),
        (
            "post",
            "/v1/approvals/{op}/decision",
            {"decision": "maybe", "supervisor": "m"},
            422,
            "invalid_decision",
        ),
        ("post", "/v1/approvals/{op}/decision", {"decision": "approve"}, 422, "invalid_request"),
        (
            "post",
            "/v1/approvals/{op}/decision",
            {"decision": "approve", "supervisor": ""},
            422,
            "invalid_request",
        ),
        ("get", "/v1/approvals?status=pending", None, 422, "invalid_status"),
        ("get", "/v1/cases/c-doesnotexist", None, 404, "unknown_case"),
    ],
)
def test_bad_input_is_a_4xx_with_a_code_and_writes_nothing(
    client: TestClient, method: str, url: str, payload: dict | None, status: int, code: str
) -> None:
    _, op = _hold(client)
    before = row_counts(client.app.state.services.engine)
    kwargs = {"json": payload} if payload is not None else {}
    response = getattr(client, method)(url.format(op=op), **kwargs)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert row_counts(client.app.state.services.engine) == before
    assert client.get("/v1/approvals").json()[0]["status"] == "held"


@pytest.mark.parametrize("url", ["/v1/messages", "/v1/approvals/op-x/decision"])
def test_malformed_json_is_a_400(client: TestClient, url: str) -> None:
    before = row_counts(client.app.state.services.engine)
    response = client.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_json")
    assert row_counts(client.app.state.services.engine) == before

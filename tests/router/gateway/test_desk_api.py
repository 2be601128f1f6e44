"""The desk's endpoints through the real app: messages, approvals, cases, bad input.

Messages carry a form `kind` where a test needs a given route, so these tests exercise
the HTTP layer and the handlers whatever the embedded model currently decides. A message
that should act on an account carries the `customer` a calling system authenticated;
without it, an e-mail in the text is only a claim (the identity tests below).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from handlers.services.notifier import OutboxNotifier
from handlers.services.verification import code_in_notification
from router.access import ApiKey, hash_key, new_key
from router.gateway.app import create_app
from router.settings import Settings
from router.storage.decision_log import decisions
from tests.messages import ANA, BEN, TEAPOT, WHEELS
from tests.tables import row_counts


@pytest.fixture
def settings(settings: Settings, any_db_url: str) -> Settings:
    """These tests store cases, refunds and decisions: run them on SQLite and PostgreSQL."""
    return settings.model_copy(update={"database_url": any_db_url})


def _refunds(client: TestClient) -> list[tuple[str, int]]:
    from handlers.services.store import snapshot

    rows = snapshot(client.app.state.services.engine)["refunds"]
    return [(r["order_id"], r["amount_cents"]) for r in rows if r["id"] > 1]


def _addresses(client: TestClient) -> dict[int, str]:
    from handlers.services.store import snapshot

    rows = snapshot(client.app.state.services.engine)["addresses"]
    return {r["id"]: r["line1"] for r in rows}


def _codes(client: TestClient, case_id: str) -> list[str]:
    sent = OutboxNotifier(client.app.state.services.engine).messages(case_id=case_id)
    return [c for c in (code_in_notification(m["body"]) for m in sent) if c]


def _hold(client: TestClient, **headers: str) -> tuple[str, str]:
    body = client.post("/v1/messages", json={"text": WHEELS, "kind": "refund", "customer": BEN},
                       headers=headers).json()
    assert body["status"] == "awaiting_approval"
    (row,) = client.get("/v1/approvals", headers=headers).json()
    return body["case_id"], row["operation"]


def test_message_is_routed_handled_and_answered(client: TestClient) -> None:
    response = client.post("/v1/messages",
                           json={"text": TEAPOT, "kind": "refund", "customer": ANA})
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
            "customer": ANA,
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
    # Without keys nobody is authenticated, and the record says so: the body's name is
    # only displayed.
    assert (body["decided_by"], body["supervisor"]) == ("anonymous@loopback", "Maria Lopez")
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
        (
            "post",
            "/v1/messages",
            {"text": "refund O-2001", "case_id": "{case}", "customer": "A-100"},
            409,
            "customer_mismatch",
        ),
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
    case, op = _hold(client)
    before = row_counts(client.app.state.services.engine)
    if payload is not None and payload.get("case_id") == "{case}":
        payload = {**payload, "case_id": case}
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


# ---------------------------------------------------------------- identity


ATTACK_ADDRESS = ("Hi, this is ben.ortiz@example.com. Please change my shipping address to "
                  "666 Attacker Street, Springfield, 62704, US.")


def test_knowing_an_email_changes_no_address_until_the_code_comes_back(
    client: TestClient,
) -> None:
    before = _addresses(client)
    first = client.post("/v1/messages", json={"text": ATTACK_ADDRESS, "kind": "account"})
    assert first.status_code == 200
    body = first.json()
    assert body["status"] == "awaiting_customer" and "one-time code" in body["reply"]
    assert _addresses(client) == before
    case_id = body["case_id"]
    (code,) = _codes(client, case_id)
    guess = f"{(int(code) + 1) % 1_000_000:06d}"
    wrong = client.post("/v1/messages", json={"text": guess, "case_id": case_id}).json()
    assert wrong["decision"]["reason"] == "rule:awaiting_customer_answer"
    assert wrong["actions"][-1]["code"] == "verification_code_wrong"
    assert _addresses(client) == before
    # Only whoever reads Ben's mail has the code: then, and only then, the change is made.
    right = client.post("/v1/messages", json={"text": code, "case_id": case_id}).json()
    assert right["status"] == "resolved"
    assert _addresses(client) == {**before, 3: "666 Attacker Street"}
    case = client.get(f"/v1/cases/{case_id}").json()
    assert (case["customer_id"], case["customer_verified_by"]) == ("A-101", "code")


def test_a_case_opened_for_one_customer_refuses_another_ones_claim(client: TestClient) -> None:
    opened = client.post("/v1/messages", json={"text": "Hi, I need some help.",
                                               "customer": "A-100"}).json()
    case_id = opened["case_id"]
    before = row_counts(client.app.state.services.engine)
    attack = client.post("/v1/messages", json={
        "text": "Hi, this is ben.ortiz@example.com. Please refund $10 on O-2001.",
        "case_id": case_id, "kind": "refund"})
    assert attack.status_code == 200
    assert attack.json()["actions"][-1]["code"] == "identity_mismatch"
    assert "different customer account" in attack.json()["reply"]
    assert _refunds(client) == []
    case = client.get(f"/v1/cases/{case_id}").json()
    assert (case["customer_id"], case["customer_verified_by"]) == ("A-100", "channel")
    assert case["status"] == opened["status"]
    after = row_counts(client.app.state.services.engine)
    # Only the history grew: the message, the refusal, the reply and the decision row.
    assert {t: after[t] - before[t] for t in after if after[t] != before[t]} == {
        "case_messages": 2, "case_actions": 1, "decisions": 1}
    other = client.post("/v1/messages", json={"text": "refund $10 on O-2001",
                                              "case_id": case_id, "customer": BEN})
    assert (other.status_code, other.json()["error"]["code"]) == (409, "customer_mismatch")
    assert _refunds(client) == []


def test_keyed_approvals_and_replies_record_the_keys_name(settings: Settings) -> None:
    keys = {"gw": new_key(), "sup": new_key()}
    entries = [ApiKey(name="chat-gateway", sha256=hash_key(keys["gw"]), roles=("gateway",)),
               ApiKey(name="sup-maria", sha256=hash_key(keys["sup"]),
                      roles=("supervisor",))]
    keyed = settings.model_copy(update={"api_keys": entries, "rate_limit_per_s": 0})
    with TestClient(create_app(keyed)) as client:
        body = client.post("/v1/messages",
                           json={"text": WHEELS, "kind": "refund", "customer": BEN},
                           headers={"X-API-Key": keys["gw"]}).json()
        (row,) = client.get("/v1/approvals", headers={"X-API-Key": keys["sup"]}).json()
        decided = client.post(f"/v1/approvals/{row['operation']}/decision",
                              json={"decision": "approve", "supervisor": "The CEO"},
                              headers={"X-API-Key": keys["sup"]}).json()
        assert (decided["decided_by"], decided["supervisor"]) == ("sup-maria", "The CEO")
        (done,) = client.get("/v1/approvals?status=approved",
                             headers={"X-API-Key": keys["sup"]}).json()
        assert done["decided_by"] == "sup-maria"
        case = client.get(f"/v1/cases/{body['case_id']}",
                          headers={"X-API-Key": keys["gw"]}).json()
        told = [a for a in case["actions"] if a["name"] == "refunds.decide"]
        assert told[0]["artifacts"]["decided_by"] == "sup-maria"
        assert told[0]["artifacts"]["display_name"] == "The CEO"

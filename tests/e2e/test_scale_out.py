"""Two real gateway processes over one PostgreSQL database: no double refunds.

A deployment runs several `support-router serve` processes behind a load balancer. Each
process has its own connection pool and threads, so nothing in memory can serialise two
requests: only the database can. These tests start two real servers on two ports, on
one PostgreSQL schema, with the session's trained model, and race requests across them:

- 50 identical refund requests for one case, at once, half to each process → exactly
  one refund row and one refund operation; every other request replays its receipt.
- approvals and rejections of one held refund, at once, from both processes → exactly
  one decision wins, the refund is issued at most once (once if approval won, never if
  rejection won), and the customer is told once.
- 20 agents replying to one handed-off case, at once, half to each process → exactly one
  reply reaches the customer and resolves the case; the others get 409 `not_handed_off`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, select

from handlers.services.refunds import refund_operations
from handlers.services.store import refunds
from router.app.training import TrainResult
from router.storage.db import make_engine
from tests.conftest import postgres_schema
from tests.messages import ANA, BEN, COMPLAINT, TEAPOT, WHEELS
from tests.servers import GatewayProcess

START_TIMEOUT_S = 180.0


@pytest.fixture(scope="module")
def two_gateways(postgres_admin: Engine, trained: TrainResult,
                 tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[list[GatewayProcess], Engine]]:
    """Two `support-router serve` processes on two ports over one PostgreSQL schema.

    They start at the same time, so they also race each other's migration and seeding
    on the empty schema. Shared by this module's tests (each uses its own case and
    order), since starting a gateway costs seconds.
    """
    tmp_path = tmp_path_factory.mktemp("scale-out")
    with postgres_schema(postgres_admin) as postgres_url:
        yield from _serve_two(postgres_url, trained, tmp_path)


def _serve_two(postgres_url: str, trained: TrainResult,
               tmp_path: Path) -> Iterator[tuple[list[GatewayProcess], Engine]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
    env.update({
        "SUPPORT_ROUTER_DATABASE_URL": postgres_url,
        "SUPPORT_ROUTER_MODEL_DIR": str(trained.model_path.parent),
        "SUPPORT_ROUTER_POLICY_PATH": str(trained.policy_path),
        "SUPPORT_ROUTER_RATE_LIMIT_PER_S": "0",  # 50 requests from one address at once
    })
    gateways = []
    for name in ("a", "b"):
        env["SUPPORT_ROUTER_VAR_DIR"] = str(tmp_path / f"var-{name}")
        gateways.append(GatewayProcess())
        gateways[-1].start(dict(env), [], tmp_path / f"serve-{name}.log")
    engine = make_engine(postgres_url)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S  # for both: they start together
        for gateway in gateways:
            gateway.wait_ready(deadline - time.monotonic())
        yield gateways, engine
    finally:
        for gateway in gateways:
            gateway.stop()
        engine.dispose()


def _refund_rows(engine: Engine, order_id: str) -> list[tuple[int, int]]:
    with engine.connect() as conn:
        query = select(refunds.c.id, refunds.c.amount_cents).where(
            refunds.c.order_id == order_id)
        return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]


def _operations(engine: Engine, case_id: str) -> list[dict]:
    with engine.connect() as conn:
        query = select(refund_operations).where(refund_operations.c.case_id == case_id)
        return [dict(row._mapping) for row in conn.execute(query)]


def test_fifty_identical_refund_requests_across_two_processes_refund_once(
        two_gateways: tuple[list[GatewayProcess], Engine]) -> None:
    gateways, engine = two_gateways
    with httpx.Client(timeout=120) as client:
        opened = client.post(f"{gateways[0].url}/v1/messages",
                             json={"text": "Hello, I need help with a refund.",
                                   "kind": "refund"})
        assert opened.status_code == 200, opened.text
        case_id = opened.json()["case_id"]
        assert opened.json()["status"] == "awaiting_customer"  # asked which order
        start = threading.Barrier(50)

        def send(i: int) -> httpx.Response:
            start.wait()
            return client.post(f"{gateways[i % 2].url}/v1/messages",
                               json={"text": TEAPOT, "case_id": case_id, "kind": "refund",
                                     "customer": ANA})

        with ThreadPoolExecutor(max_workers=50) as pool:
            responses = list(pool.map(send, range(50)))

    assert [r.status_code for r in responses] == [200] * 50, \
        [r.text for r in responses if r.status_code != 200][:3]
    bodies = [r.json() for r in responses]
    assert {(b["route"], b["status"]) for b in bodies} == {("refund", "resolved")}
    receipts = [b["actions"][-1] for b in bodies]
    assert {a["name"] for a in receipts} == {"refunds.request"}
    assert sorted(a["artifacts"]["replayed"] for a in receipts) == [False] + [True] * 49
    # PostgreSQL sequences may skip ids after a racing insert rolls back: compare ids
    # with the one row written, not with a number.
    ((refund_id, amount),) = _refund_rows(engine, "O-1001")
    assert amount == 4800
    assert {a["artifacts"]["refund_id"] for a in receipts} == {refund_id}
    assert [(op["status"], op["refund_id"]) for op in _operations(engine, case_id)] == \
        [("issued", refund_id)]


def test_approvals_and_rejections_racing_on_one_held_refund(
        two_gateways: tuple[list[GatewayProcess], Engine]) -> None:
    gateways, engine = two_gateways
    with httpx.Client(timeout=120) as client:
        held = client.post(f"{gateways[0].url}/v1/messages",
                           json={"text": WHEELS, "kind": "refund", "customer": BEN})
        assert held.status_code == 200 and held.json()["status"] == "awaiting_approval"
        case_id = held.json()["case_id"]
        (row,) = client.get(f"{gateways[1].url}/v1/approvals").json()
        operation = row["operation"]
        # Ten supervisors' clicks at once: approve and reject alternate, and so do the
        # processes, so both decisions arrive at both processes.
        choices = [("approve", "reject")[i % 2] for i in range(10)]
        start = threading.Barrier(len(choices))

        def decide(i: int) -> httpx.Response:
            start.wait()
            return client.post(f"{gateways[(i // 2) % 2].url}/v1/approvals/{operation}/decision",
                               json={"decision": choices[i], "supervisor": f"sup-{i}"})

        with ThreadPoolExecutor(max_workers=len(choices)) as pool:
            responses = list(pool.map(decide, range(len(choices))))
        case = client.get(f"{gateways[1].url}/v1/cases/{case_id}").json()

    ok = [(choices[i], r.json()) for i, r in enumerate(responses) if r.status_code == 200]
    refused = [(choices[i], r) for i, r in enumerate(responses) if r.status_code != 200]
    assert ok, [r.text for r in responses]
    winner = ok[0][0]
    # Every accepted call is the winning decision; every other call is refused as decided.
    assert {choice for choice, _ in ok} == {winner}
    assert [choice for choice, _ in refused] == [c for c in choices if c != winner]
    assert {(r.status_code, r.json()["error"]["code"]) for _, r in refused} == \
        {(409, "already_decided")}
    assert sorted(body["replayed"] for _, body in ok) == [False] + [True] * (len(ok) - 1)

    (op,) = _operations(engine, case_id)
    assert op["decision"] == winner
    issued = _refund_rows(engine, "O-2002")
    if winner == "approve":
        assert [amount for _, amount in issued] == [35000]
        assert op["refund_id"] == issued[0][0]
    else:
        assert issued == []
    assert op["status"] == ("issued" if winner == "approve" else "rejected")
    told = [a for a in case["actions"] if a["name"] == "refunds.decide"]
    assert len(told) == 1, told  # the customer hears the outcome once
    assert case["status"] == "resolved"


def test_twenty_agents_replying_at_once_across_two_processes_reply_once(
        two_gateways: tuple[list[GatewayProcess], Engine]) -> None:
    gateways, _ = two_gateways
    with httpx.Client(timeout=120) as client:
        handed = client.post(f"{gateways[0].url}/v1/messages",
                             json={"text": COMPLAINT, "kind": "other"})
        assert handed.status_code == 200 and handed.json()["status"] == "handed_off"
        case_id = handed.json()["case_id"]
        start = threading.Barrier(20)

        def reply(i: int) -> httpx.Response:
            start.wait()
            return client.post(f"{gateways[i % 2].url}/v1/handoffs/{case_id}/reply",
                               json={"agent": f"agent-{i}", "text": f"Reply number {i}."})

        with ThreadPoolExecutor(max_workers=20) as pool:
            responses = list(pool.map(reply, range(20)))
        case = client.get(f"{gateways[1].url}/v1/cases/{case_id}").json()

    accepted = [r.json() for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert len(accepted) == 1, [r.text for r in responses]
    assert {(r.status_code, r.json()["error"]["code"]) for r in refused} == \
        {(409, "not_handed_off")}
    agent_messages = [m["text"] for m in case["messages"] if m["role"] == "agent"]
    assert agent_messages == [accepted[0]["reply"]]
    assert [a["artifacts"]["agent"] for a in case["actions"]
            if a["name"] == "handoff.agent_reply"] == [accepted[0]["agent"]]
    assert case["status"] == "resolved"

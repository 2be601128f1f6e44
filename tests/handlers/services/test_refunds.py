from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine, func, select

from handlers.services.refunds import (
    HOLD_ABOVE_CENTS,
    RefundService,
    ResponseLost,
    operation_key,
    retry_lost_responses,
)
from handlers.services.store import SqlStore, load_fixture, refunds, seed_store
from router.errors import InvalidInput, NotFound
from router.storage.db import make_engine, migrate
from tests.handlers.helpers import FIXTURE, TODAY


def _service(engine: Engine) -> RefundService:
    migrate(engine)
    seed_store(engine, load_fixture(FIXTURE), today=TODAY)
    return RefundService(engine, SqlStore(engine), today=TODAY)


@pytest.fixture
def service(engine: Engine) -> RefundService:
    return _service(engine)


@pytest.fixture
def any_engine(any_db_url: str) -> Iterator[Engine]:
    engine = make_engine(any_db_url)
    yield engine
    engine.dispose()


def _refund_rows(engine: Engine, order_id: str) -> list[tuple[int, int]]:
    with engine.connect() as conn:
        return [(r.id, r.amount_cents) for r in conn.execute(
            select(refunds).where(refunds.c.order_id == order_id))]


def _request(service: RefundService, *, case_id: str = "c-1", order_id: str = "O-1001",
             account_id: str = "A-100", amount_cents: int = 4800):
    return service.request(case_id=case_id, order_id=order_id, account_id=account_id,
                           amount_cents=amount_cents, reason="test")


def test_small_refund_is_issued(service: RefundService, engine: Engine) -> None:
    obs = _request(service)
    assert obs.code == "refund_issued" and obs.status == "success"
    assert obs.artifacts["refund_id"] == 2 and obs.artifacts["replayed"] is False
    assert _refund_rows(engine, "O-1001") == [(2, 4800)]


def test_large_refund_is_held_and_nothing_is_issued(service: RefundService,
                                                    engine: Engine) -> None:
    obs = _request(service, order_id="O-2002", account_id="A-101", amount_cents=35000)
    assert obs.code == "refund_held" and obs.status == "warning"
    assert obs.artifacts["refund_id"] is None
    assert _refund_rows(engine, "O-2002") == []
    assert [r.operation for r in service.approvals("held")] == [obs.artifacts["operation"]]


def test_limit_is_inclusive_at_200_dollars(service: RefundService) -> None:
    # $200.00 exactly is not "above $200": issued without approval.
    service_obs = _request(service, order_id="O-2002", account_id="A-101",
                           amount_cents=HOLD_ABOVE_CENTS)
    assert service_obs.code == "refund_issued"


def test_repeated_key_replays_the_first_receipt(service: RefundService,
                                                engine: Engine) -> None:
    first = _request(service)
    again = _request(service)
    assert again.code == "refund_issued"
    assert again.artifacts["replayed"] is True
    assert again.artifacts["refund_id"] == first.artifacts["refund_id"]
    assert again.artifacts["operation"] == first.artifacts["operation"]
    assert _refund_rows(engine, "O-1001") == [(2, 4800)]


def test_held_key_stays_held_when_repeated(service: RefundService) -> None:
    _request(service, order_id="O-2002", account_id="A-101", amount_cents=35000)
    again = _request(service, order_id="O-2002", account_id="A-101", amount_cents=35000)
    assert again.code == "refund_held" and again.artifacts["replayed"] is True


def test_service_never_refunds_past_the_order_total(service: RefundService,
                                                    engine: Engine) -> None:
    assert _request(service, amount_cents=3000).code == "refund_issued"
    other_case = _request(service, case_id="c-2", amount_cents=3000)
    assert other_case.code == "exceeds_refundable"
    assert other_case.artifacts["remaining_cents"] == 1800
    assert _refund_rows(engine, "O-1001") == [(2, 3000)]


@pytest.mark.parametrize("amount", [0, -100])
def test_non_positive_amounts_are_invalid(service: RefundService, amount: int) -> None:
    with pytest.raises(InvalidInput, match="positive"):
        _request(service, amount_cents=amount)


def test_write_then_lost_response_retried_leaves_one_refund(service: RefundService,
                                                            engine: Engine) -> None:
    service.faults.arm("lost_response")
    with pytest.raises(ResponseLost):
        _request(service)
    assert _refund_rows(engine, "O-1001") == [(2, 4800)]  # it did commit
    retried = _request(service)
    assert retried.artifacts["replayed"] is True
    assert _refund_rows(engine, "O-1001") == [(2, 4800)]


def test_retry_helper_goes_through_a_lost_response(service: RefundService,
                                                   engine: Engine) -> None:
    service.faults.arm("lost_response")
    obs = retry_lost_responses(lambda: _request(service))
    assert obs.code == "refund_issued" and obs.artifacts["refund_id"] == 2
    assert _refund_rows(engine, "O-1001") == [(2, 4800)]


def test_retry_helper_gives_up_with_an_error_that_says_retry(service: RefundService) -> None:
    service.faults.arm("lost_response", times=5)
    obs = retry_lost_responses(lambda: _request(service), attempts=3)
    assert obs.status == "error" and obs.retry and obs.stop
    assert obs.code == "refund_service_unreachable"


def test_unknown_fault_is_refused(service: RefundService) -> None:
    with pytest.raises(InvalidInput, match="unknown fault"):
        service.faults.arm("disk_on_fire")


def _held(service: RefundService) -> str:
    obs = _request(service, order_id="O-2002", account_id="A-101", amount_cents=35000)
    return obs.artifacts["operation"]


def test_approve_twice_issues_one_refund(service: RefundService, engine: Engine) -> None:
    op = _held(service)
    first = service.decide(op, "approve", supervisor="maria")
    second = service.decide(op, "approve", supervisor="maria")
    assert first.code == second.code == "refund_approved"
    assert first.artifacts["replayed"] is False and second.artifacts["replayed"] is True
    assert first.artifacts["refund_id"] == second.artifacts["refund_id"] == 2
    assert _refund_rows(engine, "O-2002") == [(2, 35000)]


def test_approve_then_reject_stays_approved(service: RefundService, engine: Engine) -> None:
    op = _held(service)
    service.decide(op, "approve", supervisor="maria")
    late = service.decide(op, "reject", supervisor="omar")
    assert late.code == "already_decided" and late.status == "error" and not late.retry
    assert service.get(op).status == "issued" and service.get(op).decided_by == "maria"
    assert _refund_rows(engine, "O-2002") == [(2, 35000)]


def test_reject_then_approve_is_never_issued(service: RefundService, engine: Engine) -> None:
    op = _held(service)
    assert service.decide(op, "reject", supervisor="maria").code == "refund_rejected"
    assert service.decide(op, "approve", supervisor="omar").code == "already_decided"
    again = _request(service, order_id="O-2002", account_id="A-101", amount_cents=35000)
    assert again.code == "refund_rejected" and again.artifacts["replayed"] is True
    assert _refund_rows(engine, "O-2002") == []


def test_approval_through_a_lost_response_issues_once(service: RefundService,
                                                      engine: Engine) -> None:
    op = _held(service)
    service.faults.arm("lost_response")
    obs = retry_lost_responses(lambda: service.decide(op, "approve", supervisor="maria"))
    assert obs.code == "refund_approved" and obs.artifacts["replayed"] is True
    assert _refund_rows(engine, "O-2002") == [(2, 35000)]


def test_decision_on_a_refund_that_needed_no_approval(service: RefundService) -> None:
    op = _request(service).artifacts["operation"]
    assert service.decide(op, "approve", supervisor="maria").code == "not_awaiting_approval"


def test_unknown_operation_and_bad_decision(service: RefundService) -> None:
    with pytest.raises(NotFound) as missing:
        service.decide("op-nope", "approve", supervisor="maria")
    assert missing.value.code == "unknown_operation"
    op = _held(service)
    with pytest.raises(InvalidInput) as bad:
        service.decide(op, "maybe", supervisor="maria")
    assert bad.value.code == "invalid_decision"
    assert service.get(op).status == "held"


def test_approvals_filter(service: RefundService) -> None:
    ops = [_request(service, case_id=f"c-{i}", order_id="O-2002", account_id="A-101",
                    amount_cents=amount).artifacts["operation"]
           for i, amount in enumerate((35000, 34000, 33000))]
    approved, rejected, held = ops
    service.decide(approved, "approve", supervisor="maria")
    service.decide(rejected, "reject", supervisor="maria")
    assert [r.operation for r in service.approvals("held")] == [held]
    assert [r.operation for r in service.approvals("approved")] == [approved]
    assert [r.operation for r in service.approvals("rejected")] == [rejected]
    assert len(service.approvals("all")) == 3
    # The held one can no longer be approved: the order has nothing left to refund.
    assert service.decide(held, "approve", supervisor="maria").code == "exceeds_refundable"
    assert service.get(held).status == "held"


def test_operation_key_is_case_order_amount() -> None:
    assert operation_key("c-1", "o-1001", 4800) == "c-1:O-1001:4800"


# -- concurrency, on SQLite and PostgreSQL ------------------------------------------------


def test_twenty_concurrent_identical_requests_issue_one_refund(any_engine: Engine) -> None:
    service = _service(any_engine)
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: _request(service), range(20)))
    assert {r.code for r in results} == {"refund_issued"}
    assert {r.artifacts["refund_id"] for r in results} == {2}
    assert sum(not r.artifacts["replayed"] for r in results) == 1
    assert _refund_rows(any_engine, "O-1001") == [(2, 4800)]


def test_twenty_concurrent_approvals_issue_one_refund(any_engine: Engine) -> None:
    service = _service(any_engine)
    op = _held(service)
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(
            lambda i: service.decide(op, "approve", supervisor=f"s{i}"), range(20)))
    assert {r.code for r in results} == {"refund_approved"}
    assert sum(not r.artifacts["replayed"] for r in results) == 1
    assert _refund_rows(any_engine, "O-2002") == [(2, 35000)]


def test_concurrent_different_keys_never_exceed_the_total(any_engine: Engine) -> None:
    service = _service(any_engine)
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(
            lambda i: _request(service, case_id=f"c-{i}", amount_cents=1000), range(10)))
    assert sum(r.code == "refund_issued" for r in results) == 4  # 4 × $10 ≤ $48 < 5 × $10
    with any_engine.connect() as conn:
        total = conn.execute(select(func.sum(refunds.c.amount_cents))
                             .where(refunds.c.order_id == "O-1001")).scalar_one()
    assert total == 4000

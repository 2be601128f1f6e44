from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import OperationalError

from handlers.observation import Observation
from handlers.services.refunds import (
    DAILY_CAP_CENTS,
    HOLD_ABOVE_CENTS,
    SYSTEM,
    RefundService,
    ResponseLost,
    hold_reason,
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


def test_giving_up_names_the_error_type_never_its_text() -> None:
    """The summary reaches API clients: no server address, SQL or driver message."""
    def unreachable() -> Observation:
        raise OperationalError("SELECT amount_cents FROM refunds WHERE order_id = %s",
                               ("O-1001",), Exception('connection to server at "10.0.0.5" '
                                                      'failed: password authentication'))

    obs = retry_lost_responses(unreachable, attempts=2)
    assert obs.code == "refund_service_unreachable" and "OperationalError" in obs.summary
    for leaked in ("10.0.0.5", "SELECT", "O-1001", "password"):
        assert leaked not in obs.summary and leaked not in obs.model_dump_json()


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
           for i, amount in enumerate((35000, 34000, 33000, 32000))]
    approved, rejected, *closed = ops
    service.decide(rejected, "reject", supervisor="maria")
    service.decide(approved, "approve", supervisor="maria")
    # Approving the first took the whole order: the two still held can never be issued.
    assert service.approvals("held") == []
    assert [r.operation for r in service.approvals("approved")] == [approved]
    assert [r.operation for r in service.approvals("rejected")] == [rejected]
    assert [r.operation for r in service.approvals("closed")] == closed
    assert len(service.approvals("all")) == 4
    late = service.decide(closed[0], "approve", supervisor="omar")
    assert late.code == "no_longer_refundable" and late.artifacts["replayed"] is True
    assert service.get(closed[0]).decided_by == SYSTEM


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


# -- the limits count what has left, not one request ---------------------------------------


def _ben(service: RefundService, amount_cents: int, *, case_id: str = "c-1",
         order_id: str = "O-2002"):
    return _request(service, case_id=case_id, order_id=order_id, account_id="A-101",
                    amount_cents=amount_cents)


@pytest.mark.parametrize(("amount", "order", "day", "reason"), [
    (20_000, 0, 0, None),
    (20_001, 0, 0, "order_limit"),
    (100, 19_900, 0, None),
    (101, 19_900, 0, "order_limit"),
    (100, 0, 19_900, None),
    (101, 0, 19_900, "daily_limit"),
    (15_100, 19_900, 19_900, "order_limit"),
])
def test_hold_reason(amount: int, order: int, day: int, reason: str | None) -> None:
    assert hold_reason(amount, order_unapproved_cents=order, day_unapproved_cents=day) == reason


def test_the_limits_are_200_dollars() -> None:
    assert HOLD_ABOVE_CENTS == DAILY_CAP_CENTS == 20_000


@pytest.mark.parametrize("second_case", ["c-1", "c-2"], ids=["same-case", "other-case"])
def test_a_split_refund_is_held_once_the_order_passes_the_limit(service: RefundService,
                                                               engine: Engine,
                                                               second_case: str) -> None:
    """The attack: $199 then $151 on O-2002 ($350) were both issued without approval."""
    assert _ben(service, 19_900).code == "refund_issued"
    second = _ben(service, 15_100, case_id=second_case)
    assert second.code == "refund_held" and second.artifacts["hold_reason"] == "order_limit"
    assert _refund_rows(engine, "O-2002") == [(2, 19_900)]
    assert _ben(service, 100, case_id="c-3").code == "refund_issued"  # $200.00 in all
    assert _ben(service, 1, case_id="c-4").code == "refund_held"


def test_the_daily_cap_counts_all_of_a_customers_orders(service: RefundService,
                                                        engine: Engine) -> None:
    assert _ben(service, 8_900, order_id="O-2001").code == "refund_issued"
    held = _ben(service, 15_000, case_id="c-2")
    assert held.code == "refund_held" and held.artifacts["hold_reason"] == "daily_limit"
    assert _ben(service, 11_100, case_id="c-3").code == "refund_issued"  # $200.00 that day
    assert _refund_rows(engine, "O-2002") == [(3, 11_100)]


def test_the_daily_cap_is_per_shop_day_the_order_limit_is_not(engine: Engine) -> None:
    day_one = _service(engine)
    assert _ben(day_one, 8_900, order_id="O-2001").code == "refund_issued"
    assert _ben(day_one, 15_000, case_id="c-2").code == "refund_held"  # same day: cap
    day_two = RefundService(engine, SqlStore(engine), today=TODAY + timedelta(days=1))
    assert _ben(day_two, 15_000, case_id="c-3").code == "refund_issued"  # a new day
    later = _ben(day_two, 10_000, case_id="c-4")  # O-2002 would pass $200 without approval
    assert later.code == "refund_held" and later.artifacts["hold_reason"] == "order_limit"


def test_refunds_a_supervisor_approved_do_not_count(service: RefundService,
                                                    engine: Engine) -> None:
    op = _ben(service, 25_000).artifacts["operation"]
    assert service.decide(op, "approve", supervisor="maria").code == "refund_approved"
    assert _ben(service, 10_000, case_id="c-2").code == "refund_issued"
    assert _refund_rows(engine, "O-2002") == [(2, 25_000), (3, 10_000)]


def test_a_refund_written_outside_the_service_counts(service: RefundService,
                                                    engine: Engine) -> None:
    SqlStore(engine).add_refund("O-2002", 15_000, "by hand", today=TODAY)
    assert _ben(service, 10_000).code == "refund_held"


# -- held refunds that can no longer be issued are closed ----------------------------------


def test_a_held_refund_is_closed_when_another_takes_the_remainder(service: RefundService,
                                                                 engine: Engine) -> None:
    """The attack's end: $300 held, then $199 issued; approving the $300 was a 409 and the
    refund stayed held for ever."""
    held = _ben(service, 30_000, case_id="c-0").artifacts["operation"]
    assert _ben(service, 19_900).code == "refund_issued"
    closed = service.get(held)
    assert closed.status == "closed" and closed.decided_by == SYSTEM
    assert service.approvals("held") == []
    assert [r.operation for r in service.closed_on(["o-2002"])] == [held]
    decided = service.decide(held, "approve", supervisor="maria")
    assert decided.code == "no_longer_refundable" and decided.status == "warning"
    assert service.decide(held, "reject", supervisor="omar").code == "no_longer_refundable"
    rest = _ben(service, 15_100, case_id="c-2")
    assert rest.code == "refund_held"
    service.decide(rest.artifacts["operation"], "approve", supervisor="maria")
    assert _refund_rows(engine, "O-2002") == [(2, 19_900), (3, 15_100)]


def test_approving_an_unissuable_refund_closes_it(service: RefundService,
                                                 engine: Engine) -> None:
    op = _held(service)
    SqlStore(engine).add_refund("O-2002", 100, "by hand", today=TODAY)
    obs = service.decide(op, "approve", supervisor="maria")
    assert obs.code == "no_longer_refundable" and obs.artifacts["replayed"] is False
    assert obs.artifacts["status"] == "closed" and obs.artifacts["decided_by"] == "maria"
    again = service.decide(op, "approve", supervisor="maria")
    assert again.code == "no_longer_refundable" and again.artifacts["replayed"] is True
    assert _refund_rows(engine, "O-2002") == [(2, 100)]
    assert _request(service, order_id="O-2002", account_id="A-101",
                    amount_cents=35000).code == "no_longer_refundable"  # the key stays closed


def test_recheck_closes_only_what_cannot_be_paid(service: RefundService,
                                                engine: Engine) -> None:
    op = _held(service)
    assert service.recheck(op).status == "held"
    small = _ben(service, 30_000, case_id="c-2").artifacts["operation"]
    SqlStore(engine).add_refund("O-2002", 1_000, "by hand", today=TODAY)
    first = service.recheck(op)
    assert first.status == "closed" and first.replayed is False
    assert service.recheck(op).replayed is True
    assert service.recheck(small).status == "held"  # $300 is still left
    assert service.recheck("op-nope") is None


# -- concurrency: the check and the write are one step, on SQLite and PostgreSQL ----------


def _together(calls: list) -> list:
    barrier = threading.Barrier(len(calls))

    def run(call):  # type: ignore[no-untyped-def]
        barrier.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def _unapproved_total(engine: Engine, order_ids: tuple[str, ...]) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.coalesce(func.sum(refunds.c.amount_cents), 0))
                            .where(refunds.c.order_id.in_(order_ids))).scalar_one()


def test_concurrent_split_requests_on_one_order_stay_under_the_limit(
        any_engine: Engine) -> None:
    service = _service(any_engine)
    results = _together([lambda i=i: _ben(service, 5_000, case_id=f"c-{i}")
                         for i in range(10)])
    assert sorted(r.code for r in results) == ["refund_held"] * 6 + ["refund_issued"] * 4
    assert _unapproved_total(any_engine, ("O-2002",)) == 20_000


def test_concurrent_requests_on_two_orders_of_one_customer_respect_the_daily_cap(
        any_engine: Engine) -> None:
    service = _service(any_engine)
    calls = [lambda i=i: _ben(service, 1_500, case_id=f"a-{i}", order_id="O-2001")
             for i in range(5)]
    calls += [lambda i=i: _ben(service, 5_000, case_id=f"b-{i}") for i in range(5)]
    results = _together(calls)
    total = _unapproved_total(any_engine, ("O-2001", "O-2002"))
    assert total <= DAILY_CAP_CENTS
    held = [r.artifacts["amount_cents"] for r in results if r.code == "refund_held"]
    issued = [r.artifacts["amount_cents"] for r in results if r.code == "refund_issued"]
    assert sum(issued) == total and len(held) + len(issued) == 10
    # Each one held would have passed the cap on top of what was issued before it.
    assert all(total + amount > DAILY_CAP_CENTS for amount in held)


def test_a_concurrent_approval_and_request_never_overpay_or_leave_it_held(
        any_engine: Engine) -> None:
    service = _service(any_engine)
    op = _ben(service, 30_000, case_id="c-held").artifacts["operation"]
    approve, request = _together([
        lambda: service.decide(op, "approve", supervisor="maria"),
        lambda: _ben(service, 19_900, case_id="c-new"),
    ])
    final = service.get(op)
    assert final.status in ("issued", "closed")
    if final.status == "issued":  # the approval went first: $50 left, the request refused
        assert approve.code == "refund_approved" and request.code == "exceeds_refundable"
        assert _refund_rows(any_engine, "O-2002") == [(2, 30_000)]
    else:  # the request went first and closed the held refund
        assert request.code == "refund_issued" and approve.code == "no_longer_refundable"
        assert _refund_rows(any_engine, "O-2002") == [(2, 19_900)]

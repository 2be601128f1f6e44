from __future__ import annotations

from datetime import date

import pytest

from handlers.services.store import Account, Order
from handlers.shop_rules import check_can_write, check_refund, split_preferences

TODAY = date(2026, 3, 15)
ANA = Account("A-100", "Ana Novak", "ana.novak@example.com", "active")
CHLOE = Account("A-102", "Chloe Park", "chloe.park@example.com", "suspended")


def _order(*, status: str = "delivered", delivered: date | None = date(2026, 3, 13),
           account_id: str = "A-100", total: int = 4800) -> Order:
    return Order("O-1001", account_id, status, "Ceramic teapot", total, date(2026, 3, 9),
                 delivered)


def test_full_refund_when_no_amount_is_stated() -> None:
    obs = check_refund(_order(), order_id="O-1001", account=ANA, refunded_cents=0,
                       requested_cents=None, today=TODAY)
    assert obs.code == "refund_allowed" and obs.artifacts["amount_cents"] == 4800


def test_partial_refund_of_the_remainder() -> None:
    obs = check_refund(_order(), order_id="O-1001", account=ANA, refunded_cents=1000,
                       requested_cents=None, today=TODAY)
    assert obs.artifacts["amount_cents"] == 3800


def test_thirty_days_after_delivery_is_still_inside_the_window() -> None:
    obs = check_refund(_order(delivered=date(2026, 2, 13)), order_id="O-1001", account=ANA,
                       refunded_cents=0, requested_cents=None, today=TODAY)
    assert obs.code == "refund_allowed"


@pytest.mark.parametrize(
    ("order", "refunded", "requested", "code"),
    [
        (None, 0, None, "order_not_found"),
        (_order(account_id="A-101"), 0, None, "order_not_yours"),
        (_order(status="shipped", delivered=None), 0, None, "order_not_delivered"),
        (_order(status="cancelled", delivered=None), 0, None, "order_not_delivered"),
        (_order(delivered=date(2026, 2, 12)), 0, None, "outside_refund_window"),
        (_order(), 4800, None, "already_refunded"),
        (_order(), 4000, 1500, "exceeds_refundable"),
        (_order(), 0, 4801, "exceeds_refundable"),
    ],
)
def test_refusals(order: Order | None, refunded: int, requested: int | None, code: str) -> None:
    obs = check_refund(order, order_id="O-1001", account=ANA, refunded_cents=refunded,
                       requested_cents=requested, today=TODAY)
    assert obs.status == "error" and obs.code == code
    assert obs.retry is False and obs.stop is True


def test_someone_elses_order_reveals_nothing_about_it() -> None:
    obs = check_refund(_order(account_id="A-101"), order_id="O-1001", account=ANA,
                       refunded_cents=0, requested_cents=None, today=TODAY)
    assert set(obs.artifacts) == {"order_id", "account_id"}


def test_suspended_accounts_get_no_writes() -> None:
    assert check_can_write(ANA, what="refunds").ok
    refused = check_can_write(CHLOE, what="refunds")
    assert refused.code == "account_suspended" and refused.stop


def test_split_preferences() -> None:
    supported, unknown = split_preferences({"sms_notifications": "on", "dark_mode": "on"})
    assert supported == {"sms_notifications": "on"} and unknown == ["dark_mode"]

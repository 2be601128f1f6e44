"""The shop's rules as plain `if` statements: pure functions over store rows.

Each check returns an observation: `success` with the facts the next step needs, or an
`error` naming the rule that refused (`code`) and the facts a reply needs to say why.
Nothing here reads the clock: `today` is passed in.
"""

from __future__ import annotations

from datetime import date

from handlers.observation import Observation, fail, success
from handlers.services.store import Account, Order

REFUND_WINDOW_DAYS = 30
SUPPORTED_PREFERENCES: dict[str, str] = {
    "marketing_emails": "on/off",
    "sms_notifications": "on/off",
    "language": "ISO 639-1 code",
    "paperless_billing": "on/off",
}


def check_can_write(account: Account, *, what: str) -> Observation:
    """Suspended accounts get no writes of any kind."""
    if account.suspended:
        return fail("account_suspended", f"account {account.id} is suspended; no {what}",
                    retry=False, stop=True, account_id=account.id, what=what,
                    hint="a suspended account must be reinstated by the accounts team first")
    return success("account_active", f"account {account.id} may be changed",
                   account_id=account.id)


def check_refund(order: Order | None, *, order_id: str, account: Account,
                 refunded_cents: int, requested_cents: int | None,
                 today: date) -> Observation:
    """Whether this customer may get this refund now, and of how much.

    No stated amount means the full remainder (total − already refunded).
    """
    facts: dict = {"order_id": order_id, "account_id": account.id}
    if order is None:
        return fail("order_not_found", f"no order {order_id}", retry=False, stop=True,
                    hint="check the order number", **facts)
    facts |= {"item": order.item, "total_cents": order.total_cents,
              "refunded_cents": refunded_cents, "order_status": order.status}
    if order.account_id != account.id:
        # The reply must not reveal anything about someone else's order.
        return fail("order_not_yours", f"{order.id} does not belong to {account.id}",
                    retry=False, stop=True, order_id=order_id, account_id=account.id)
    if order.status != "delivered" or order.delivered_on is None:
        return fail("order_not_delivered", f"{order.id} is {order.status}, not delivered",
                    retry=False, stop=True, **facts)
    days = (today - order.delivered_on).days
    facts |= {"delivered_on": order.delivered_on.isoformat(), "days_since_delivery": days,
              "window_days": REFUND_WINDOW_DAYS}
    if days > REFUND_WINDOW_DAYS:
        return fail("outside_refund_window",
                    f"{order.id} was delivered {days} days ago (> {REFUND_WINDOW_DAYS})",
                    retry=False, stop=True, **facts)
    remaining = order.total_cents - refunded_cents
    facts["remaining_cents"] = remaining
    if remaining <= 0:
        return fail("already_refunded", f"{order.id} is already refunded in full",
                    retry=False, stop=True, **facts)
    if requested_cents is not None and requested_cents > remaining:
        return fail("exceeds_refundable",
                    f"{requested_cents} cents asked, {remaining} cents left on {order.id}",
                    retry=False, stop=True, amount_cents=requested_cents, **facts)
    amount = remaining if requested_cents is None else requested_cents
    return success("refund_allowed", f"{amount} cents may be refunded on {order.id}",
                   amount_cents=amount, **facts)


def split_preferences(changes: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Supported changes, and the names of the keys the shop does not support."""
    supported = {k: v for k, v in changes.items() if k in SUPPORTED_PREFERENCES}
    return supported, [k for k in changes if k not in SUPPORTED_PREFERENCES]

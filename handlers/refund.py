"""The refund handler: typed extraction, the shop's rules in code, one refund-service call.

Steps, each recorded as an action with its observation:

0. a message that says the customer wants no refund ("I don't want a refund, just fix
   the billing address", `declines_refund`) gets `refund_not_wanted`: nothing is done or
   looked up;
1. identify the customer (ask for the e-mail when unknown); an identity the customer
   only claimed is verified first (`IdentityGate.before_write`: a one-time code), and
   nothing about the account or its orders is said or done until it is;
2. suspended accounts get no refund;
3. exactly one order id (ask which order when none or several; on a case with a refund
   held for a supervisor and no order named, report that refund's state — closing it
   first when the order can no longer pay it);
4. the amount, read from the customer's own words (`customer_words`: not from `>`-quoted
   lines, a forwarded or earlier message, a signature or a disclaimer) of the newest
   message that states one or asks for the whole: exactly one amount in dollars (or with
   no currency named). Ask when the text holds anything amount-like that does not read
   as exactly one amount ("$1e5", "refund 20", "quince dólares"), several different
   amounts, or another currency. Ask too when the customer's own words name no amount
   but what the message quotes or forwards does (`earlier_messages`,
   `amount_in_earlier_message`: "Yes please" above our quoted offer of two amounts, "any
   update?" above their own quoted request, words written below a forwarded message).
   The full remainder when neither names an amount (one in a signature or a disclaimer
   is none) or the customer asks for the whole;
5. `policy_checks.check_refund` (ownership, delivered, 30-day window, remainder);
6. `RefundService.request`, retried through a lost response (the key makes it safe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

from handlers.extract import (
    AmountReading,
    InvalidAmount,
    customer_words,
    declines_refund,
    earlier_messages,
    find_order_ids,
    read_amounts,
    strip_markup,
)
from handlers.flow import FlowInput, HandlerResult
from handlers.identity import AWAITING_CODE, IdentityGate
from handlers.observation import Observation, fail
from handlers.services.cases import Action
from handlers.services.refunds import (
    Receipt,
    RefundService,
    receipt_observation,
    retry_lost_responses,
)
from handlers.services.store import Store
from handlers.shop_rules import check_can_write, check_refund

SHOP_CURRENCIES = frozenset({None, "USD"})
_REASON_CHARS = 200
CLOSE_ACTION = "refunds.close"
"""The case action that tells a customer their held refund was closed (one per operation)."""


def _ask(code: str, summary: str, **artifacts: Any) -> Observation:
    return fail(code, summary, retry=False, stop=True,
                next_actions=["ask_customer"], **artifacts)


def _distinct_orders(flow: FlowInput) -> list[str]:
    return list(dict.fromkeys(o.upper() for o in flow.first_found(find_order_ids)))


def _amount_reading(flow: FlowInput) -> tuple[AmountReading, list[str]]:
    """What the newest message whose own words say anything about the amount says, or
    else the amounts that message quotes or forwards (to ask about)."""
    for text in flow.texts_newest_first():
        own = customer_words(text)
        reading = read_amounts(own)
        if reading.amount_like or reading.asks_full:
            return reading, []
        # Nothing in their own words, but an amount in what the message quotes or
        # forwards: asked about, never taken, and never assumed away into the whole
        # remainder ("Yes please" above our quoted offer of two amounts; "any update?"
        # above their own quoted request). A signature's or disclaimer's is no amount.
        elsewhere = _amounts_in(earlier_messages(text))
        if elsewhere:
            return reading, elsewhere
    return AmountReading(), []


def _amounts_in(text: str) -> list[str]:
    """Everything amount-like in `text`, as written (an impossible one included)."""
    try:
        found = read_amounts(text)
    except InvalidAmount as exc:
        return [exc.raw]
    return [*(a.raw for a in found.amounts), *found.unreadable]


class RefundHandler:
    def __init__(self, store: Store, refunds: RefundService, *, today: date,
                 identity: IdentityGate | None = None) -> None:
        self._store = store
        self._refunds = refunds
        self._today = today
        self._identity = identity or IdentityGate(store)

    def handle(self, flow: FlowInput) -> HandlerResult:
        actions: list[Action] = []
        if declines_refund(customer_words(flow.text)):
            return HandlerResult("resolved", [Action("refund.check", fail(
                "refund_not_wanted", "the customer says they want no refund",
                retry=False, stop=True, next_actions=["ask_customer"]))])

        def done(obs: Observation, *, status: str = "resolved", awaiting: bool = False,
                 account_id: str | None = None, name: str = "refund.check") -> HandlerResult:
            actions.append(Action(name, obs))
            return HandlerResult(status=status, actions=actions,  # type: ignore[arg-type]
                                 account_id=account_id, awaiting=awaiting)

        account, who = self._identity.identify(flow)
        if account is None:
            return done(who, status="awaiting_customer", awaiting=True, name="identity.lookup")
        actions.append(Action("identity.lookup", who))
        unverified = self._identity.before_write(flow, account, who)
        if unverified is not None:
            waits = unverified.code in AWAITING_CODE
            return done(unverified, status="awaiting_customer" if waits else "resolved",
                        awaiting=waits, account_id=account.id, name="identity.verify")
        writable = check_can_write(account, what="refunds")
        if not writable.ok:
            return done(writable, account_id=account.id, name="policy.account")

        order_ids = _distinct_orders(flow)
        if not order_ids and flow.has_held_refund:
            held = [r for r in self._refunds.for_case(flow.case_id) if r.status == "held"]
            now = [r for r in map(self._refunds.recheck, (h.operation for h in held)) if r]
            for closed in (r for r in now if r.status == "closed"):
                actions.append(Action(CLOSE_ACTION,
                                      receipt_observation(replace(closed, replayed=False))))
            still = [r for r in now if r.status == "held"]
            if still:
                return done(receipt_observation(replace(still[-1], replayed=True)),
                            status="awaiting_approval",
                            account_id=account.id, name="refunds.status")
            if now:
                return HandlerResult(status="resolved", actions=actions, account_id=account.id)
        if not order_ids:
            return done(_ask("order_missing", "no order id in the message"),
                        status="awaiting_customer", awaiting=True, account_id=account.id)
        if len(order_ids) > 1:
            return done(_ask("order_ambiguous", f"several orders: {order_ids}",
                             order_ids=order_ids),
                        status="awaiting_customer", awaiting=True, account_id=account.id)
        order_id = order_ids[0]

        reading, mentioned = _amount_reading(flow)
        if mentioned:
            return done(_ask("amount_in_earlier_message", "no amount of the customer's own; "
                             "the earlier message in it names some", order_id=order_id,
                             mentioned=mentioned),
                        status="awaiting_customer", awaiting=True, account_id=account.id)
        if reading.unreadable:
            return done(_ask("amount_unreadable", "amount-like text that is not one amount",
                             order_id=order_id, unreadable=reading.unreadable),
                        status="awaiting_customer", awaiting=True, account_id=account.id)
        amounts = reading.amounts
        if len(amounts) > 1:
            return done(_ask("amount_ambiguous", "several amounts", order_id=order_id,
                             amounts_cents=[a.cents for a in amounts]),
                        status="awaiting_customer", awaiting=True, account_id=account.id)
        requested = amounts[0] if amounts else None
        if requested is not None and requested.currency not in SHOP_CURRENCIES:
            return done(_ask("currency_unsupported", f"amount in {requested.currency}",
                             order_id=order_id, raw=requested.raw),
                        status="awaiting_customer", awaiting=True, account_id=account.id)

        def earlier() -> list[Receipt]:
            return [r for r in self._refunds.for_case(flow.case_id)
                    if r.order_id == order_id and r.account_id == account.id
                    and (requested is None or r.amount_cents == requested.cents)]

        asked = earlier()
        if asked:  # asked again on this case: the service replays its first receipt
            return self._request(flow, order_id, account.id, asked[-1].amount_cents, done)

        order = self._store.order(order_id)
        check = check_refund(
            order, order_id=order_id, account=account,
            refunded_cents=self._store.refunded_cents(order_id) if order else 0,
            requested_cents=requested.cents if requested else None, today=self._today,
        )
        if not check.ok:
            # An identical request on this case (another thread or process) may have
            # committed between the look-up above and the check, and its refund now
            # makes this one look "already refunded". Its operation was committed with
            # that refund, so it is visible now: replay its receipt, as if we had been
            # second all along.
            asked = earlier()
            if asked:
                return self._request(flow, order_id, account.id, asked[-1].amount_cents,
                                     done)
            return done(check, account_id=account.id, name="policy.refund")
        actions.append(Action("policy.refund", check))

        return self._request(flow, order_id, account.id, int(check.artifacts["amount_cents"]),
                             done)

    def _request(self, flow: FlowInput, order_id: str, account_id: str, amount_cents: int,
                 done: Callable[..., HandlerResult]) -> HandlerResult:
        result = retry_lost_responses(lambda: self._refunds.request(
            case_id=flow.case_id, order_id=order_id, account_id=account_id,
            amount_cents=amount_cents,
            reason=" ".join(strip_markup(customer_words(flow.text) or flow.text).split()
                            )[:_REASON_CHARS],
        ))
        if result.code == "refund_held":
            status = "awaiting_approval"
        elif result.code == "refund_service_unreachable":
            status = "awaiting_customer"
        else:
            status = "resolved"
        return done(result, status=status, awaiting=status == "awaiting_customer",
                    account_id=account_id, name="refunds.request")

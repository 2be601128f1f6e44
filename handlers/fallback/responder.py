"""The embedded responder for the `other` route: FAQ, own-order status, or a person.

Used when no chat model is configured (the offline default). Deterministic and
read-only — it never writes to the shop:

1. A message naming orders (O-1234) is about those orders. When the customer is
   verified (authenticated by the calling system, or proven on the case) and every
   named order is on their account, the reply states each order's status from the
   store. Otherwise — unknown customer, an identity only claimed in the text, an order
   that isn't theirs, an order that doesn't exist — the message goes to a person, and
   the reply says nothing about any order (it cannot tell "not yours" from "does not
   exist").
2. Otherwise the FAQ: the best section by TF-IDF similarity answers when its score
   reaches the threshold chosen on the labelled questions (`handlers.fallback.faq`).
3. Otherwise the human queue: the case is `handed_off` and the customer is told that a
   colleague will reply here.

Every step is an observation in the case history; the reply is a template from
`handlers.replies` (a FAQ answer is the section's own text from `datasets/faq/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from handlers.extract import find_order_ids
from handlers.fallback.faq import (
    DEFAULT_FAQ_DIR,
    FaqIndex,
    fit_threshold,
    load_questions,
    load_sections,
)
from handlers.flow import FlowInput, HandlerResult
from handlers.identity import identify, is_verified
from handlers.observation import Observation, success
from handlers.services.cases import Action
from handlers.services.store import Order, Store

ORDER_STATUS_CODES = {"shipped": "order_status_shipped", "delivered": "order_status_delivered",
                      "cancelled": "order_status_cancelled"}


class Fallback(Protocol):
    """What the desk needs from the `other` route: this responder or the agent."""

    def handle(self, flow: FlowInput) -> HandlerResult: ...


@dataclass(frozen=True)
class FaqModel:
    """A fitted FAQ index and the threshold chosen for it on the labelled questions."""

    index: FaqIndex
    threshold: float


@lru_cache(maxsize=4)
def load_faq_model(faq_dir: Path = DEFAULT_FAQ_DIR) -> FaqModel:
    """Fit the index and choose the threshold (cached per folder; a few milliseconds)."""
    sections = load_sections(faq_dir)
    index = FaqIndex().fit(sections)
    return FaqModel(index, fit_threshold(index, load_questions(faq_dir, sections=sections)))


def handoff(reason: str, summary: str, **artifacts: Any) -> HandlerResult:
    """Send the case to the human queue; the customer is told a colleague will reply."""
    obs = success("handed_off", f"sent to the human support queue: {summary}",
                  queue="human", reason=reason, next_actions=["human_reply"], **artifacts)
    return HandlerResult("handed_off", [Action("handoff.human_queue", obs)])


def order_status_observation(order: Order) -> Observation:
    code = ORDER_STATUS_CODES.get(order.status, "order_status_open")
    return success(code, f"order {order.id} is {order.status}", order_id=order.id,
                   item=order.item, order_status=order.status,
                   placed_on=order.placed_on.isoformat(),
                   delivered_on=order.delivered_on.isoformat() if order.delivered_on else None)


class Responder:
    """Answers `other`-route messages without a chat model (see the module docstring)."""

    def __init__(self, store: Store, faq: FaqModel) -> None:
        self.store = store
        self.faq = faq

    def handle(self, flow: FlowInput) -> HandlerResult:
        order_ids = find_order_ids(flow.text)
        if order_ids:
            return self._order_status(flow, order_ids)
        hit = self.faq.index.best(flow.text)
        facts: dict[str, Any] = {"section": hit.section.id, "score": round(hit.score, 4),
                                 "threshold": round(self.faq.threshold, 4)}
        if hit.score < self.faq.threshold:
            return handoff("no_confident_answer", "no FAQ section matches confidently",
                           **facts)
        obs = success("faq_answer", f"answered from FAQ section {hit.section.id}",
                      answer=hit.section.answer, title=hit.section.title, **facts)
        return HandlerResult("resolved", [Action("fallback.faq", obs)])

    def _order_status(self, flow: FlowInput, order_ids: list[str]) -> HandlerResult:
        account, identity = identify(self.store, flow)
        if account is None:
            return handoff("customer_unknown", "order question from an unidentified "
                           "customer", order_ids=order_ids)
        if not is_verified(identity):
            return handoff("customer_unverified", "order question from a customer whose "
                           "identity is only claimed", order_ids=order_ids)
        orders = [self.store.order(order_id) for order_id in order_ids]
        if any(o is None or o.account_id != account.id for o in orders):
            # Not found and not theirs look the same to the customer: nothing is revealed.
            return handoff("order_not_on_account", "an order named is not on the "
                           "customer's account", order_ids=order_ids, account_id=account.id)
        actions = [Action("identity.identify", identity)]
        actions += [Action("store.order_status", order_status_observation(o))
                    for o in orders if o is not None]
        return HandlerResult("resolved", actions, account_id=account.id)


def build_responder(store: Store, faq_dir: Path = DEFAULT_FAQ_DIR) -> Responder:
    return Responder(store, load_faq_model(faq_dir))

"""Code rules that decide before the model when a fact in our own data already does.

Each rule is a small named function: it returns the route it decides, or None to pass.
The first rule that decides wins, and the decision's reason is `rule:<name>`. Rules read
only structured fields set by the calling system or our own case records — never the
customer's text, so nothing a customer writes can trigger one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from router.contracts import DecisionRoute


class RouteRequest(BaseModel):
    """What the router needs to decide: the text plus facts known from our own data."""

    text: str
    case_id: str | None = None
    customer: str | None = None
    kind: DecisionRoute | None = None
    """A structured request kind, e.g. from a web form's dropdown."""
    case_route: DecisionRoute | None = None
    """The route of the case's open flow that is waiting for this customer's answer."""
    case_has_held_refund: bool = False
    earlier_texts: tuple[str, ...] = ()
    """The case's earlier messages, when this one answers the router's clarifying question."""


Rule = Callable[[RouteRequest], DecisionRoute | None]


@dataclass(frozen=True)
class RuleHit:
    name: str
    route: DecisionRoute


def held_refund(request: RouteRequest) -> DecisionRoute | None:
    """A case with a refund held for a supervisor stays in the refund flow."""
    return "refund" if request.case_has_held_refund else None


def awaiting_customer_answer(request: RouteRequest) -> DecisionRoute | None:
    """An answer to our own clarifying question continues the flow that asked it."""
    return request.case_route if request.case_route in ("refund", "account") else None


def form_kind(request: RouteRequest) -> DecisionRoute | None:
    """The calling system already knows the kind (a form field), so the model is not asked."""
    return request.kind if request.kind in ("refund", "account", "other") else None


DEFAULT_RULES: tuple[Rule, ...] = (held_refund, awaiting_customer_answer, form_kind)


def first_rule_hit(request: RouteRequest, rules: Sequence[Rule] = DEFAULT_RULES) -> RuleHit | None:
    for rule in rules:
        route = rule(request)
        if route is not None:
            return RuleHit(name=rule.__name__, route=route)
    return None

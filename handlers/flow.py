"""What the desk hands a handler, and what a handler hands back.

A handler sees the current message and the customer's earlier messages of the same
open flow (a case awaiting the customer's answer), so an answer to a question ("it's
order O-1001", "the city is Gdansk") completes the request without repeating it.
Facts are looked up in the current message first, then in earlier ones, newest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from handlers.services.cases import Action, CaseStatus

T = TypeVar("T")


@dataclass(frozen=True)
class FlowInput:
    case_id: str
    text: str
    earlier_texts: Sequence[str] = ()
    """The customer's earlier messages in the open flow, oldest first."""
    customer: str | None = None
    """The customer the calling system authenticated (account id or e-mail), if any."""
    case_customer_id: str | None = None
    """The account the case belongs to (bound by an earlier turn), if any."""
    case_customer_verified: bool = False
    """Whether the case's customer is proven (by the channel or a one-time code)."""
    context: dict[str, Any] = field(default_factory=dict)
    has_held_refund: bool = False

    def texts_newest_first(self) -> list[str]:
        return [self.text, *reversed(self.earlier_texts)]

    def first_found(self, find: Callable[[str], list[T]]) -> list[T]:
        """The facts `find` extracts from the newest message that has any."""
        for text in self.texts_newest_first():
            found = find(text)
            if found:
                return found
        return []


@dataclass(frozen=True)
class HandlerResult:
    status: CaseStatus
    actions: list[Action]
    account_id: str | None = None
    awaiting: bool = False
    """True when the reply asks the customer a question that continues this flow."""
    context: dict[str, Any] = field(default_factory=dict)
    """Facts to keep for the next message of the flow (only while `awaiting`)."""

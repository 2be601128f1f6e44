"""The check on a fallback agent's final text before a customer reads it.

The agent's text is untrusted: a model can be talked into promising what only the
refund service or the account handler may do. A reply fails when it

- promises or reports a refund, a credit or a compensation ("I've refunded…", "you will
  get your money back", "refund has been issued"),
- promises or reports a change ("I have changed / updated / cancelled…"),
- states an amount of money ($500, 20 EUR, 15 dollars),
- names an order or an e-mail address that isn't the identified customer's own.

A failing reply is never sent: the desk hands the case to a person instead. The rules
are deliberately broad — a false alarm costs a human reply, a miss costs a promise.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from handlers.extract import find_emails, find_order_ids

_PROMISE = re.compile(
    r"\b(?:i(?:'ve| have)?|we(?:'ve| have)?|it(?:'s| has been| will be)?|has been|will be|"
    r"you(?:'ll| will)? (?:get|receive|be (?:refunded|credited|reimbursed)))\s+"
    r"(?:\w+\s+){0,3}?"
    r"(?:refund(?:ed)?|reimburs\w*|credit(?:ed)?|compensat\w*|issued|approved|"
    r"changed|updated|cancel+ed|modified|money back)\b",
    re.IGNORECASE,
)
_REFUND_NOUN = re.compile(r"\b(?:refund|reimbursement|money back|compensation)\b.{0,40}\b"
                          r"(?:is|has been|was|will be)\s+(?:issued|approved|processed|sent|on "
                          r"its way)\b", re.IGNORECASE)
_AMOUNT = re.compile(
    r"(?:[$€£¥]\s?\d|\d[\d.,]*\s?(?:usd|eur|gbp|pln|dollars?|euros?|pounds?|zł|zl)\b|"
    r"\b(?:usd|eur|gbp)\s?\d)", re.IGNORECASE)


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    problems: list[str] = field(default_factory=list)


def check_output(text: str, *, own_order_ids: Collection[str] = (),
                 own_email: str | None = None) -> OutputCheck:
    """Whether the agent's reply may reach the customer, and why not (pure)."""
    problems = []
    if not text.strip():
        problems.append("empty reply")
    if _PROMISE.search(text) or _REFUND_NOUN.search(text):
        problems.append("promises a refund or a change")
    if _AMOUNT.search(text):
        problems.append("states an amount of money")
    own_orders = {o.upper() for o in own_order_ids}
    foreign_orders = [o for o in find_order_ids(text) if o.upper() not in own_orders]
    if foreign_orders:
        problems.append(f"mentions orders not on the customer's account: {foreign_orders}")
    own = (own_email or "").lower()
    foreign_emails = [e for e in find_emails(text) if e.lower() != own]
    if foreign_emails:
        problems.append("mentions another e-mail address")
    return OutputCheck(ok=not problems, problems=problems)

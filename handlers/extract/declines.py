"""Whether a text says the customer wants no refund.

"I do not want a refund, just fix the billing address" may be routed to refunds (it
names one); the refund handler must then do nothing. Only a refusal counts: a negated
wish ("don't want a refund", "möchte keine Erstattung", "no quiero un reembolso") or
"instead of a refund". A refund the customer has not received yet ("no refund has
arrived") is not one, and neither is a refusal of one amount next to another ("not a
refund of $5, the whole $48"): a text that states an amount, or asks for the whole, is
a request.
"""

from __future__ import annotations

from handlers.extract import locales as loc
from handlers.extract._patterns import rx
from handlers.extract.amounts import read_amounts

_DECLINED = rx(loc.REFUND_DECLINED)


def declines_refund(text: str) -> bool:
    """True when `text` says the customer wants no refund and asks for no amount."""
    if _DECLINED.search(text) is None:
        return False
    reading = read_amounts(text)
    return not (reading.amount_like or reading.asks_full)

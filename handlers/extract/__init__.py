"""Typed extraction from customer text: e-mails, order ids, amounts, addresses, preferences.

Regex and parsing only, no models; every function is pure. Each one returns what the
text states and leaves out what it would have to guess: a handler that gets `None`, an
empty list or a field named in `missing` asks the customer instead. Word lists for the
languages the router accepts (en, es, de, fr, pt, it, ru, pl, nl, sv, tr, uk) live in
`handlers.extract.locales`; `tests/handlers/extract/test_*_by_language.py` hold them to
what a person reads in each.

One module per concept; the public names are re-exported here, so importers use
`handlers.extract` alone:

- `ids`: `find_emails`, `find_order_ids`;
- `amounts`: `read_amounts`, `parse_amounts`, `AmountReading`, `Amount`, `InvalidAmount`;
- `names`: `country_code`, `language_code`;
- `addresses`: `parse_address`, `AddressExtraction`, `ADDRESS_FIELDS`;
- `preferences`: `parse_preference_changes`, `PreferenceExtraction`;
- `plain`: `markup_problem`, `address_field_problem`, `strip_markup`;
- `declines`: `declines_refund`;
- `customer_words`, `earlier_messages` (`router.models.message_body`, the one reading of
  an e-mail's quoting that the route models share).

Which part of an e-mail each fact may come from: order ids and e-mail addresses from the
whole message (an order id in a quoted earlier message still names the order); amounts,
preference settings, addresses (and the country and language names in them) and a
refusal of a refund only from `customer_words(text)` — without `>`-quoted lines,
forwarded or earlier messages, disclaimers and the signature — so that our agent's
quoted "€25.00 or €60.00" is never read as what the customer asks now. What a message
quotes or forwards (`earlier_messages`) is for a handler to ask about, never to act on.
"""

from __future__ import annotations

from handlers.extract.addresses import ADDRESS_FIELDS, AddressExtraction, parse_address
from handlers.extract.amounts import (
    Amount,
    AmountReading,
    InvalidAmount,
    parse_amounts,
    read_amounts,
)
from handlers.extract.declines import declines_refund
from handlers.extract.ids import find_emails, find_order_ids
from handlers.extract.names import country_code, language_code
from handlers.extract.plain import address_field_problem, markup_problem, strip_markup
from handlers.extract.preferences import PreferenceExtraction, parse_preference_changes
from router.models.message_body import customer_words, earlier_messages

__all__ = [
    "ADDRESS_FIELDS",
    "AddressExtraction",
    "Amount",
    "AmountReading",
    "InvalidAmount",
    "PreferenceExtraction",
    "address_field_problem",
    "country_code",
    "customer_words",
    "declines_refund",
    "earlier_messages",
    "find_emails",
    "find_order_ids",
    "language_code",
    "markup_problem",
    "parse_address",
    "parse_amounts",
    "parse_preference_changes",
    "read_amounts",
    "strip_markup",
]

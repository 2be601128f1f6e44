"""E-mail addresses and order ids.

Order ids need the "O": "O-1001", "o1001", "#O-1001", "O 1001" (a space only after a
capital O, because Spanish "o" means "or"). A bare "1234" is never an order id.
"""

from __future__ import annotations

import re

from handlers.extract._patterns import rx, unique

_EMAIL = re.compile(r"(?<![\w.%+-])[\w%+-](?:[\w.%+-]*[\w%+-])?@(?:[^\W_](?:[\w-]*[^\W_])?\.)+"
                    r"[^\W\d_]{2,}(?![\w-])")
_OBFUSCATED = ((rx(r"\s*[\[(]\s*at\s*[\])]\s*"), "@"), (rx(r"\s*[\[(]\s*dot\s*[\])]\s*"), "."))
_ORDER_ID = re.compile(r"(?<![\w#-])#?(?:[OoОо]\s?[-–—‑_]\s?|[OoОо](?=\d)|[OО]\s)(\d{3,10})(?!\w)")


def find_emails(text: str) -> list[str]:
    """E-mail addresses, lower-cased, unique, in order; "anna [at] x [dot] com" counts."""
    for pattern, replacement in _OBFUSCATED:
        text = pattern.sub(replacement, text)
    return unique(m.group(0).lower() for m in _EMAIL.finditer(text))


def find_order_ids(text: str) -> list[str]:
    """Order ids normalised to "O-1001", unique, in order. Bare numbers are not ids."""
    return unique(f"O-{m.group(1)}" for m in _ORDER_ID.finditer(text))

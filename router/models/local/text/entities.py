"""Replace e-mails, order ids, links and digits with placeholders before scoring.

Which address or order a customer names says nothing about what they want, but its
characters would become hundreds of rare n-grams that the model learns by heart. "my
e-mail is EMAILADDR" (identity) and "change my e-mail to EMAILADDR" (account) still differ
by the words around the placeholder.
"""

from __future__ import annotations

import re

EMAIL_PLACEHOLDER = "emailaddr"
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)
_ORDER_ID = re.compile(r"(?<![\w-])(?:#\s?)?[oO]-?\s?\d{3,}\b")
_DIGITS = re.compile(r"\d+")


def normalise_entities(text: str) -> str:
    # Each pattern scans the whole text; most messages hold no e-mail, no link and many
    # no digit, and a membership test is far cheaper than a scan that finds nothing.
    if "@" in text:
        text = _EMAIL.sub(f" {EMAIL_PLACEHOLDER} ", text)
    if "://" in text or "www." in text.lower():
        text = _URL.sub(" urladdr ", text)
    if _DIGITS.search(text) is None:
        return text
    text = _ORDER_ID.sub(" orderid ", text)
    return _DIGITS.sub("0", text)

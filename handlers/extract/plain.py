"""Plain text only: markup, control characters and characters that no address holds.

Customer text is data. Before any of it is written to the store (an address line, a
city) it must be plain: no markup (`<`, `>`, HTML entities such as `&lt;` or `&#60;`,
`javascript:` and other script URLs), no control or format characters, and — for address
fields — only letters, digits, spaces and the punctuation addresses use. A field that
fails is refused (the handler asks again), never cleaned up and stored. Text that is
only shown or kept as a note (a reply, a refund's reason) is cleaned with
`strip_markup` instead.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Problem = Literal["markup", "control_characters", "characters"]

_MARKUP = re.compile(r"[<>]|&#|\b(?:java|vb|live)\s*script\s*:|\bdata\s*:\s*\w+/"
                     r"|\bon[a-z]+\s*=", re.IGNORECASE)
# "&lt;", "&#60;", and the common ones without their ";" (browsers still read "&lt").
_ENTITY = re.compile(r"&(?:#x?[0-9a-f]+;?|[a-z][a-z0-9]*;|(?:lt|gt|amp|quot|apos|nbsp)\b)",
                     re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>?")
_SCRIPT_URL = re.compile(r"\b(?:java|vb|live)\s*script\s*:|\bdata\s*:\s*\w+/", re.IGNORECASE)
_ADDRESS_PUNCTUATION = frozenset(".,'’‘-–—/#°ºª()&№")


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def markup_problem(text: str) -> Problem | None:
    """"markup" or "control_characters" when `text` holds them, else None."""
    if _MARKUP.search(text) or _ENTITY.search(text):
        return "markup"
    if any(_is_control(ch) for ch in text):
        return "control_characters"
    return None


def address_field_problem(value: str) -> Problem | None:
    """Why `value` cannot be stored as an address field, or None when it can."""
    problem = markup_problem(value)
    if problem is not None:
        return problem
    for ch in value:
        category = unicodedata.category(ch)
        if not (category[0] in "LMN" or category == "Zs" or ch in _ADDRESS_PUNCTUATION):
            return "characters"
    return None


def strip_markup(text: str) -> str:
    """`text` without tags, entities, `<`/`>`, script URLs or control characters (line
    breaks and tabs stay); plain text comes back unchanged."""
    if markup_problem(text) is None:
        return text
    text = _TAG.sub(" ", text)
    text = _ENTITY.sub(" ", text)
    text = _SCRIPT_URL.sub(" ", text).replace("<", " ").replace(">", " ")
    text = "".join(" " if _is_control(ch) and ch not in "\n\t" else ch for ch in text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()

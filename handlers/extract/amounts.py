"""Money amounts in customer text, in integer cents.

Amounts need a currency marker ("$15", "15 €", "1500 руб.", "350 kr"), except a decimal
right after a money word ("refund 15.50") or a fully grouped decimal ("1,234.56");
those come back with `currency=None`, as do currencies we do not handle ("CHF 20").
One separator followed by exactly three digits is a thousands separator ("1.500 руб.").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from handlers.extract import locales as loc
from handlers.extract._patterns import NOT_LETTER_AFTER, NOT_LETTER_BEFORE, rx
from router.errors import InvalidInput


class Amount(BaseModel):
    model_config = ConfigDict(frozen=True)

    cents: int
    currency: str | None
    """"USD", "EUR", "GBP", "RUB", "BRL", "PLN", "SEK", or None (not stated / not handled)."""
    raw: str


class InvalidAmount(InvalidInput, ValueError):
    """A stated amount that cannot be meant: negative, zero, or absurdly large."""

    code = "invalid_amount"

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


_NUM = (r"(?:\d{1,3}(?:[,.'’\u00a0\u202f ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)"
        r"(?!\d|[.,]\d)")
_SYMBOLS = "|".join(re.escape(s) for s in sorted(loc.CURRENCY_SYMBOLS, key=len, reverse=True))
_CODES = "|".join(loc.CURRENCY_CODES)
_WORDS = "|".join(loc.CURRENCY_WORDS)
_PREFIXED = rx(rf"(?P<sign>[-−–]?)(?P<cur>{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|kr)"
               rf"{NOT_LETTER_AFTER}\.?)\s?(?P<sign2>[-−]?)\s?(?P<num>{_NUM})"
               r"(?P<dash>[.,][-–—]+)?")
_SUFFIXED = rx(rf"(?P<sign>[-−–]?)(?<![\d.,])(?P<num>{_NUM})(?P<dash>[.,][-–—]+)?\s?"
               rf"(?P<cur>{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|{_WORDS}){NOT_LETTER_AFTER})")
_BARE = rx(rf"(?:\b(?:{loc.MONEY_CUES})\b(?:\s+(?:of|for|was|is|de|von|du|des|di|da|do|em|van"
           r"|på|в\s+размере|в))?\s*[:=]?\s*(?P<sign>[-−]?)(?P<num>\d+[.,]\d{2}"
           r"|\d{1,3}(?:[,.]\d{3})+[.,]\d{2})|(?<![\d.,])(?P<grouped>\d{1,3}(?:,\d{3})+\.\d{2}"
           r"|\d{1,3}(?:\.\d{3})+,\d{2}))(?!\d|[.,]\d|\s*(?:%|kg|g|km|cm|mm|m|ml|l|lbs?|oz)\b)")
_MINUS_WORD = rx(loc.MINUS_WORDS)


@dataclass(frozen=True)
class _AmountHit:
    num: str
    currency: str | None
    raw: str
    negative: bool
    rank: int  # 0 prefixed, 1 suffixed, 2 bare: the lowest rank wins for one number


def parse_amounts(text: str) -> list[Amount]:
    """Money amounts in order, in integer cents; raises InvalidAmount for impossible ones."""
    hits: dict[tuple[int, int], _AmountHit] = {}
    for hit_span, hit in _amount_hits(text):
        if hit_span not in hits or hit.rank < hits[hit_span].rank:
            hits[hit_span] = hit
    amounts = []
    for _, hit in sorted(hits.items()):
        cents = _cents(hit.num)
        limit = loc.AMOUNT_LIMITS.get(hit.currency or "USD", 100_000)
        if hit.negative:
            raise InvalidAmount(f"amount {hit.raw!r} is negative", raw=hit.raw)
        if cents == 0:
            raise InvalidAmount(f"amount {hit.raw!r} is zero", raw=hit.raw)
        if cents > limit * 100:
            raise InvalidAmount(f"amount {hit.raw!r} is above the limit of {limit:,} "
                                f"{hit.currency or 'units'}", raw=hit.raw)
        amounts.append(Amount(cents=cents, currency=hit.currency, raw=hit.raw))
    return amounts


def _amount_hits(text: str) -> Iterator[tuple[tuple[int, int], _AmountHit]]:
    for rank, pattern in enumerate((_PREFIXED, _SUFFIXED, _BARE)):
        for m in pattern.finditer(text):
            group = "num" if m.group("num") else "grouped"
            if m.group("sign") and m.start("sign") and text[m.start("sign") - 1].isdigit():
                continue  # a range such as "15-20 €": which one is meant is for the customer
            negative = bool(m.groupdict().get("sign2")) or _minus_before(text, m)
            start = m.start() if rank < 2 else m.start(group)
            if m.group("sign"):  # "-$20" keeps its sign, "–20 €" after a dash does not
                start = m.start("sign") if negative else m.end("sign")
            if minus := _MINUS_WORD.search(text[:start]):
                start = minus.start()
            raw = text[start:m.end() if rank < 2 else m.end(group)].strip()
            currency = _currency(m.group("cur")) if rank < 2 else None
            yield m.span(group), _AmountHit(m.group(group), currency, raw, negative, rank)


def _minus_before(text: str, m: re.Match[str]) -> bool:
    sign = m.groupdict().get("sign")
    if sign:
        before = text[m.start("sign") - 1] if m.start("sign") else " "
        if not before.isalnum():
            return True
    return bool(_MINUS_WORD.search(text[: m.start()]))


def _currency(token: str) -> str | None:
    token = token.strip()
    if token in loc.CURRENCY_SYMBOLS:
        return loc.CURRENCY_SYMBOLS[token]
    if token.rstrip(".").lower() in loc.CURRENCY_CODES:
        return loc.CURRENCY_CODES[token.rstrip(".").lower()]
    return next((code for pattern, code in loc.CURRENCY_WORDS.items()
                 if re.fullmatch(pattern, token, re.IGNORECASE)), None)


def _cents(num: str) -> int:
    """"1.234,56" / "1,234.56" / "1 234" / "15,5" → cents; one separator + 3 digits groups."""
    digits = re.sub(r"[\s'’]", "", num)
    separators = [i for i, ch in enumerate(digits) if ch in ".,"]
    if not separators:
        return int(digits) * 100
    last = separators[-1]
    decimal = len({digits[i] for i in separators}) == 2 or (
        len(separators) == 1 and len(digits) - last - 1 != 3)
    whole, fraction = (digits[:last], digits[last + 1:]) if decimal else (digits, "")
    return int(re.sub(r"[.,]", "", whole)) * 100 + int((fraction + "00")[:2])

"""Money amounts in customer text, in integer cents — and what only looks like one.

`read_amounts` returns the amounts a text states *and* the amount-like pieces it could
not read, so a caller can ask instead of guessing; `parse_amounts` is the amounts alone.
Both raise `InvalidAmount` for an amount that cannot be meant (negative, zero, absurd).

How a text is read (after NFKC, so "＄１５" is "$15"):

- An amount needs a currency marker ("$15", "15 €", "1500 руб.", "350 kr", "CHF 45.-",
  "$.50"), except a decimal with cents after a money word ("refund 15.50", "refund me
  20.00", "Erstattung von 15,50") or a fully grouped decimal ("1,234.56", "1.234,56");
  those come back with `currency=None` (not stated: the shop's own currency). Any named
  currency keeps its ISO code, also those the shop does not take ("CHF").
- Separators: two different ones are thousands and decimals ("1.250,00", "1,250.00");
  one followed by exactly three digits groups thousands ("1.500 руб."), otherwise it is
  the decimal mark ("15,5 €"). "15€50" is the French 15,50 €.
- English number words before a currency word are read ("fifteen dollars", "a hundred
  and twenty euros").
- Amount-like but unreadable (returned in `unreadable`, never as an amount): a number
  glued to letters or malformed next to a currency ("$1e5", "$15k", "$2OO", "$5,00000",
  "$15.5.5"), a range ("15-20 €"), a number in cents ("50 cents"), number words of the
  other languages or vague quantities next to a currency ("quince dólares", "a few
  dollars"), a currency sign without a number, and after a money word a bare whole
  number, a percentage, a number word or a quantity ("refund 20", "refund 50%",
  "refund fifteen", "refund half"). A count or a measure after the number ("paid 2
  times", "2.50 kg") is not money. Also unreadable: a bare number offered as the
  alternative to an amount ("15 or 20 dollars", "entre 15 y 20 euros"), and, in a text
  with nothing else amount-like, a half ("reembolsen la mitad": not the full price).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from handlers.extract import locales as loc
from handlers.extract._patterns import NOT_LETTER_AFTER, NOT_LETTER_BEFORE, rx
from router.errors import InvalidInput


class Amount(BaseModel):
    model_config = ConfigDict(frozen=True)

    cents: int
    currency: str | None
    """ISO 4217 code of the currency the text names, or None when it names none."""
    raw: str


class AmountReading(BaseModel):
    """Everything amount-like in one text."""

    model_config = ConfigDict(frozen=True)

    amounts: list[Amount] = Field(default_factory=list)
    """The amounts read, in order, one per distinct (cents, currency)."""
    unreadable: list[str] = Field(default_factory=list)
    """Amount-like text that is not exactly one amount ("$1e5", "refund 20"), in order."""
    asks_full: bool = False
    """The text asks for the whole amount ("full refund", "in full", "den vollen Betrag");
    only looked for when the text has nothing amount-like (then the amount decides)."""

    @property
    def amount_like(self) -> bool:
        return bool(self.amounts or self.unreadable)


class InvalidAmount(InvalidInput, ValueError):
    """A stated amount that cannot be meant: negative, zero, or absurdly large."""

    code = "invalid_amount"

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


_NUM = (r"(?:\d{1,3}(?:[,.'’\u00a0\u202f ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)"
        r"(?!\d|[.,]\d)")
_CENTS_ONLY = r"[.,]\d{1,2}(?!\d|[.,]\d)"  # "$.50"
_SYMBOLS = "|".join(re.escape(s) for s in sorted(loc.CURRENCY_SYMBOLS, key=len, reverse=True))
_CODES = "|".join(loc.CURRENCY_CODES)
_WORDS = "|".join(loc.CURRENCY_WORDS)
# Patterns that start with a word first check that a word starts here: the regex engine
# then skips most positions in one step instead of trying every alternative at each.
_WORD_START = r"(?<![^\W\d_])(?=[^\W\d_])"
_CUE = (rf"{_WORD_START}(?:{loc.MONEY_CUES})\b(?:\s+(?:{loc.MONEY_FILLERS})(?![^\W\d_]))"
        r"{0,3}\s*[:=]?\s*")
_NOT_MONEY_UNIT = r"\s*(?:%|kg|g|km|cm|mm|m|ml|l|lbs?|oz)\b"
_PREFIXED = rx(rf"(?P<sign>[-−–]?)(?P<cur>{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|kr)"
               rf"{NOT_LETTER_AFTER}\.?)\s?(?P<sign2>[-−]?)\s?(?P<num>{_NUM}|{_CENTS_ONLY})"
               r"(?P<dash>[.,][-–—]+)?")
_SUFFIXED = rx(rf"(?P<sign>[-−–]?)(?<![\d.,])(?P<num>{_NUM})(?P<dash>[.,][-–—]+)?\s?"
               rf"(?P<cur>{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|{_WORDS}){NOT_LETTER_AFTER})")
_BARE = rx(rf"(?:{_CUE}(?P<sign>[-−]?)(?P<num>\d+[.,]\d{{2}}"
           r"|\d{1,3}(?:[,.]\d{3})+[.,]\d{2})|(?<![\d.,])(?P<grouped>\d{1,3}(?:,\d{3})+\.\d{2}"
           rf"|\d{{1,3}}(?:\.\d{{3}})+,\d{{2}}))(?!\d|[.,]\d|{_NOT_MONEY_UNIT})")
# "15€50": the French way of writing 15,50 € — one amount, not €15 and €50.
_SPLIT_EURO = re.compile(r"(?<![\d.,])(?P<whole>\d{1,6})€(?P<cents>\d{2})(?!\d|[.,]\d)")
_MINUS_WORD = rx(loc.MINUS_WORDS)
_GLUED = re.compile(r"[^\W_]")  # a letter or digit right after a number: "$15k", "$1e5"

# Amount-like pieces: every run of digits with the letters and separators glued to it.
_TOKEN = re.compile(r"(?<![^\W_.,'’])(?:[.,](?=\d))?\d(?:[^\W_]|[.,'’](?=\d))*"
                    r"(?:\s?[-–—]\s?\d(?:[^\W_]|[.,'’](?=\d))*)*")  # a range is one piece
_MARK_BEFORE = rx(rf"(?:{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|kr){NOT_LETTER_AFTER}\.?)"
                  r"\s?[-−–]?\s?$")
_MARK_AFTER = rx(rf"^(?:[.,][-–—]+)?\s?(?:{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}|{_WORDS}"
                 rf"|{loc.CENT_WORDS}){NOT_LETTER_AFTER})")
_CUE_BEFORE = rx(rf"{_CUE}[-−]?$")
# A bare number offered as an alternative to an amount: "15 or 20 dollars", "entre 15 y
# 20 euros", "от 500 до 600 рублей" — which one is meant is for the customer to say.
_ALTERNATIVE_AFTER = rx(
    r"^\s*(?:or|to|and|bis|oder|und|y|o|a|à|e|et|ou|en|tot|of|till|eller|och|lub|albo|do|i"
    r"|ile|veya|или|и|до|або|чи|та|і)\s+[-−]?"
    rf"(?:(?:{_SYMBOLS}|{NOT_LETTER_BEFORE}(?:{_CODES}){NOT_LETTER_AFTER})\s?\d"
    rf"|\d[\d.,\u00a0\u202f ]*(?:[.,][-–—]+)?\s?(?:{_SYMBOLS}"
    rf"|{NOT_LETTER_BEFORE}(?:{_CODES}|{_WORDS}){NOT_LETTER_AFTER}))")
_ID_BEFORE = re.compile(r"[^\W\d_][-–]?$")  # "O-1002": an order id, not an amount
_NOT_MONEY_AFTER = rx(rf"\s*(?:{loc.NOT_MONEY_AFTER})(?![^\W\d_])")
# After a money word, a count, an ordinal or a date is not an amount: "refund 6x tiles",
# "le 2e débit", "paid 12.05.2024".
_COUNT = rx(r"\d+(?:x|×|st|nd|rd|th|e|er|ème|eme|º|ª|o|a)|\d{1,4}([./-])\d{1,2}\1\d{2,4}")
_MARKER = rx(rf"(?P<sym>{_SYMBOLS})|{_WORD_START}(?P<word>{_CODES}|{_WORDS}"
             rf"|{loc.CENT_WORDS}){NOT_LETTER_AFTER}")
_EN_NUMBER = "|".join(sorted(loc.NUMBER_WORDS_EN, key=len, reverse=True))
_WORD_AMOUNT = rx(rf"{_WORD_START}(?P<words>(?:an?\s+)?(?:{_EN_NUMBER})"
                  rf"(?:(?:\s+and\s+|\s+|-)(?:{_EN_NUMBER}))*)\s+"
                  rf"(?P<cur>{_WORDS}){NOT_LETTER_AFTER}")
_EN_NUMBER_WORDS = frozenset(loc.NUMBER_WORDS_EN)  # a cheap test before `_WORD_AMOUNT`
_LOWER_WORD = re.compile(r"[a-z]+")
_WORD_BEFORE = re.compile(r"([^\W\d_]+(?:['’][^\W\d_]+)*)\s*$")  # "п'ятсот" is one word
_NUMBER_WORD = rx(rf"(?:{_EN_NUMBER}|{loc.NUMBER_WORDS_OTHER}|{loc.QUANTITY_WORDS})")
_CUE_WORD = rx(rf"{_CUE}(?P<word>[^\W\d_]+)")
_FULL = rx(rf"(?=[^\W\d_])(?:{loc.FULL_REFUND})")
_HALF = rx(rf"{NOT_LETTER_BEFORE}(?:{loc.HALF_WORDS}){NOT_LETTER_AFTER}")
_SIGN_TAIL = re.compile(r"[^\W_][\w.,]{0,11}")  # what follows a stray "$", for the question


@dataclass(frozen=True)
class _AmountHit:
    num: str
    currency: str | None
    raw: str
    negative: bool
    rank: int  # 0 prefixed, 1 suffixed, 2 bare: the lowest rank wins for one number
    span: tuple[int, int]  # the whole match, currency included


def read_amounts(text: str) -> AmountReading:
    """The amounts a text states and the amount-like pieces it could not read."""
    text = unicodedata.normalize("NFKC", text)
    found, covered, unreadable = _read(text)
    unreadable += _unread_tokens(text, covered)
    unreadable += _unread_words(text, covered)
    distinct: dict[tuple[int, str | None], Amount] = {}
    for _, amount in found:
        distinct.setdefault((amount.cents, amount.currency), amount)
    return AmountReading(
        amounts=list(distinct.values()),
        unreadable=list(dict.fromkeys(raw for _, raw in sorted(unreadable))),
        asks_full=not (distinct or unreadable) and bool(_FULL.search(text)),
    )


def parse_amounts(text: str) -> list[Amount]:
    """Money amounts in order, in integer cents; raises InvalidAmount for impossible ones.

    Repeats are kept ("€15 €15" is two amounts); `read_amounts` gives the distinct
    amounts and what could not be read.
    """
    found, _, _ = _read(unicodedata.normalize("NFKC", text))
    return [amount for _, amount in found]


def _read(text: str) -> tuple[list[tuple[int, Amount]], list[tuple[int, int]],
                              list[tuple[int, str]]]:
    """(position, amount) in order, the spans they cover, and number-word phrases that do
    not make a number ("fifteen twenty dollars")."""
    found = []
    covered = []
    unreadable = []
    for hit in _hits(text):
        found.append((hit.span[0], _checked(hit.raw, _cents(hit.num), hit.currency,
                                            negative=hit.negative)))
        covered.append(hit.span)
    words = set(_LOWER_WORD.findall(text.casefold()))
    for m in _WORD_AMOUNT.finditer(text) if words & _EN_NUMBER_WORDS else ():
        if _inside(m.span(), covered):
            continue
        covered.append(m.span())
        value = _words_value(m.group("words").casefold())
        if value is None:
            unreadable.append((m.start(), m.group(0)))
            continue
        negative = bool(_MINUS_WORD.search(text[:m.start()]))
        found.append((m.start(), _checked(m.group(0), value * 100, _currency(m.group("cur")),
                                          negative=negative)))
    return sorted(found, key=lambda item: item[0]), covered, unreadable


def _checked(raw: str, cents: int, currency: str | None, *, negative: bool) -> Amount:
    limit = loc.AMOUNT_LIMITS.get(currency or "USD", 100_000)
    if negative:
        raise InvalidAmount(f"amount {raw!r} is negative", raw=raw)
    if cents == 0:
        raise InvalidAmount(f"amount {raw!r} is zero", raw=raw)
    if cents > limit * 100:
        raise InvalidAmount(f"amount {raw!r} is above the limit of {limit:,} "
                            f"{currency or 'units'}", raw=raw)
    return Amount(cents=cents, currency=currency, raw=raw)


def _hits(text: str) -> list[_AmountHit]:
    hits: dict[tuple[int, int], _AmountHit] = {}
    split = [(m.span(), _AmountHit(f"{m['whole']},{m['cents']}", "EUR", m.group(0), False, 0,
                                   m.span())) for m in _SPLIT_EURO.finditer(text)]
    for num_span, hit in _amount_hits(text):
        if _inside(num_span, [span for span, _ in split]):
            continue
        if num_span not in hits or hit.rank < hits[num_span].rank:
            hits[num_span] = hit
    hits.update(split)
    return [hit for _, hit in sorted(hits.items())]


def _amount_hits(text: str) -> Iterator[tuple[tuple[int, int], _AmountHit]]:
    for rank, pattern in enumerate((_PREFIXED, _SUFFIXED, _BARE)):
        for m in pattern.finditer(text):
            group = "num" if m.group("num") else "grouped"
            if m.group("sign") and m.start("sign") and text[m.start("sign") - 1].isdigit():
                continue  # a range such as "15-20 €": which one is meant is for the customer
            end = m.end() if rank < 2 else m.end(group)
            if rank != 1 and _GLUED.match(text, end):
                continue  # "$15k", "$1e5", "$2OO": not the number it starts with
            negative = bool(m.groupdict().get("sign2")) or _minus_before(text, m)
            start = m.start() if rank < 2 else m.start(group)
            if m.group("sign"):  # "-$20" keeps its sign, "–20 €" after a dash does not
                start = m.start("sign") if negative else m.end("sign")
            if minus := _MINUS_WORD.search(text[:start]):
                start = minus.start()
            raw = text[start:end].strip()
            currency = _currency(m.group("cur")) if rank < 2 else None
            span = (m.start() if rank < 2 else m.start(group), end)
            yield m.span(group), _AmountHit(m.group(group), currency, raw, negative, rank, span)


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
    """"1.234,56" / "1,234.56" / "1 234" / "15,5" / ".50" → cents; one separator + 3 digits
    groups thousands."""
    digits = re.sub(r"[\s'’]", "", num)
    separators = [i for i, ch in enumerate(digits) if ch in ".,"]
    if not separators:
        return int(digits) * 100
    last = separators[-1]
    decimal = len({digits[i] for i in separators}) == 2 or (
        len(separators) == 1 and len(digits) - last - 1 != 3)
    whole, fraction = (digits[:last], digits[last + 1:]) if decimal else (digits, "")
    return int(re.sub(r"[.,]", "", whole) or "0") * 100 + int((fraction + "00")[:2])


def _words_value(words: str) -> int | None:
    """"a hundred and twenty" → 120; None for a sequence no one says ("fifteen twenty")."""
    total = current = 0
    last = ""  # the kind of the previous word
    for word in re.split(r"[\s-]+", words):
        if word == "and":
            if last not in ("hundred", "scale"):
                return None
            continue
        if word in ("a", "an"):
            current, last = 1, "a"
            continue
        value = loc.NUMBER_WORDS_EN[word]
        if value < 100:
            kind = "tens" if value >= 20 else "unit"
            if last in ("unit", "a") or (last == "tens" and (kind == "tens" or value >= 10)):
                return None
            current, last = current + value, kind
        elif value == 100:
            if last in ("hundred", "") or current >= 100:
                return None
            current, last = current * 100, "hundred"
        else:
            if last == "" or current == 0:
                return None
            total, current, last = total + current * value, 0, "scale"
    return None if last == "a" else total + current


def _inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in spans)


def _unread_tokens(text: str, covered: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """Numbers next to a currency marker or after a money word that no amount explains."""
    found = []
    for m in _TOKEN.finditer(text):
        if _inside(m.span(), covered):
            continue
        head = text[max(0, m.start() - 120):m.start()]
        before = _MARK_BEFORE.search(head)
        tail = text[m.end():m.end() + 40]
        after = _MARK_AFTER.search(tail)
        if after and re.match(r"\s?[-−]?\d", tail[after.end():]):
            after = None  # "2x €59": the sign belongs to the number after it
        cue = (_CUE_BEFORE.search(head) and not _COUNT.fullmatch(m.group(0))
               and not _NOT_MONEY_AFTER.match(tail) and not tail.startswith(")"))
        alternative = _ALTERNATIVE_AFTER.match(tail) and not _ID_BEFORE.search(head)
        if before or after or cue or alternative:
            start = m.start() - (len(head) - before.start()) if before else m.start()
            end = m.end() + after.end() if after else m.end()
            found.append((start, text[start:end].strip()))
            covered.append((start, end))
    return found


def _unread_words(text: str, covered: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """Currency signs with no number, number words or quantities next to a currency
    ("quince dólares", "a few dollars"), and number words after a money word."""
    found = []
    for m in _MARKER.finditer(text):
        if _inside(m.span(), covered):
            continue
        before = _WORD_BEFORE.search(text[max(0, m.start() - 40):m.start()])
        if before and _NUMBER_WORD.fullmatch(before.group(1)):
            start = m.start() - len(before.group(0))
            found.append((start, text[start:m.end()]))
            covered.append((start, m.end()))
        elif m.group("sym"):
            tail = _SIGN_TAIL.match(text, m.end())
            found.append((m.start(), text[m.start():tail.end() if tail else m.end()]))
    for m in _CUE_WORD.finditer(text):
        word = m.group("word")
        if (_NUMBER_WORD.fullmatch(word) and word.casefold() not in loc.AMBIGUOUS_NUMBER_WORDS
                and not _inside(m.span("word"), covered)
                and not _NOT_MONEY_AFTER.match(text, m.end())):
            found.append((m.start("word"), word))
    if not covered and not found:  # "reembolsen la mitad": no number, yet not the full price
        found += [(m.start(), m.group(0)) for m in _HALF.finditer(text)]
    return found

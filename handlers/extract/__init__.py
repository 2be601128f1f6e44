"""Typed extraction from customer text: e-mails, order ids, amounts, addresses, preferences.

Regex and parsing only, no models; every function is pure. Each one returns what the
text states and leaves out what it would have to guess: a handler that gets `None`, an
empty list or a field named in `missing` asks the customer instead. Word lists for the
supported languages (en, es, de, ru, pt, fr, plus it/pl/nl/sv names) live in
`handlers.extract.locales`.

Decisions worth knowing:
- Order ids need the "O": "O-1001", "o1001", "#O-1001", "O 1001" (a space only after a
  capital O, because Spanish "o" means "or"). A bare "1234" is never an order id.
- Amounts need a currency marker ("$15", "15 €", "1500 руб.", "350 kr"), except a decimal
  right after a money word ("refund 15.50") or a fully grouped decimal ("1,234.56");
  those come back with `currency=None`, as do currencies we do not handle ("CHF 20").
  One separator followed by exactly three digits is a thousands separator ("1.500 руб.").
- Addresses keep the customer's spelling; the country is never inferred from a postcode
  or a city, and a postcode never from a city.
- Preference changes need an explicit on/off reading; anything ambiguous is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from handlers.extract import locales as loc
from router.errors import InvalidInput

ADDRESS_FIELDS = ("line1", "city", "postal_code", "country")


class Amount(BaseModel):
    model_config = ConfigDict(frozen=True)

    cents: int
    currency: str | None
    """"USD", "EUR", "GBP", "RUB", "BRL", "PLN", "SEK", or None (not stated / not handled)."""
    raw: str


class AddressExtraction(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["shipping", "billing"]
    line1: str | None = None
    city: str | None = None
    postal_code: str | None = None
    country: str | None = None
    """ISO 3166 alpha-2."""
    missing: list[str] = Field(default_factory=list)
    """Always derived from the four fields above, in the order of `ADDRESS_FIELDS`."""

    @model_validator(mode="before")
    @classmethod
    def _derive_missing(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {**data, "missing": [f for f in ADDRESS_FIELDS if data.get(f) is None]}
        return data


class PreferenceExtraction(BaseModel):
    model_config = ConfigDict(frozen=True)

    changes: dict[str, str] = Field(default_factory=dict)
    unsupported: list[str] = Field(default_factory=list)


class InvalidAmount(InvalidInput, ValueError):
    """A stated amount that cannot be meant: negative, zero, or absurdly large."""

    code = "invalid_amount"

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --- e-mails and order ids -------------------------------------------------------------
_EMAIL = re.compile(r"(?<![\w.%+-])[\w%+-](?:[\w.%+-]*[\w%+-])?@(?:[^\W_](?:[\w-]*[^\W_])?\.)+"
                    r"[^\W\d_]{2,}(?![\w-])")
_OBFUSCATED = ((_rx(r"\s*[\[(]\s*at\s*[\])]\s*"), "@"), (_rx(r"\s*[\[(]\s*dot\s*[\])]\s*"), "."))
_ORDER_ID = re.compile(r"(?<![\w#-])#?(?:[OoОо]\s?[-–—‑_]\s?|[OoОо](?=\d)|[OО]\s)(\d{3,10})(?!\w)")


def find_emails(text: str) -> list[str]:
    """E-mail addresses, lower-cased, unique, in order; "anna [at] x [dot] com" counts."""
    for pattern, replacement in _OBFUSCATED:
        text = pattern.sub(replacement, text)
    return _unique(m.group(0).lower() for m in _EMAIL.finditer(text))


def find_order_ids(text: str) -> list[str]:
    """Order ids normalised to "O-1001", unique, in order. Bare numbers are not ids."""
    return _unique(f"O-{m.group(1)}" for m in _ORDER_ID.finditer(text))


# --- amounts ---------------------------------------------------------------------------
_NUM = (r"(?:\d{1,3}(?:[,.'’\u00a0\u202f ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)"
        r"(?!\d|[.,]\d)")
_SYMBOLS = "|".join(re.escape(s) for s in sorted(loc.CURRENCY_SYMBOLS, key=len, reverse=True))
_CODES = "|".join(loc.CURRENCY_CODES)
_WORDS = "|".join(loc.CURRENCY_WORDS)
_NOT_LETTER_BEFORE, _NOT_LETTER_AFTER = r"(?<![^\W\d_])", r"(?![^\W\d_])"
_PREFIXED = _rx(rf"(?P<sign>[-−–]?)(?P<cur>{_SYMBOLS}|{_NOT_LETTER_BEFORE}(?:{_CODES}|kr)"
                rf"{_NOT_LETTER_AFTER}\.?)\s?(?P<sign2>[-−]?)\s?(?P<num>{_NUM})"
                r"(?P<dash>[.,][-–—]+)?")
_SUFFIXED = _rx(rf"(?P<sign>[-−–]?)(?<![\d.,])(?P<num>{_NUM})(?P<dash>[.,][-–—]+)?\s?"
                rf"(?P<cur>{_SYMBOLS}|{_NOT_LETTER_BEFORE}(?:{_CODES}|{_WORDS}){_NOT_LETTER_AFTER})")
_BARE = _rx(rf"(?:\b(?:{loc.MONEY_CUES})\b(?:\s+(?:of|for|was|is|de|von|du|des|di|da|do|em|van"
            r"|på|в\s+размере|в))?\s*[:=]?\s*(?P<sign>[-−]?)(?P<num>\d+[.,]\d{2}"
            r"|\d{1,3}(?:[,.]\d{3})+[.,]\d{2})|(?<![\d.,])(?P<grouped>\d{1,3}(?:,\d{3})+\.\d{2}"
            r"|\d{1,3}(?:\.\d{3})+,\d{2}))(?!\d|[.,]\d|\s*(?:%|kg|g|km|cm|mm|m|ml|l|lbs?|oz)\b)")
_MINUS_WORD = _rx(loc.MINUS_WORDS)


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


# --- country and language names ---------------------------------------------------------
def _name_index(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {loc.fold(name): code for code, names in table.items() for name in names}


_COUNTRY_NAMES = _name_index(loc.COUNTRIES) | {"uk": "GB"}
_LANGUAGE_NAMES = _name_index(loc.LANGUAGES)


def _typo_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (one transposition counts as one edit)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def _closest(key: str, index: dict[str, str]) -> str | None:
    """The one code whose name is a single typo away from `key` (5+ letters), else None."""
    if len(key) < 5:
        return None
    codes = {code for name, code in index.items()
             if abs(len(name) - len(key)) <= 1 and _typo_distance(key, name) <= 1}
    return codes.pop() if len(codes) == 1 else None


def country_code(name: str) -> str | None:
    """ISO 3166 alpha-2 for a country name in any covered language, a code, or one typo."""
    words = loc.fold(name).split()
    while len(words) > 1 and words[0] in loc.COUNTRY_ARTICLES:
        words = words[1:]
    key = " ".join(words)
    if len(key) == 2 and key.upper() in loc.COUNTRIES:
        return key.upper()
    return _COUNTRY_NAMES.get(key) or _closest(key, _COUNTRY_NAMES)


def _strict_country(segment: str) -> str | None:
    """A whole address segment that is a country; two-letter codes only in capitals."""
    segment = segment.strip(" .")
    if len(segment) == 2 and not segment.isupper():
        return None
    key = " ".join(w for w in loc.fold(segment).split() if w not in loc.COUNTRY_ARTICLES)
    if len(key) == 2:
        return key.upper() if key.upper() in loc.COUNTRIES else _COUNTRY_NAMES.get(key)
    return _COUNTRY_NAMES.get(key)


def language_code(name: str) -> str | None:
    """ISO 639-1 for a language name in any covered language, a code ("pt-BR"), or a typo."""
    key = loc.fold(name)
    base = re.split(r"[ _]", key)[0] if re.fullmatch(r"[a-z]{2,3}([ _][a-z]{2,4})?", key) else ""
    if base in loc.LANGUAGES:
        return base
    if base in loc.LANGUAGE_ALPHA3:
        return loc.LANGUAGE_ALPHA3[base]
    if key in _LANGUAGE_NAMES:
        return _LANGUAGE_NAMES[key]
    named = {_LANGUAGE_NAMES[w] for w in key.split() if w in _LANGUAGE_NAMES}
    if len(named) == 1:
        return named.pop()
    return _closest(key, _LANGUAGE_NAMES)


# --- addresses -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Fields:
    line1: str | None = None
    city: str | None = None
    postal_code: str | None = None
    country: str | None = None


@dataclass(frozen=True)
class _Postcode:
    index: int  # which segment
    start: int
    end: int
    code: str


_ADDRESS_NOUN = _rx(rf"{_NOT_LETTER_BEFORE}(?:{loc.ADDRESS_NOUN}){_NOT_LETTER_AFTER}")
_NOT_POSTAL_BEFORE = _rx(loc.ADDRESS_NOT_POSTAL_BEFORE)
_NOT_POSTAL_AFTER = _rx(loc.ADDRESS_NOT_POSTAL_AFTER)
_ADDRESS_CUE = _rx(loc.ADDRESS_CUES)
_BILLING, _SHIPPING = _rx(loc.BILLING), _rx(loc.SHIPPING)
_STREET = _rx(loc.STREET_WORDS)
_NUMBER_FIRST_STREET = _rx(r"\b(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|way|court|ct"
                           r"|place|pl|boulevard|blvd|highway|hwy|parkway|pkwy|terrace|crescent"
                           r"|close|rue|chemin|quai|allée|impasse|route)\b")
_CITY_PREFIX = _rx(loc.CITY_PREFIXES)
_LEAD_IN, _IN_CITY = _rx(loc.ADDRESS_LEAD_IN), _rx(loc.ADDRESS_IN_CITY)
_STATE_TAIL = re.compile(r"(?:\s*[-–/,]\s*|\s+)\(?([A-Z]{2,3})\)?$")
_UNIT = _rx(r"^(?:apt|apartment|suite|ste|unit|flat|floor|fl|wohnung|whg|piso|puerta|planta|кв"
            r"|квартира|корп|корпус|стр|строение|д|дом|apto|andar|dto|bloco|étage|bât"
            r"|appartement|scala|interno|piano|m|lok|lgh|tr|bus|boîte|c/o)\b|^#|^\S*\d")
_SENTENCE_END = re.compile(r"[.!?…]+(?=\s|$)|\n\s*\n")
_ORDINAL_FLOOR = _rx(r"\D?\d\.\s+(?:OG|EG|UG|DG|Stock|Etage|Obergeschoss|sal|piętro|pietro"
                     r"|étage|etage|floor|Hinterhaus|Vorderhaus|Aufgang)\b")
_CONJUNCTION = _rx(r"\s(?:and|but|und|aber|pero|но|mais|mas|och|oraz)\s")
_POSTCODES: tuple[tuple[int, re.Pattern[str]], ...] = (  # (specificity, pattern)
    (3, _rx(r"\b[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}\b")),  # GB
    (3, _rx(r"\b[A-Z]\d[A-Z]\s?\d[A-Z]\d\b")),  # CA
    (3, re.compile(r"\b[A-Z]\d{2}\s?[A-Z\d]{4}\b")),  # IE
    (3, re.compile(r"(?<![\w-])\d{4}\s?[A-Z]{2}\b")),  # NL
    (3, re.compile(r"(?<![\w-])(?:\d{2}-\d{3}|\d{4}-\d{3}|\d{5}-\d{3,4})(?![\w-])")),  # PL PT BR US
    (3, re.compile(r"(?<![\w-])(?:[ABDEFHILNPS]|CH|CZ|DK|FI|GR|LT|LV|NL|PL|SE|SK)-\d{4,5}"
                   r"(?![\w-])")),  # "D-10119"
    (2, re.compile(r"(?<![\w-])\d{3}\s\d{2}(?=\s+[^\W\d_])")),  # SE CZ SK GR
    (1, re.compile(r"(?<![\w-])\d{5,6}(?![\w-])")),
    (0, re.compile(r"(?<![\w-])\d{4}(?![\w-])")),
)
_TAIL_WORDS = loc.ADDRESS_CONNECTORS | {"this", "that", "here", "our", "mein", "meine", "la",
                                        "mia", "moja", "моя", "mon", "ma", "mi", "minha"}


def parse_address(text: str) -> AddressExtraction | None:
    """The address a message gives, or None when it names no address at all.

    The address is read after a cue ("address is", "ship to", "Adresse lautet", "адрес:")
    so nothing before the cue leaks into it. A message that names an address without
    giving one ("change my billing address") returns all four fields in `missing`.
    """
    kind = _address_kind(text)
    nouns = [m for m in _ADDRESS_NOUN.finditer(text) if not _is_electronic(text, m)]
    for end in sorted([m.end() for m in nouns] + [m.end() for m in _ADDRESS_CUE.finditer(text)]):
        fields = _address_fields(_address_part(text, end))
        if fields.line1 or fields.postal_code:
            return AddressExtraction(kind=kind, **vars(fields))
    for m in nouns:  # "Schönhauser Allee 12, 10119 Berlin is my new address"
        fields = _address_fields(_tail_before(text, m.start()))
        if fields.line1 and (fields.city or fields.postal_code):
            return AddressExtraction(kind=kind, **vars(fields))
    after = nouns[0].end() if nouns else 0  # "… my address. New one: Schönhauser Allee 12, …"
    for start in [0, *(m.end() for m in re.finditer(r"[.!?]\s+|\n", text))]:
        if start < after:
            continue
        fields = _address_fields(_first_block(text[start:start + 400]))
        if fields.line1 and fields.postal_code:  # also a bare address, e.g. an answer
            return AddressExtraction(kind=kind, **vars(fields))
    return AddressExtraction(kind=kind) if nouns else None


def _address_kind(text: str) -> Literal["shipping", "billing"]:
    billing, shipping = _BILLING.search(text), _SHIPPING.search(text)
    if billing and (shipping is None or billing.start() < shipping.start()):
        return "billing"
    return "shipping"


def _is_electronic(text: str, m: re.Match[str]) -> bool:
    """An e-mail or web address ("E-Mail-Adresse", "dirección de correo"), not a postal one."""
    word = m.group(0).casefold()
    glued = text[max(0, m.start() - 2):m.start()].casefold().replace("-", "") + word
    return (any(w in word for w in ("mail", "web", "internet")) or glued.startswith("epost")
            or bool(_NOT_POSTAL_BEFORE.search(text[:m.start()]))
            or bool(_NOT_POSTAL_AFTER.match(text[m.end():])))


def _address_part(text: str, start: int) -> str:
    """The text after a cue, without connecting words ("is now", "de envío es")."""
    rest = text[start:start + 400]
    while True:
        rest = rest.lstrip(" \t\r\n:;=-–—>\"'«»„“”(")
        m = re.match(r"[^\W\d_][\w'’]*", rest)
        if not (m and m.group(0).islower() and loc.fold(m.group(0)) in loc.ADDRESS_CONNECTORS):
            return _first_block(rest)
        rest = rest[m.end():]


def _first_block(text: str) -> str:
    """Up to the end of the sentence (not at "ul." or "Str."), a blank line or "and …"."""
    for m in _SENTENCE_END.finditer(text):
        if m.group(0) == "." and _ORDINAL_FLOOR.match(text, max(0, m.start() - 2)):
            continue  # "Hauptstraße 5a, 2. OG"
        if m.group(0) == ".":
            word = re.search(r"([^\W\d_]+)$", text[:m.start()])
            abbreviation = word and loc.fold(word.group(1))
            if abbreviation and (len(abbreviation) == 1 or abbreviation.endswith("str")
                                 or abbreviation in loc.ADDRESS_ABBREVIATIONS):
                continue
        text = text[:m.start()]
        break
    return _CONJUNCTION.split(text, maxsplit=1)[0]


def _tail_before(text: str, end: int) -> str:
    head = re.split(r"[.!?]\s+|\n\s*\n", text[:end])[-1]
    while (m := re.search(r"\s*([^\W\d_]+)\s*$", head)) and loc.fold(m.group(1)) in _TAIL_WORDS:
        head = head[:m.start()]
    return head


def _address_fields(part: str) -> _Fields:
    segments = _segments(part)
    if not segments:
        return _Fields()
    first = next((i for i, s in enumerate(segments) if _is_street(s)), None)
    if first is not None:
        segments[first] = _after_lead_in(segments[first])
    postcode = _find_postcode(segments)
    return _with_postcode(segments, postcode) if postcode else _without_postcode(segments)


def _segments(part: str) -> list[str]:
    """Comma/line pieces; noise (e-mails, order ids, sign-offs) dropped before the address
    starts and ending it after."""
    kept: list[str] = []
    for raw in re.split(r"[,;\n|]|:\s", part):
        segment = " ".join(raw.split()).strip(" :\"'«»„“”").lstrip("-–—•*> ")
        if not segment:
            continue
        first = loc.fold(segment.split()[0])
        digits = sum(ch.isdigit() for ch in segment)
        noisy = ("@" in segment or _ORDER_ID.search(segment) or segment.endswith("?")
                 or first in loc.ADDRESS_STOP_WORDS
                 or (segment.startswith("+") and digits >= 7)
                 or (digits >= 10 and re.fullmatch(r"[\d\s()./-]+", segment)))  # a phone
        if noisy and any(ch.isdigit() for s in kept for ch in s):
            break
        if not noisy:
            kept.append(segment)
    return kept


def _after_lead_in(segment: str) -> str:
    """"it should be Schönhauser Allee 12" → "Schönhauser Allee 12" (the last lead-in wins)."""
    for m in reversed(list(_LEAD_IN.finditer(segment))):
        head, tail = segment[:m.start()], segment[m.end():]
        if (head and not any(ch.isdigit() for ch in head) and not _STREET.search(head)
                and (tail[:1].isdigit() or tail[:1].isupper() or _STREET.match(tail))
                and _is_street(tail)):
            return tail
    return segment


def _is_street(segment: str) -> bool:
    has_digit = any(ch.isdigit() for ch in segment)
    return (has_digit and re.search(r"[^\W\d_]", segment) is not None) or bool(
        _STREET.search(segment))


def _find_postcode(segments: list[str]) -> _Postcode | None:
    """The most specific postcode-shaped token; among equals, the last one."""
    best: tuple[int, int, int] | None = None
    found = None
    for i, segment in enumerate(segments):
        for tier, pattern in _POSTCODES:
            for m in pattern.finditer(segment):
                if tier <= 1 and m.start() == 0 and _NUMBER_FIRST_STREET.search(segment):
                    continue  # "1234 Main Street": a house number
                before = segment[:m.start()].split()
                if tier == 0 and before and before[-1] not in loc.STATE_CODES:
                    continue
                if best is None or (tier, i, m.start()) > best:
                    best = (tier, i, m.start())
                    code = re.sub(r"^[A-Z]{1,2}-(?=\d)", "", " ".join(m.group(0).upper().split()))
                    found = _Postcode(i, m.start(), m.end(), code)
    return found


def _is_state(segment: str, *, names: bool = False) -> bool:
    """"TX"; with `names`, also "Texas" (off by default: "New York" is a city too)."""
    return segment in loc.STATE_CODES or (names and loc.fold(segment) in loc.STATE_NAMES)


def _strip_state(text: str, *, names: bool = False) -> str:
    if _is_state(text, names=names):
        return ""
    m = _STATE_TAIL.search(text)
    return text[:m.start()].strip() if m and m.group(1) in loc.STATE_CODES else text


def _city(segment: str, *, strict: bool) -> str | None:
    city = _strip_state(_CITY_PREFIX.sub("", segment).strip())
    if not city or any(ch.isdigit() for ch in city) or _strict_country(city):
        return None
    first = loc.fold(city.split()[0])
    if strict and (len(city.split()) > 4 or first in loc.ADDRESS_STOP_WORDS
                   or first in loc.ADDRESS_CONNECTORS or _STREET.search(city)):
        return None
    return city


def _split_country_tail(text: str) -> tuple[str, str | None]:
    """"Berlin Germany" → ("Berlin", "DE")."""
    words = text.split()
    for n in range(min(4, len(words)), 0, -1):
        if code := _strict_country(" ".join(words[-n:])):
            return " ".join(words[:-n]), code
    return text, None


def _with_postcode(segments: list[str], postcode: _Postcode) -> _Fields:
    segment, used = segments[postcode.index], {postcode.index}
    before = _strip_state(segment[:postcode.start].strip(" -–"), names=True)
    after, country = _split_country_tail(segment[postcode.end:].strip(" -–"))
    city = _city(after, strict=False) if after else None
    head = before if before and _is_street(before) else None
    if city is None and before and head is None:
        city = _city(before, strict=False)
    city = city or _neighbour_city(segments, postcode.index, used)
    country = country or _segment_country(segments, used, after=postcode.index)
    line = _from_first_street([s for i, s in enumerate(segments[:postcode.index])
                               if i not in used]) + ([head] if head else [])
    if not line:  # Russian order: "125009, Москва, ул. Тверская, д. 7"
        line = _from_first_street([s for i, s in enumerate(segments)
                                   if i > postcode.index and i not in used])
    return _Fields(", ".join(line) or None, city, postcode.code, country)


def _neighbour_city(segments: list[str], index: int, used: set[int]) -> str | None:
    """The city beside a postcode written on its own: before it (UK, US) or after it."""
    j = index - 1
    while j >= 0 and _is_state(segments[j]):
        used.add(j)
        j -= 1
    candidates = [j] if j >= 0 and not _is_street(segments[j]) else []
    candidates += [index + 1] if index + 1 < len(segments) else []
    candidates += [i for i, s in enumerate(segments) if _CITY_PREFIX.match(s)]
    for i in candidates:
        if i not in used and (city := _city(segments[i], strict=False)):
            used.add(i)
            return city
    return None


def _segment_country(segments: list[str], used: set[int], *, after: int) -> str | None:
    for i, segment in enumerate(segments):
        if i not in used and (code := _strict_country(segment)):
            used.add(i)
            return code
    last = len(segments) - 1  # where a country is expected, "it's Germany" or one typo will do
    if last <= after or last in used:
        return None
    rest, code = _split_country_tail(segments[last])
    if code is None and re.fullmatch(r"[^\W\d_][^\W\d_ '-]{4,}", segments[last]):
        code = _closest(loc.fold(segments[last]), _COUNTRY_NAMES)
    if code and len(rest.split()) <= 2:
        used.add(last)
    return code if last in used else None


def _from_first_street(segments: list[str]) -> list[str]:
    start = next((i for i, s in enumerate(segments) if _is_street(s)), len(segments))
    return segments[start:]


def _without_postcode(segments: list[str]) -> _Fields:
    start = next((i for i, s in enumerate(segments) if _is_street(s)), None)
    if start is None:
        return _Fields()
    end = start + 1
    while end < len(segments) and _UNIT.search(segments[end]):
        end += 1
    city = country = None
    if (m := _IN_CITY.match(segments[start])) and (city := _city(m.group(2), strict=True)):
        segments = [*segments[:start], m.group(1), *segments[start + 1:]]
    for segment in segments[end:]:
        if _is_state(segment):
            continue
        if country is None and (code := _strict_country(segment)):
            country = code
        elif city is None and country is None:
            city = _city(segment, strict=True)
    return _Fields(", ".join(segments[start:end]), city, None, country)


# --- preferences -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Cue:
    start: int
    end: int
    value: str | None  # None: a "receive" verb, which only counts when negated
    strong: bool


_Reading = tuple[str, int]  # ("on" | "off", strength: 2 explicit, 1 wish, 0 implied)
_TOPICS = tuple((setting, inverted, _rx(p)) for setting, inverted, p in loc.PREFERENCE_TOPICS)
_CUES = tuple((_rx(p), value, strong) for p, value, strong in loc.PREFERENCE_CUES)
_UNSUBSCRIBE = _rx(loc.UNSUBSCRIBE)
_UNSUPPORTED = tuple((name, _rx(p)) for name, p in loc.UNSUPPORTED_SETTINGS)
_LANGUAGE_KEYWORD, _SWITCH_VERB = re.compile(loc.LANGUAGE_KEYWORD), re.compile(loc.SWITCH_VERB)
_CLAUSE = _rx(r"[,;:]|\s[-–—]\s|\s(?:and|but|also|then|und|aber|sowie|y|pero|и|а|но|также|e"
              r"|et|ed|ma|i|oraz|ale|och|men|or|oder|o|ou|или|lub|eller)\s"
              r"|(?<!\bno)(?<!quiero)\smas\s|(?<!não)(?<!nao)(?<!quero)(?<!receber)\smais\s")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def parse_preference_changes(text: str) -> PreferenceExtraction:
    """Supported setting changes the text asks for, plus the unsupported settings it names.

    Keys: marketing_emails, sms_notifications, paperless_billing ("on"/"off") and
    language (ISO 639-1). A setting read both ways with the same confidence is left out.
    """
    votes: list[tuple[str, str, int]] = []
    languages: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        votes += _sentence_votes(sentence)
        if code := _language_target(sentence):
            languages.append(code)
    topics = {setting for setting, _, pattern in _TOPICS if pattern.search(text)}
    unsubscribe = _UNSUBSCRIBE.search(text)
    if unsubscribe and not topics and not _negated(text, unsubscribe.start()):
        votes.append(("marketing_emails", "off", 1))  # "unsubscribe me, please"
    changes: dict[str, str] = {}
    for setting in dict.fromkeys(setting for setting, _, _ in votes):
        mine = [(value, strength) for s, value, strength in votes if s == setting]
        top = max(strength for _, strength in mine)
        values = {value for value, strength in mine if strength == top}
        if len(values) == 1:
            changes[setting] = values.pop()
    if len(set(languages)) == 1:
        changes["language"] = languages[0]
    named = sorted((m.start(), name) for name, p in _UNSUPPORTED if (m := p.search(text)))
    return PreferenceExtraction(changes=changes, unsupported=[name for _, name in named])


def _sentence_votes(sentence: str) -> list[tuple[str, str, int]]:
    """(setting, value, strength) per topic; a clause without a cue inherits the previous
    clause's reading ("turn off the newsletter and SMS"), a clause without a topic lends
    its cue to the previous clause's topics ("I keep getting promos, please stop")."""
    votes: list[tuple[str, str, int]] = []
    previous_topics: list[tuple[str, bool]] = []
    previous: _Reading | None = None
    for clause in _CLAUSE.split(sentence):
        cues = [_Cue(m.start(), m.end(), value, strong)
                for pattern, value, strong in _CUES for m in pattern.finditer(clause)]
        topics = sorted((m.start(), m.end(), setting, inverted)
                        for setting, inverted, p in _TOPICS for m in p.finditer(clause))
        if not topics:
            if (reading := _reading(clause, cues, None)) and previous_topics:
                votes += [(s, _flip(reading[0], inv), reading[1]) for s, inv in previous_topics]
            continue
        for start, end, setting, inverted in topics:
            reading = _reading(clause, cues, (start, end)) or previous
            if reading:
                previous = reading
            elif setting == "paperless_billing" and not inverted:
                reading = ("on", 0)  # "go paperless" is itself the request
            if reading:
                votes.append((setting, _flip(reading[0], inverted), reading[1]))
        previous_topics = [(setting, inverted) for _, _, setting, inverted in topics]
    return votes


def _flip(value: str, flipped: bool) -> str:
    return {"on": "off", "off": "on"}[value] if flipped else value


def _negated(text: str, position: int, *, window: int = 3) -> bool:
    """A negator among the few words before `position` ("don't", "nicht", "не", "ne")."""
    words = _WORD.findall(text[:position])[-window:]
    return any(re.search(r"n['’]?t$", w.casefold()) and len(w) > 3
               or loc.fold(w).split()[0] in loc.NEGATORS for w in words)


def _reading(clause: str, cues: list[_Cue], topic: tuple[int, int] | None) -> _Reading | None:
    strong = [cue for cue in cues if cue.strong]
    if strong:
        before = [cue for cue in strong if topic is None or cue.start < topic[0]]
        cue = max(before, key=lambda c: c.start) if before else min(strong, key=lambda c: c.start)
        assert cue.value is not None
        return _flip(cue.value, _negated(clause, cue.start)), 2
    weak = [cue for cue in cues if not cue.strong]
    if any(cue.value == "on" for cue in weak):
        negated = any(_negated(clause, cue.start) or (
            topic is not None and cue.end <= topic[0]
            and _negated(clause[cue.end:topic[0]], topic[0] - cue.end, window=99))
            for cue in weak)
        return ("off" if negated else "on"), 1
    words = _WORD.findall(clause[:topic[0]])[-2:] if topic is not None else []
    if any(loc.fold(w) in loc.NEGATIVE_DETERMINERS for w in words):
        return "off", 2  # "no promos", "keine Werbe-E-Mails mehr", "никаких рассылок"
    return None


def _language_target(sentence: str) -> str | None:
    """The language a sentence asks to switch to, if it asks that."""
    tokens = re.findall(r"[^\W\d_]+", loc.fold(sentence))
    keyword = any(_LANGUAGE_KEYWORD.fullmatch(t) for t in tokens)
    switch = any(_SWITCH_VERB.fullmatch(t) for t in tokens)
    found: list[tuple[bool, str]] = []
    for i, token in enumerate(tokens):
        elided = i > 1 and tokens[i - 1] in {"l", "d"}  # "l'anglais" folds to "l anglais"
        prev = tokens[i - 2] if elided else tokens[i - 1] if i else ""
        code = _LANGUAGE_NAMES.get(token)
        targeted = prev in loc.LANGUAGE_TARGET_PREPS
        if code and prev not in loc.LANGUAGE_SOURCE_PREPS and (keyword or (switch and targeted)):
            found.append((targeted, code))
    if found:
        return max(enumerate(found), key=lambda item: (item[1][0], item[0]))[1][1]
    if keyword:  # one typo in the target: "change the language to Germna"
        for prep, word in zip(tokens, tokens[1:], strict=False):
            if prep in loc.LANGUAGE_TARGET_PREPS and (code := _closest(word, _LANGUAGE_NAMES)):
                return code
    return None

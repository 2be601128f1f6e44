"""Postal addresses: street line, city, postal code and country, as the customer wrote them.

Addresses keep the customer's spelling; the country is never inferred from a postcode
or a city, and a postcode never from a city.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from handlers.extract import locales as loc
from handlers.extract._patterns import NOT_LETTER_AFTER, NOT_LETTER_BEFORE, rx
from handlers.extract.ids import find_order_ids
from handlers.extract.names import COUNTRY_NAMES, closest_name, strict_country

ADDRESS_FIELDS = ("line1", "city", "postal_code", "country")


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


_ADDRESS_NOUN = rx(rf"{NOT_LETTER_BEFORE}(?:{loc.ADDRESS_NOUN}){NOT_LETTER_AFTER}")
_NOT_POSTAL_BEFORE = rx(loc.ADDRESS_NOT_POSTAL_BEFORE)
_NOT_POSTAL_AFTER = rx(loc.ADDRESS_NOT_POSTAL_AFTER)
_ADDRESS_CUE = rx(loc.ADDRESS_CUES)
_BILLING, _SHIPPING = rx(loc.BILLING), rx(loc.SHIPPING)
_STREET = rx(loc.STREET_WORDS)
_NUMBER_FIRST_STREET = rx(r"\b(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|way|court|ct"
                          r"|place|pl|boulevard|blvd|highway|hwy|parkway|pkwy|terrace|crescent"
                          r"|close|rue|chemin|quai|allée|impasse|route)\b")
_CITY_PREFIX = rx(loc.CITY_PREFIXES)
_LEAD_IN, _IN_CITY = rx(loc.ADDRESS_LEAD_IN), rx(loc.ADDRESS_IN_CITY)
_STATE_TAIL = re.compile(r"(?:\s*[-–/,]\s*|\s+)\(?([A-Z]{2,3})\)?$")
_UNIT = rx(r"^(?:apt|apartment|suite|ste|unit|flat|floor|fl|wohnung|whg|piso|puerta|planta|кв"
           r"|квартира|корп|корпус|стр|строение|д|дом|apto|andar|dto|bloco|étage|bât"
           r"|appartement|scala|interno|piano|m|lok|lgh|tr|bus|boîte|c/o)\b|^#|^\S*\d")
_SENTENCE_END = re.compile(r"[.!?…]+(?=\s|$)|\n\s*\n")
_ORDINAL_FLOOR = rx(r"\D?\d\.\s+(?:OG|EG|UG|DG|Stock|Etage|Obergeschoss|sal|piętro|pietro"
                    r"|étage|etage|floor|Hinterhaus|Vorderhaus|Aufgang)\b")
_CONJUNCTION = rx(r"\s(?:and|but|und|aber|pero|но|mais|mas|och|oraz)\s")
_POSTCODES: tuple[tuple[int, re.Pattern[str]], ...] = (  # (specificity, pattern)
    (3, rx(r"\b[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}\b")),  # GB
    (3, rx(r"\b[A-Z]\d[A-Z]\s?\d[A-Z]\d\b")),  # CA
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
        noisy = ("@" in segment or find_order_ids(segment) or segment.endswith("?")
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
    if not city or any(ch.isdigit() for ch in city) or strict_country(city):
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
        if code := strict_country(" ".join(words[-n:])):
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
        if i not in used and (code := strict_country(segment)):
            used.add(i)
            return code
    last = len(segments) - 1  # where a country is expected, "it's Germany" or one typo will do
    if last <= after or last in used:
        return None
    rest, code = _split_country_tail(segments[last])
    if code is None and re.fullmatch(r"[^\W\d_][^\W\d_ '-]{4,}", segments[last]):
        code = closest_name(loc.fold(segments[last]), COUNTRY_NAMES)
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
        if country is None and (code := strict_country(segment)):
            country = code
        elif city is None and country is None:
            city = _city(segment, strict=True)
    return _Fields(", ".join(segments[start:end]), city, None, country)

"""Country and language names in the covered languages, codes, and one typo.

`COUNTRY_NAMES` and `LANGUAGE_NAMES` map a folded name (`locales.fold`) to its ISO code;
`closest_name` and `strict_country` are shared with the address and preference readers.
"""

from __future__ import annotations

import re

from handlers.extract import locales as loc


def _name_index(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {loc.fold(name): code for code, names in table.items() for name in names}


COUNTRY_NAMES = _name_index(loc.COUNTRIES) | {"uk": "GB"}
LANGUAGE_NAMES = _name_index(loc.LANGUAGES)


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


def closest_name(key: str, index: dict[str, str]) -> str | None:
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
    return COUNTRY_NAMES.get(key) or closest_name(key, COUNTRY_NAMES)


def strict_country(segment: str) -> str | None:
    """A whole address segment that is a country; two-letter codes only in capitals."""
    segment = segment.strip(" .")
    if len(segment) == 2 and not segment.isupper():
        return None
    key = " ".join(w for w in loc.fold(segment).split() if w not in loc.COUNTRY_ARTICLES)
    if len(key) == 2:
        return key.upper() if key.upper() in loc.COUNTRIES else COUNTRY_NAMES.get(key)
    return COUNTRY_NAMES.get(key)


def language_code(name: str) -> str | None:
    """ISO 639-1 for a language name in any covered language, a code ("pt-BR"), or a typo."""
    key = loc.fold(name)
    base = re.split(r"[ _]", key)[0] if re.fullmatch(r"[a-z]{2,3}([ _][a-z]{2,4})?", key) else ""
    if base in loc.LANGUAGES:
        return base
    if base in loc.LANGUAGE_ALPHA3:
        return loc.LANGUAGE_ALPHA3[base]
    if key in LANGUAGE_NAMES:
        return LANGUAGE_NAMES[key]
    named = {LANGUAGE_NAMES[w] for w in key.split() if w in LANGUAGE_NAMES}
    if len(named) == 1:
        return named.pop()
    return closest_name(key, LANGUAGE_NAMES)

from __future__ import annotations

import re
import sys

from calibration.data import load_labelled
from router.models.clauses import (
    _CLAUSE_BREAK,
    CONNECTIVES,
    grouped_by_first_letter,
    split_clauses,
)
from router.settings import PROJECT_ROOT


def test_the_grouped_connectives_split_where_the_flat_list_splits() -> None:
    grouped = grouped_by_first_letter(CONNECTIVES)
    flat = re.compile(
        _CLAUSE_BREAK.pattern.replace(grouped, f"(?:{'|'.join(CONNECTIVES)})"), re.IGNORECASE
    )
    assert flat.pattern != _CLAUSE_BREAK.pattern
    texts = [r.text for r in load_labelled(PROJECT_ROOT / "datasets" / "routes")]
    texts += [text.upper() for text in texts[::5]]
    texts += [f"my lamp broke, {c.replace('(?:ly)?', 'ly')} my e-mail" for c in CONNECTIVES]
    texts += [f"MY LAMP BROKE {c.upper()} ENDLESS" for c in CONNECTIVES]
    splits = [_CLAUSE_BREAK.split(text) for text in texts]
    assert sum(len(parts) > 1 for parts in splits) > len(texts) // 10
    assert [t for t, parts in zip(texts, splits, strict=True) if flat.split(t) != parts] == []


def test_no_two_first_letters_match_the_same_character() -> None:
    """What makes grouping by first letter safe: at any position, one group at most."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    letters = sorted({c[0] for c in CONNECTIVES})
    matched = [
        {m.start() for m in re.finditer(re.escape(letter), every, re.IGNORECASE)}
        for letter in letters
    ]
    overlapping = [
        (a, b)
        for i, a in enumerate(letters)
        for j, b in enumerate(letters[i + 1 :], start=i + 1)
        if matched[i] & matched[j]
    ]
    assert overlapping == []


def test_two_requests_joined_by_a_connective_are_two_clauses() -> None:
    text = "the kettle I got last week leaks, refund it please und außerdem mein Passwort ändern"
    assert split_clauses(text) == ["the kettle I got last week leaks, refund it please",
                                   "mein Passwort ändern"]

from __future__ import annotations

import re

from calibration.data import load_labelled
from router.models.local.clauses import _CLAUSE_BREAK, CONNECTIVES, split_clauses
from router.models.local.text.patterns import grouped_by_first_letter
from tests.paths import DATASETS


def test_the_grouped_connectives_split_where_the_flat_list_splits() -> None:
    grouped = grouped_by_first_letter(CONNECTIVES)
    flat = re.compile(
        _CLAUSE_BREAK.pattern.replace(grouped, f"(?:{'|'.join(CONNECTIVES)})"), re.IGNORECASE
    )
    assert flat.pattern != _CLAUSE_BREAK.pattern
    texts = [r.text for r in load_labelled(DATASETS / "routes")]
    texts += [text.upper() for text in texts[::5]]
    texts += [f"my lamp broke, {c.replace('(?:ly)?', 'ly')} my e-mail" for c in CONNECTIVES]
    texts += [f"MY LAMP BROKE {c.upper()} ENDLESS" for c in CONNECTIVES]
    splits = [_CLAUSE_BREAK.split(text) for text in texts]
    assert sum(len(parts) > 1 for parts in splits) > len(texts) // 10
    assert [t for t, parts in zip(texts, splits, strict=True) if flat.split(t) != parts] == []


def test_two_requests_joined_by_a_connective_are_two_clauses() -> None:
    text = "the kettle I got last week leaks, refund it please und außerdem mein Passwort ändern"
    assert split_clauses(text) == ["the kettle I got last week leaks, refund it please",
                                   "mein Passwort ändern"]

from __future__ import annotations

import re
import sys

import pytest

from router.models.local.clauses import CONNECTIVES
from router.models.local.text.instructions import _ROLES
from router.models.local.text.patterns import grouped_by_first_letter


@pytest.mark.parametrize("alternatives", [CONNECTIVES, _ROLES], ids=["connectives", "roles"])
def test_no_two_first_letters_match_the_same_character(alternatives: tuple[str, ...]) -> None:
    """What makes grouping by first letter safe: at any position, one group at most."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    letters = sorted({a[0] for a in alternatives})
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


def test_grouping_keeps_each_letters_order() -> None:
    grouped = grouped_by_first_letter(["and also", "bot", "and", "a(?:x)?"])
    assert grouped == "(?=[ab])(?:a(?:nd also|nd|(?:x)?)|b(?:ot))"
    pattern = re.compile(rf"\b{grouped}\b", re.IGNORECASE)
    assert [m.group() for m in pattern.finditer("AND ALSO, and, bot, ax, a, robot")] == [
        "AND ALSO", "and", "bot", "ax", "a"
    ]

from __future__ import annotations

import pytest

from router.models.local.kernels.stem_search import StemSearch


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("please ROUTE it", True),  # lowercased first
        ("misrouted parcel", True),  # inside a word
        ("ro ute", False),
        ("YÖNLENDİRME", True),  # "İ" lowercases to "i" + U+0307; the dot goes
        ("you \t\n  are", True),  # a run of whitespace is one space
        ("you\u3000are", True),  # every kind of whitespace
        ("you\u0307are", False),  # dropping the dot joins nothing across it
        ("manda isto", True),
        ("manda", False),  # no space after the last word
        ("   manda   ", False),
        ("clas", False),  # one letter short
        ("class", True),
        ("classify", True),  # a longer stem through a shorter one
        ("", False),
        ("\U0001f600 \udcff ro", False),  # emoji and a lone surrogate are characters too
    ],
)
def test_found_in(text: str, found: bool) -> None:
    search = StemSearch(["rout", "yönlendir", "you are", "manda ", "class", "classif"])
    assert search.found_in(text) is found


def test_empty_stems_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        StemSearch(["rout", ""])

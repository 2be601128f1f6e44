"""Building regular expressions that `re` runs fast.

`re` tries the alternatives of an alternation one by one at every position it reaches, and
skips one quickly only when it starts with a plain, case-sensitive character. A long
case-insensitive list of words therefore costs every position the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence


def grouped_by_first_letter(alternatives: Sequence[str]) -> str:
    """The alternation of `alternatives` (regular expressions, each starting with a plain
    letter) with each letter's alternatives grouped, in their order, behind a lookahead on
    all first letters.

    The same matches as the flat alternation, since no two of the letters match the same
    character (a test checks each list that uses this). A word starting with none of the
    letters costs one test, any other word only its letter's few alternatives.
    """
    groups: dict[str, list[str]] = {}
    for alternative in alternatives:
        groups.setdefault(alternative[0], []).append(alternative[1:])
    branches = "|".join(f"{letter}(?:{'|'.join(rests)})" for letter, rests in groups.items())
    return f"(?=[{''.join(groups)}])(?:{branches})"

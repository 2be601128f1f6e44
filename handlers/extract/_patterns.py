"""Regex helpers every extraction module shares."""

from __future__ import annotations

import re
from collections.abc import Iterable

NOT_LETTER_BEFORE, NOT_LETTER_AFTER = r"(?<![^\W\d_])", r"(?![^\W\d_])"


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)

"""What the decision log keeps about a message's form, so that drift can be measured without
reading customer text again: its length in characters and a guess of its language.

The guess is py3langid's naive Bayes identifier (its model ships in the wheel), limited to
the languages we serve. It runs on every logged decision, so it reads at most
`GUESS_CHARS` characters. It is not a language identifier to route by: the drift monitor
compares the guesser's answers on live traffic with its answers on the certification rows,
so what matters most is that it is the same function both times. `und` is a message the
identifier cannot place with confidence `MIN_CONFIDENCE` (a very short one, an order id
alone, a language we do not serve); a rising `und` share is itself a sign that traffic moved.
"""

from __future__ import annotations

import functools
import re

from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

GUESS_CHARS = 600
"""Characters of a message the language guess reads (its opening says enough)."""

UNDETERMINED = "und"
"""The guess when the identifier cannot place the message (ISO 639-2's code)."""

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "pl", "tr", "ru", "uk", "cs")
"""The languages of our traffic, the guesser's possible answers besides `und`."""

LANGUAGE_GUESSER = "py3langid"
"""Names this guess in a drift reference (`DriftReference.language_guesser`): language
counts of another guess are not compared with it."""

MIN_CONFIDENCE = 0.5
"""The identifier's probability (among `LANGUAGES`) below which the guess is `und`: one word
like "ok" or "help" is not evidence of a language."""

_LETTER = re.compile(r"[^\W\d_]")


@functools.cache
def _identifier() -> LanguageIdentifier:
    """The identifier, loaded once per process (about a second: `warm_up` does it at start)."""
    identifier = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def warm_up() -> None:
    """Load the identifier now, so the first logged decision does not wait for it."""
    _identifier()


def guess_language(text: str) -> str:
    """One of `LANGUAGES`, or `und` when the opening of `text` cannot be placed."""
    head = text[:GUESS_CHARS]
    if not _LETTER.search(head):
        return UNDETERMINED
    lang, probability = _identifier().classify(head)
    return str(lang) if probability >= MIN_CONFIDENCE else UNDETERMINED


def text_chars(text: str) -> int:
    """The message's length in characters (what the length distribution bins)."""
    return len(text)

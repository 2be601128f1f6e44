"""The language guess every logged decision carries: right on the labelled rows of every
language we serve, and `und` where a message gives it nothing to go on."""

from __future__ import annotations

from collections import Counter

import pytest

from calibration.data import load_labelled
from router.storage.message_features import (
    GUESS_CHARS,
    LANGUAGES,
    UNDETERMINED,
    guess_language,
    text_chars,
)
from tests.paths import DATASETS


def test_the_guess_matches_the_labelled_language_in_every_language() -> None:
    rows = load_labelled(DATASETS / "routes")
    right: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for row in rows:
        guess = guess_language(row.text)
        if guess == row.lang:
            right[row.lang] += 1
        elif guess != UNDETERMINED:
            wrong[row.lang] += 1
    assert set(right) == set(LANGUAGES)
    for lang in LANGUAGES:
        n = sum(1 for row in rows if row.lang == lang)
        # The Russian rows include Latin transliterations, which read as Czech.
        assert right[lang] / n >= 0.95, (lang, right[lang], n)
        assert wrong[lang] / n <= 0.03, (lang, wrong[lang], n)


@pytest.mark.parametrize(("text", "lang"), [
    ("Dobrý den, chtěl bych vrátit peníze za rozbitý hrnek z objednávky O-5521.", "cs"),
    ("Доброго дня, коли прийде моє замовлення? Чекаю вже тиждень.", "uk"),
    ("Здравствуйте, когда придёт мой заказ? Жду уже неделю.", "ru"),
    ("Hallo, ich möchte mein Passwort ändern, wie geht das?", "de"),
    ("Hej, jag vill avsluta mitt nyhetsbrev, tack.", "sv"),
])
def test_a_plain_sentence_is_placed(text: str, lang: str) -> None:
    assert guess_language(text) == lang


@pytest.mark.parametrize("text", ["", "O-1234", "1234 5678 ???", "ok", "🙂🙂"])
def test_nothing_to_go_on_is_undetermined(text: str) -> None:
    assert guess_language(text) == UNDETERMINED


def test_only_the_opening_is_read() -> None:
    german = "Ich möchte bitte mein Geld für die kaputte Lampe zurück. " * 20
    assert len(german) > GUESS_CHARS
    english = "I would like my money back for the broken lamp, please. " * 40
    assert guess_language(german + english) == "de"
    assert text_chars(german + english) == len(german) + len(english)

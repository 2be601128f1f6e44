"""What the decision log keeps about a message's form, so that drift can be measured without
reading customer text again: its length in characters and a guess of its language.

The guess is deliberately small: the script (Cyrillic, Latin, other), a few letters only
one language of ours uses, and the commonest short words of each language we serve. It
runs on every logged decision, so it reads at most `GUESS_CHARS` characters and costs a
regex scan. It is not a language identifier to route by: the drift monitor compares the
guesser's answers on live traffic with its answers on the certification rows, so what
matters is that it is the same function both times, not that it is always right.
`und` is a message with no word the guesser knows (a very short one, or a language
we do not serve); a rising `und` share is itself a sign that traffic moved.
"""

from __future__ import annotations

import re
from collections import Counter

GUESS_CHARS = 600
"""Characters of a message the language guess reads (its opening says enough)."""

UNDETERMINED = "und"
"""The guess when no word or letter points to one of our languages (ISO 639-2's code)."""

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "pl", "tr", "ru", "uk")
"""The languages of our traffic, the guesser's possible answers besides `und`."""

_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and my i you is it to of for have not can please was with this "
                    "order what how".split()),
    "de": frozenset("und ich die der das nicht ist mein meine bitte ein eine mit wie habe "
                    "für auf noch".split()),
    "fr": frozenset("je et le la les mon ma mes est pas une un pour avec vous ai commande "
                    "mais".split()),
    "es": frozenset("el la y mi mis es no que por para una un con pedido hola he cómo "
                    "gracias".split()),
    "it": frozenset("il la e mi mio mia non che per una un con ho ordine ciao sono come "
                    "grazie".split()),
    "pt": frozenset("o a e meu minha não que para uma um com pedido olá tenho como "
                    "obrigado".split()),
    "nl": frozenset("ik en de het een niet mijn is van met voor heb bestelling hoe "
                    "graag".split()),
    "sv": frozenset("jag och det en inte min mitt är att för med har hur tack beställning "
                    "på".split()),
    "pl": frozenset("i nie się jest mój moje moja na że to jak mam zamówienie proszę "
                    "dzień".split()),
    "tr": frozenset("ve bir bu için benim ben sipariş mi ne nasıl var yok çok teşekkürler "
                    "merhaba".split()),
    "ru": frozenset("и я не в на что мой моя мне это как заказ здравствуйте пожалуйста "
                    "у".split()),
    "uk": frozenset("і я не в на що мій моя мені це як замовлення добрий будь ласка "
                    "у".split()),
}
# Letters that belong to one of our languages only: each is worth a word.
_LETTERS = {"uk": "іїєґ", "ru": "ыэъё", "tr": "ğış", "pl": "ąęłńśźż", "de": "ß",
            "pt": "ãõ", "es": "ñ", "sv": "å"}
_WORD = re.compile(r"[^\W\d_]+")
_CYRILLIC = re.compile(r"[а-яіїєґё]")
_LATIN = re.compile(r"[a-z]")
_CYRILLIC_LANGS = ("ru", "uk")
_LATIN_LANGS = tuple(lang for lang in LANGUAGES if lang not in _CYRILLIC_LANGS)
# word → the languages it is a sign of, so a message's words are looked up once each
# rather than once per language.
_LANGS_OF_WORD: dict[str, frozenset[str]] = {}
for _lang, _words in _WORDS.items():
    for _word in _words:
        _LANGS_OF_WORD[_word] = _LANGS_OF_WORD.get(_word, frozenset()) | {_lang}


def guess_language(text: str) -> str:
    """One of `LANGUAGES`, or `und` when the opening of `text` names none of them."""
    head = text[:GUESS_CHARS].lower()
    cyrillic = len(_CYRILLIC.findall(head))
    latin = len(_LATIN.findall(head))
    if cyrillic == 0 and latin == 0:
        return UNDETERMINED
    candidates = _CYRILLIC_LANGS if cyrillic > latin else _LATIN_LANGS
    votes: Counter[str] = Counter()
    for word in _WORD.findall(head):
        for lang in _LANGS_OF_WORD.get(word, ()):
            votes[lang] += 1
    for lang in [lang for lang in votes if lang not in candidates]:
        del votes[lang]
    for lang in candidates:
        letters = _LETTERS.get(lang)
        if letters:
            votes[lang] += sum(head.count(letter) for letter in letters)
    if not votes:
        return UNDETERMINED
    best = max(votes.values())
    # Ties go to the first language in `LANGUAGES` order: deterministic, and the order
    # puts the commoner languages of our traffic first.
    return next(lang for lang in candidates if votes[lang] == best)


def text_chars(text: str) -> int:
    """The message's length in characters (what the length distribution bins)."""
    return len(text)

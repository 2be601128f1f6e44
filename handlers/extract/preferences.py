"""Preference changes: marketing e-mails, SMS, paperless billing (on/off) and the language.

Preference changes need an explicit on/off reading; anything ambiguous is left out, and
so is a question about a setting that asks for no change ("Do you send SMS?").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from handlers.extract import locales as loc
from handlers.extract._patterns import rx
from handlers.extract.names import LANGUAGE_NAMES, closest_name


class PreferenceExtraction(BaseModel):
    model_config = ConfigDict(frozen=True)

    changes: dict[str, str] = Field(default_factory=dict)
    unsupported: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class _Cue:
    start: int
    end: int
    value: str | None  # None: a "receive" verb, which only counts when negated
    strong: bool


_Reading = tuple[str, int]  # ("on" | "off", strength: 2 explicit, 1 wish, 0 implied)
_TOPICS = tuple((setting, inverted, rx(p)) for setting, inverted, p in loc.PREFERENCE_TOPICS)
_CUES = tuple((rx(p), value, strong) for p, value, strong in loc.PREFERENCE_CUES)
_UNSUBSCRIBE = rx(loc.UNSUBSCRIBE)
_QUESTION_REQUEST = rx(loc.QUESTION_REQUEST)
_AMBIGUOUS_BEFORE_TOPIC = rx(loc.AMBIGUOUS_BEFORE_TOPIC)
_UNSUPPORTED = tuple((name, rx(p)) for name, p in loc.UNSUPPORTED_SETTINGS)
_LANGUAGE_KEYWORD, _SWITCH_VERB = re.compile(loc.LANGUAGE_KEYWORD), re.compile(loc.SWITCH_VERB)
# "mas"/"mais" is "but" (pt, fr) or "more" (es "mas" typed without its accent, pt "mais"):
# right before a setting's noun ("recibir mas sms") it is "more" and splits nothing.
_MORE_NOUN = (r"(?!(?:sms|correo|e-?mail|mail|publicidad|bolet|newsletter|promo|oferta|mensaje"
              r"|notifica|aviso|factura|fatura|propaganda)\w*)")
_CLAUSE = rx(r"[,;:]|\s[-–—]\s|\s(?:and|but|also|then|und|aber|sowie|y|pero|и|а|но|также|e"
             r"|et|ed|ma|i|oraz|ale|och|men|or|oder|o|ou|или|lub|eller|ve|ama|fakat|та|і|й|але"
             r"|або)\s"
             rf"|(?<!\bno)(?<!quiero)\smas\s{_MORE_NOUN}"
             rf"|(?<!não)(?<!nao)(?<!quero)(?<!receber)\smais\s{_MORE_NOUN}")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def parse_preference_changes(text: str) -> PreferenceExtraction:
    """Supported setting changes the text asks for, plus the unsupported settings it names.

    Keys: marketing_emails, sms_notifications, paperless_billing ("on"/"off") and
    language (ISO 639-1). A setting read both ways with the same confidence is left out.
    """
    votes: list[tuple[str, str, int]] = []
    languages: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        votes += _sentence_votes(sentence)
        if code := _language_target(sentence):
            languages.append(code)
    topics = {setting for setting, _, pattern in _TOPICS if pattern.search(text)}
    unsubscribe = _UNSUBSCRIBE.search(text)
    if unsubscribe and not topics and not _negated(text, unsubscribe.start()):
        votes.append(("marketing_emails", "off", 1))  # "unsubscribe me, please"
    changes: dict[str, str] = {}
    for setting in dict.fromkeys(setting for setting, _, _ in votes):
        mine = [(value, strength) for s, value, strength in votes if s == setting]
        top = max(strength for _, strength in mine)
        values = {value for value, strength in mine if strength == top}
        if len(values) == 1:
            changes[setting] = values.pop()
    if len(set(languages)) == 1:
        changes["language"] = languages[0]
    named = sorted((m.start(), name) for name, p in _UNSUPPORTED if (m := p.search(text)))
    return PreferenceExtraction(changes=changes, unsupported=[name for _, name in named])


def _sentence_votes(sentence: str) -> list[tuple[str, str, int]]:
    """(setting, value, strength) per topic; a clause without a cue inherits the previous
    clause's reading ("turn off the newsletter and SMS"), a clause without a topic lends
    its cue to the previous clause's topics ("I keep getting promos, please stop"), or,
    when none came before, its explicit verb to the next clause's topics ("Отключите,
    пожалуйста, SMS-уведомления")."""
    votes: list[tuple[str, str, int]] = []
    previous_topics: list[tuple[str, bool]] = []
    previous: _Reading | None = None
    pending: _Reading | None = None  # an explicit verb still waiting for its topic
    # "Do you send SMS?" asks about the shop: only an explicit verb counts in a question
    inquiry = sentence.rstrip().endswith("?") and not _QUESTION_REQUEST.search(sentence)
    for clause in _CLAUSE.split(sentence):
        cues = [_Cue(m.start(), m.end(), value, strong)
                for pattern, value, strong in _CUES for m in pattern.finditer(clause)
                if strong or not inquiry]
        topics = sorted((m.start(), m.end(), setting, inverted)
                        for setting, inverted, p in _TOPICS for m in p.finditer(clause)
                        if not _ambiguous_topic(clause, m.start(), cues))
        if not topics:
            if (reading := _reading(clause, cues, None)) and previous_topics:
                votes += [(s, _flip(reading[0], inv), reading[1]) for s, inv in previous_topics]
            elif reading and reading[1] == 2:
                pending = reading
            continue
        for start, end, setting, inverted in topics:
            reading = _reading(clause, cues, (start, end)) or pending or previous
            if reading:
                previous = reading
            elif setting == "paperless_billing" and not inverted:
                reading = ("on", 0)  # "go paperless" is itself the request
            if reading:
                votes.append((setting, _flip(reading[0], inverted), reading[1]))
        previous_topics = [(setting, inverted) for _, _, setting, inverted in topics]
        pending = None
    return votes


def _ambiguous_topic(clause: str, start: int, cues: list[_Cue]) -> bool:
    """A topic whose reading hangs on a quantifier ("plus de SMS") with no verb or negation
    to settle it."""
    before = clause[:start]
    return (bool(_AMBIGUOUS_BEFORE_TOPIC.search(before))
            and not any(cue.strong for cue in cues)
            and not any(loc.fold(w) in loc.NEGATORS for w in _WORD.findall(before)))


def _flip(value: str, flipped: bool) -> str:
    return {"on": "off", "off": "on"}[value] if flipped else value


def _negated(text: str, position: int, *, window: int = 3) -> bool:
    """A negator among the few words before `position` ("don't", "nicht", "не", "ne")."""
    words = _WORD.findall(text[:position])[-window:]
    return any(re.search(r"n['’]t$", w.casefold()) and len(w) > 3
               or loc.fold(w).split()[0] in loc.NEGATORS for w in words)


def _reading(clause: str, cues: list[_Cue], topic: tuple[int, int] | None) -> _Reading | None:
    strong = [cue for cue in cues if cue.strong]
    if strong:
        before = [cue for cue in strong if topic is None or cue.start < topic[0]]
        cue = max(before, key=lambda c: c.start) if before else min(strong, key=lambda c: c.start)
        assert cue.value is not None
        return _flip(cue.value, _negated(clause, cue.start)), 2
    weak = [cue for cue in cues if not cue.strong]
    if any(cue.value == "on" for cue in weak):
        negated = any(_negated(clause, cue.start) or (
            topic is not None and cue.end <= topic[0]
            and _negated(clause[cue.end:topic[0]], topic[0] - cue.end, window=99))
            for cue in weak)
        return ("off" if negated else "on"), 1
    words = _WORD.findall(clause[:topic[0]])[-2:] if topic is not None else []
    if any(loc.fold(w) in loc.NEGATIVE_DETERMINERS for w in words):
        return "off", 2  # "no promos", "keine Werbe-E-Mails mehr", "никаких рассылок"
    return None


def _language_target(sentence: str) -> str | None:
    """The language a sentence asks to switch to, if it asks that."""
    tokens = re.findall(r"[^\W\d_]+", loc.fold(sentence))
    keyword = any(_LANGUAGE_KEYWORD.fullmatch(t) for t in tokens)
    switch = any(_SWITCH_VERB.fullmatch(t) for t in tokens)
    # "je voudrais le site en allemand" (a wish), not "the site in French is broken"
    site = any(t in loc.LANGUAGE_SITE_NOUNS for t in tokens) and any(
        pattern.search(sentence) for pattern, value, strong in _CUES if value and not strong)
    found: list[tuple[bool, str]] = []
    for i, token in enumerate(tokens):
        j = i - 1
        if j > 0 and tokens[j] in {"l", "d", "het"}:  # "l'anglais", "in het Duits"
            j -= 1
        prev = tokens[j] if j >= 0 else ""
        code = LANGUAGE_NAMES.get(token)
        targeted = prev in loc.LANGUAGE_TARGET_PREPS
        if code and prev not in loc.LANGUAGE_SOURCE_PREPS and (
                keyword or ((switch or site) and targeted)):
            found.append((targeted, code))
    if found:
        return max(enumerate(found), key=lambda item: (item[1][0], item[0]))[1][1]
    if keyword:  # one typo in the target: "change the language to Germna"
        for prep, word in zip(tokens, tokens[1:], strict=False):
            if prep in loc.LANGUAGE_TARGET_PREPS and (code := closest_name(word, LANGUAGE_NAMES)):
                return code
    return None

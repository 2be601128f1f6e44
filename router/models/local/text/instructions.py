"""Remove text addressed to the system rather than to the shop, before scoring.

Customers (and people pretending to be them) paste fake operator notes, "route this to
…" lines and instructions to the classifier into messages. Those words say nothing about
what the customer wants, so they are cut out before the model sees the text; what is
left is labelled and scored by the real request. This is a filter on the model's input
only: the routing policy never reads any of it, so even a missed instruction can at most
move scores, never a threshold or a permission.
"""

from __future__ import annotations

import re

from router.models.local.kernels.stem_search import StemSearch
from router.models.local.text.patterns import grouped_by_first_letter

# A segment is one sentence or clause of a line: split after . ! ? ; : and a space.
_SEGMENT_END = re.compile(r"(?<=[.!?;:])\s+")

# Role or channel labels that a customer has no reason to write.
_ROLES = (
    "system", "sys", "assistant", "operator", "admin(?:istrator)?", "internal", "moderator",
    "bot", "ai", "classifier", "router", "routing", "override", "instruction", "directive",
    "note to (?:the )?(?:ai|bot|system|model)", "sistema", "syst[eè]me", "opérateur",
    "operador", "operatore", "betreiber", "systemhinweis", "hinweis", "система", "оператор",
    "администратор", "системная заметка", "systeem", "systemet",
    r"nota\s+(?:do|de|del|dello|della|dell['’]|da)?\s*(?:sistema|operatore|operador|operadora)",
    r"nota\s+(?:interna|operatore|operador)", r"notatka\s+dla\s+systemu", "systemnotiz",
    r"note\s+syst[eè]me", r"примечание\s+(?:для\s+)?систем\w*",
    r"примітка\s+(?:для\s+)?систем\w*",
    r"note\s+(?:to|for)\s+(?:the\s+|whatever\s+|any\s+)?(?:ai|bot|system|model|classifier|router)",
    r"sistem\s+notu", r"meddelande\s+till\s+systemet", r"hinweis\s+an\s+das\s+system",
    r"interne\s+notiz", r"notatka\s+operatora", r"let\s+op\s+router", r"polecenie\s+systemowe",
    r"avviso\s+al\s+sistema", "operatör", r"системное\s+сообщение", r"ticket\s+metadata",
    r"automated\s+note", r"priority\s+routing", "auto-triage",
)  # fmt: skip
_ROLE = grouped_by_first_letter(_ROLES)
# A role in brackets anywhere ("[operator]", "(note to the AI …)", "## system"), or a
# role label that opens the segment ("SYSTEM NOTE:", "[ADMIN] override -"). The first
# needs an opening bracket or a `#`, which most segments lack (`is_instruction`).
_ROLE_IN_BRACKETS = re.compile(
    rf"(?:^|\s)(?:\[|<|\{{|\(|#+\s*)\s*(?:{_ROLE})\b[^\]>}})]*?(?:\]|>|\}}|\))", re.IGNORECASE
)
_OPENING = re.compile(r"[\[<{(#]")
_ROLE_LABEL = re.compile(
    rf"\s*(?:[\[(<{{>]+\s*)?(?:#+\s*)?(?:{_ROLE})(?:\s+\w+){{0,2}}\s*[:>\-–]", re.IGNORECASE
)

# Phrases that instruct a model or a routing system, in the languages we serve. Most start
# at a word: they share one `\b`, so `re` tries their alternation only where a word starts
# instead of trying every phrase's own `\b` at every position.
_STEERING_AT_WORD_START = (
    r"(?:disregard|forget)\s+(?:all\s+|your\s+|the\s+)?(?:previous\s+|prior\s+)?(?:instructions"
    r"|rules|guidelines)",
    r"(?:classify|categori[sz]e|label|tag|mark|route|forward|escalate|send|assign|direct)\s+"
    r"(?:this|it|the\s+(?:ticket|message|request))\b[^.\n]*\b(?:as|to|into|under)\b",
    # Not "team:": "Dear support team: I want a refund" is how a customer opens a letter.
    r"(?:route|label|intent|category|categoria|categoría|catégorie|kategorie|kategoria"
    r"|queue)\s*[:=]",
    r"(?:handle|treat|process)\s+(?:this\s+|it\s+)?as\s+(?:an?\s+)?(?:account|refund|other"
    r"|unclear)\b",
    r"(?:classify|classified|categori[sz]ed?|labell?ed|marked)\s+as\b",
    r"classification\b",
    r"support\s+bot\s+wrote\b",
    r"x-[a-z]+(?:-[a-z]+)*\s*:",
    r"(?:please\s+)?route\s+(?:to|into)\b",
    r"reclassif\w*",
    r"keep\s+(?:that|the|this)\s+label\b",
    r"label\s+it\b",
    r"routing\s+rules\b",
    r"yönlendir\w*",
    r"kategoriser\w*\s+som\b",
    r"skicka\s+till\b",
    r"przekier\w*",
    r"pretend\s+(?:you|to)\b",
    r"file\s+(?:it|this)\s+under\b",
    r"ignore\s+the\s+rules\b",
    r"(?:correct|right|true|real)\s+(?:label|route|category|queue)\b",
    r"this\s+is\s+(?:definitely|clearly|obviously|really)\s+an?\s+\w+\s+(?:request|ticket|issue)",
    r"role\s*:\s*system\b",
    r"you\s+are\s+(?:now\s+)?(?:a|an|the)?\s*\w*bot\b",
    r"you\s+are\s+now\b",
    r"new\s+instructions?\b",
    r"priority\s+override\b",
    r"debug\s+mode\b",
    r"(?:clasific|categoriz|etiquet|encamin|enrut|dirig|reenv)\w*\s+(?:este|esta|esto|como"
    r"|a\s+la|para)\b",
    r"(?:classe[rz]?|class[ée]|rout[eé]|transf[eé]r|achemin)\w*\s+(?:ce|cette|comme|vers|en)\b",
    r"(?:classifica|instrada|inoltra|smista)\w*\s+(?:questo|questa|come|a)\b",
    r"(?:einstufen|klassifizier\w*|weiterleiten|als\s+\w+\s+(?:einstufen|markieren|behandeln))",
    r"(?:klasyfikuj|przekieruj|oznacz\s+jako)",
    r"(?:classificeer|doorsturen\s+naar)",
    r"(?:klassificera|skicka\s+(?:detta|det)\s+till)",
    # "ignore all the previous rules", with words between, in the languages we serve
    r"(?:ignor|negeer|disregard|vergiss|olvid|oubli|dimentic|esque[cç]|игнорир|забудь)\w*\s+"
    r"(?:\S+\s+){0,3}?(?:previous|prior|above|earlier|preceding|precedent\w*|pr[ée]c[ée]dent\w*"
    r"|anterior\w*|vorig\w*|vorherig\w*|bisherig\w*|предыдущ\w*|poprzedni\w*|eerdere|tidigare"
    r"|önceki)",
    r"label\w*\s+(?:this\s+|it\s+)?(?:as\s+)?['\"‘«]?(?:refund|account|other|unclear)\b",
    r"(?:answer|reply|respond|output|r[ée]pond\w*|antwort\w*|respond\w*|rispond\w*|svar\w*"
    r"|ответ\w*)\s*:?\s+(?:with\s+|only\s+)?['\"‘«](?:refund|account|other|unclear)\b",
    r"output\s*[:=]",
    r"the\s+following\s+(?:message|text|ticket|is)\b",
    r"automated\s+system\b",
    r"bu\s+mesaj\b",
    r"decode\s+(?:this|that|it|and)\b",
    r"routing\s+token\b",
    r"priority\s*[:=]",
    r"as\s+\w*bot\b",
    r"(?:vous\s+[êe]tes\s+maintenant|du\s+är\s+nu|du\s+bist\s+jetzt|eres\s+ahora|sei\s+ora"
    r"|você\s+é\s+agora|je\s+bent\s+nu|jesteś\s+teraz|ты\s+теперь)\b",
    r"mode\s+administrateur\b",
    r"routeer\w*",
    r"router\s+vers\b",
    r"zet\s+(?:dit|het)\s+bij\b",
    r"mand[ae]\s+(?:isto|isso|questo|esto|this)\b",
    r"classificat(?:ore|eur)\b",
    r"systeeminstructie\b",
    r"istruzione\s+interna\b",
)
_STEERING_ANYWHERE = (
    r"ignor\w*\s+(?:all\s+|any\s+|the\s+|your\s+|todas?\s+las?\s+|tutte\s+le\s+"
    r"|toutes?\s+les\s+|alle\s+|все\s+|wszystkie\s+)?(?:previous|prior|above|earlier|preceding"
    r"|anteriores|precedenti|précédentes|vorherigen|bisherigen|предыдущие|poprzednie|eerdere"
    r"|tidigare)",
    r"\"(?:route|label|intent|category)\"",
    r"\w*queue\s*[:=]",
    r"маршрут\s*[:=]",
    r"<<\s*/?\s*sys\s*>>",
    r"</?\s*sys\s*>",
    r"(?:классифицир|направ\w+\s+(?:в|это|этот)|перенаправ|пометь\w*\s+как|отнеси\s+к)",
    r"системн\w*\s+сообщени\w*",
)
_STEERING = re.compile(
    rf"\b(?:{'|'.join(_STEERING_AT_WORD_START)})|{'|'.join(_STEERING_ANYWHERE)}",
    re.IGNORECASE,
)

# Every _STEERING alternative contains one of these stems; a message holding none of them
# (most messages) skips the expensive alternation entirely.
_STEERING_STEMS = (
    "ignor",
    "disregard",
    "forget",
    "class",
    "categor",
    "catégor",
    "label",
    "tag",
    "mark",
    "rout",
    "forward",
    "escalat",
    "send",
    "assign",
    "direct",
    "intent",
    "you are",
    "instruction",
    "override",
    "debug",
    "clasific",
    "etiquet",
    "encamin",
    "enrut",
    "dirig",
    "reenv",
    "transf",
    "achemin",
    "instrad",
    "inoltr",
    "smist",
    "einstuf",
    "klassifi",
    "weiterleit",
    "markier",
    "behandel",
    "классифиц",
    "направ",
    "помет",
    "отнеси",
    "klasyfik",
    "przekier",
    "oznacz",
    "doorstur",
    "skicka",
    "queue",
    "team",
    "pretend",
    "under",
    "rules",
    "correct",
    "right",
    "true",
    "real",
    "this is",
    "sys",
    "role",
    "handle",
    "treat",
    "process",
    "x-",
    "bot",
    "маршрут",
    "yönlendir",
    "kategor",
    "negeer",
    "vergiss",
    "olvid",
    "oubli",
    "dimentic",
    "esque",
    "игнор",
    "забудь",
    "output",
    "'refund",
    "'account",
    "'other",
    "'unclear",
    "\"refund",
    "\"account",
    "\"other",
    "\"unclear",
    "‘refund",
    "‘account",
    "‘other",
    "‘unclear",
    "«refund",
    "«account",
    "«other",
    "«unclear",
    "the following",
    "automated",
    "bu mesaj",
    "decode",
    "priority",
    "tes maintenant",
    "du är nu",
    "bist jetzt",
    "eres ahora",
    "sei ora",
    "você é agora",
    "bent nu",
    "jesteś teraz",
    "ты теперь",
    "administrateur",
    "zet d",
    "zet h",
    "manda ",
    "mande ",
    "системн",
    "istruzione",
)

NOTE_BODY_MAX_WORDS = 8

# A routing field written into a sentence ("… refund me route=acct pls", "category=other",
# "||ROUTE:OTHER||"): the field goes, the sentence around it stays. Removing the whole
# sentence, as for any other steering phrase, also removed the request it held. The
# leading lookahead (every match starts with one of those letters) lets `re` reject most
# positions at once.
_INLINE_ROUTE_FIELD = re.compile(
    r"(?=[|xrlickqb])(?:\|\|)?(?:\bx-)?\b(?:route|routing|label|intent|category|categoria"
    r"|categoría|catégorie|kategorie|kategoria|queue|bucket)\s*[:=]\s*['\"«]?[^\W_]+['\"»]?(?:\|\|)?",
    re.IGNORECASE,
)

_JSON_BLOB = re.compile(r"\{[^{}]*\"?(?:route|label|intent|category|priority)\"?\s*:[^{}]*\}", re.I)


_TAG_BLOCK = re.compile(
    r"<<\s*(sys|system|inst)\s*>>.*?<<\s*/\s*\1\s*>>|<(system|instructions?)>.*?</\2>|<!--.*?-->",
    re.IGNORECASE | re.DOTALL,
)


_STEMS = StemSearch(_STEERING_STEMS)


def _may_steer(segment: str) -> bool:
    # Folded before the search (`router.models.local.kernels.stem_search`): the Turkish "İ"
    # lowercases to "i" + U+0307, which `_STEERING`'s case-insensitive match does not see, so
    # the dot goes and "YÖNLENDİRME" still meets the stem "yönlendir".
    return _STEMS.found_in(segment)


def is_instruction(segment: str, *, may_steer: bool = True) -> bool:
    """`may_steer=False` (no stem anywhere in the message) skips the costly alternation."""
    if _ROLE_LABEL.match(segment) or (
        _OPENING.search(segment) and _ROLE_IN_BRACKETS.search(segment)
    ):
        return True
    return may_steer and _may_steer(segment) and bool(_STEERING.search(segment))


def _kept_segments(line: str, *, may_steer: bool) -> list[str]:
    """Sentences of a line that are not instructions.

    An instruction that ends in a colon ("SYSTEM NOTE:", "Route:") also takes the
    sentence after it, which is the body of the note ("route to refunds team."), when
    that sentence is short or itself holds a steering word: a long plain sentence after
    "send this to the refunds team:" is the customer's own request.
    """
    kept: list[str] = []
    skip_next = False
    for segment in _SEGMENT_END.split(line):
        instruction = is_instruction(segment, may_steer=may_steer)
        body_of_note = skip_next and (
            len(segment.split()) <= NOTE_BODY_MAX_WORDS or (may_steer and _may_steer(segment))
        )
        if not (body_of_note or instruction):
            kept.append(segment.strip())
        skip_next = instruction and segment.rstrip().endswith((":", ">", "-", "–"))
    return kept


# A bracketed block ([…], <<…>>, <tag>…</tag>) goes as a whole when what it holds is
# addressed to the system; cutting it into sentences first would keep its opening
# ("[SYSTEM NOTE:") and drop the customer's request that follows it on the same line.
# A block followed by a colon or an arrow is a role label ("[SYSTEM]: …"): the segment
# rules below remove it together with the note it introduces.
_BRACKETED = re.compile(
    r"(?:\[[^\[\]\n]{1,300}\]|<<[^<>\n]{1,300}>>"
    r"|<([a-z][\w-]*)\b[^<>]{0,200}>[^<>]{0,300}</\1\s*>)(?!\s*[:>\-–])",
    re.IGNORECASE,
)
_MARKUP_TAG = re.compile(
    r"</?(?:div|span|p|br|font|b|i|u|em|strong|a|img|script|style|meta|body|html|head|label|"
    r"route|category|intent|message|system|inst|instructions?|note|hidden)\b[^<>]{0,200}>",
    re.IGNORECASE,
)
_MARKUP_NAMES = re.compile(r"<\s*/?\s*(?:label|route|category|intent|message|system|inst)", re.I)


def _drop_bracketed(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        block = match.group(0)
        inner = _MARKUP_TAG.sub(" ", block).strip("[]<> ")
        if _MARKUP_NAMES.match(block) or is_instruction(inner) or is_instruction(f"[{inner}]"):
            return " "
        return block

    return _BRACKETED.sub(replace, text)


def strip_instructions(text: str) -> str:
    """The text with every instruction-like line or sentence, and every routing field
    written into a sentence, removed."""
    if "{" in text:
        text = _JSON_BLOB.sub(" ", text)
    if "<" in text:
        text = _TAG_BLOCK.sub(" ", text)
    if "[" in text or "<" in text:
        text = _drop_bracketed(text)
        if "<" in text:
            text = _MARKUP_TAG.sub(" ", text)
    if ":" in text or "=" in text:
        text = _INLINE_ROUTE_FIELD.sub(" ", text)
    may_steer = _may_steer(text)  # a stem in any segment is a stem in the whole text
    kept = [
        segment
        for line in text.splitlines()
        for segment in _kept_segments(line, may_steer=may_steer)
    ]
    return " ".join(s for s in kept if s)

"""What of an e-mail is the customer's: the text without its quoting.

A customer who answers our e-mail sends the thread back: quoted earlier messages, reply
headers ("On … wrote:", "-----Original Message----- From: … Sent: …", in their own
language), a legal disclaimer. Read whole, the quoted text — often our own agent's
words, or an older request — competes with what the customer asks now. Two readings:

`strip_email_quoting`, what the route models score, sets aside what is certainly not
the customer's words:

- lines quoted with `>`, and the attribution line just above such a block ("On … wrote:",
  "Le … a écrit :", "Am … schrieb …:");
- the legal disclaimers that `mail-parser-reply` finds (it knows their shapes in many
  languages).

Everything else stays, in order. Forward headers stay: their subject line ("RE: E-reader
not working O-6691") is often the clearest statement of the topic. Customers write
above the quote, below it, and between its lines, and an earlier message pasted without
`>` cannot be told from their own text, so taking only "the latest reply" (the text
above the first header) would drop the request of everyone who writes below the quote.
A bulleted list survives too: the parser's signature rule takes any line starting with
a dash for a signature.

`customer_words`, what the handlers read amounts, settings and addresses from, is
stricter, because acting on a quoted "€60.00" costs more than asking: it also drops an
earlier message that is not marked with `>` (from the first forward or reply header
down: "---------- Forwarded message ---------", "-----Original Message-----", "From: …
Sent: …", an "On … wrote:" line), the paragraph a disclaimer starts, and the signature
after a closing line ("Best regards", "Mit freundlichen Grüßen", "-- "; a "P.S." below
it is kept; "Thanks," is no closing, it as often opens a request). It never falls back
to the whole text: a message that is all quote has no words of the customer's own.
What it drops as quoted or forwarded may still be meant (some customers write below a
forwarded message; "Yes please" above our quoted offer accepts one of its amounts), so
`earlier_messages` returns that part for a handler to ask about rather than ignore.

The models score the first (`router.models.local.model.prepare_texts`, which the local
and e5 models, evaluation and certification all go through); the handlers read order
ids and e-mail addresses from the whole message (an order id in a quoted part still
counts) and everything else from the second (`handlers.extract.customer_words`).
A one-line message cannot hold any of this and skips the parser, which costs a fraction
of a millisecond even when it finds nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mailparser_reply import EmailReplyParser
from mailparser_reply.parser import EmailMessage

EMAIL_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pl", "sv", "cs")
"""The router's languages that mail-parser-reply has header and disclaimer patterns for."""
MIN_KEPT_WORDS = 4
"""Fewer words left than this: the text was not an e-mail thread after all; keep it whole."""
_QUOTED = re.compile(r"^[ \t]*>")
_WORD = re.compile(r"[^\W\d_]{2,}")
# Where an earlier message starts when it is not quoted with `>`, beside the parser's
# reply headers: a mail client's forward line ("---------- Forwarded message ---------",
# "-------- Ursprüngliche Nachricht --------", "Begin forwarded message:") and the
# attributions the parser does not know ("El … escribió:", "Op … schreef …:").
_EARLIER_MESSAGE = re.compile(
    r"^-{4,}\s*[^\W\d_][^\n]{2,60}?\s*-{4,}$"
    r"|^(?:begin forwarded message|anfang der weitergeleiteten nachricht"
    r"|beginn der weitergeleiteten nachricht|début du message (?:réexpédié|transféré)"
    r"|inicio del mensaje reenviado|inizio messaggio inoltrato|begin doorgestuurd bericht"
    r"|początek przekazanej wiadomości|vidarebefordrat meddelande)\s*:$"
    r"|^\S.{5,300}\s(?:wrote|schrieb|a écrit|escribió|ha scritto|schreef|napisał(?:\(a\))?"
    r"|skrev|napsal\(a\)|escreveu)(?:\s.{0,80})?\s?:$",
    re.IGNORECASE | re.MULTILINE)
# A closing line: the signature starts here. Only closings that do not open a request
# ("Thanks, could you…" does): a "Thanks" line is kept.
_CLOSING = re.compile(
    r"^(?:(?:best|kind|warm|many|with)\s+(?:regards|wishes)|regards|sincerely|yours(?: sincerely"
    r"| truly| faithfully)?|cheers|mit freundlichen gr(?:ü|ue)(?:ß|ss)en|(?:viele|beste|liebe"
    r"|herzliche|freundliche) gr(?:ü|ue)(?:ß|ss)e|mfg|(?:bien )?cordialement|salutations"
    r"|bien à vous|(?:un )?saludos?(?: cordiales)?|atentamente|cordialmente|cordiali saluti"
    r"|distinti saluti|saluti|(?:met )?vriendelijke groet(?:en)?|groeten|pozdrawiam"
    r"|z powa(?:ż|z)aniem|med vänliga hälsningar|vänliga hälsningar|atenciosamente"
    r"|cumprimentos|s pozdravem)[ \t]*[,.!]?(?P<name>.*)$", re.IGNORECASE)
_POSTSCRIPT = re.compile(r"^(?:p\.?\s?s\.?|pd)\s*[:.\s]", re.IGNORECASE)


@lru_cache(maxsize=1)
def _parser() -> EmailReplyParser:
    return EmailReplyParser(languages=list(EMAIL_LANGUAGES))


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The parser's reply and forward headers and its disclaimers (both read lines with
    their indent removed)."""
    message = EmailMessage(text="", languages=list(EMAIL_LANGUAGES))
    return message.HEADER_REGEX, message.DISCLAIMERS_REGEX


def strip_email_quoting(text: str) -> str:
    """`text` without `>`-quoted lines, their attribution line and disclaimers; `text`
    itself when it has none of them or hardly anything else."""
    if "\n" not in text.strip():
        return text
    kept = _without_disclaimers(_without_quoted_lines(text.splitlines()))
    kept = re.sub(r"\n{3,}", "\n\n", kept).strip()
    if kept == text.strip() or len(_WORD.findall(kept)) < MIN_KEPT_WORDS:
        return text
    return kept


def customer_words(text: str) -> str:
    """What the customer wrote in `text`: without `>`-quoted lines and their attribution,
    without an earlier message below a forward or reply header, disclaimers and the
    signature; "" when all of it is quoted. Lines come back without their indent."""
    return _split(text)[0]


def earlier_messages(text: str) -> str:
    """What `text` quotes or forwards: its `>`-quoted lines and everything from the first
    forward or reply header down ("" when it has neither). Not the customer's words for
    certain, nor certainly not: what a handler may ask about, never act on."""
    return _split(text)[1]


# A handler reads one message several times (amounts, a refusal, the reason, what it
# quotes), and the parser's header pattern is the costly part: each text is split once.
@lru_cache(maxsize=32)
def _split(text: str) -> tuple[str, str]:
    """(`customer_words`, `earlier_messages`) of `text`."""
    lines = text.splitlines()
    quoted = [line for line in lines if _QUOTED.match(line)]
    if "\n" not in text.strip() and not quoted:
        return text.strip(), ""
    unquoted = [line.strip() for line in _without_quoted_lines(lines).splitlines()]
    above = _above_earlier_message(unquoted)
    own = _without_disclaimer_paragraphs("\n".join(_without_signature(above)))
    earlier = "\n".join([*quoted, *unquoted[len(above):]]).strip()
    return re.sub(r"\n{3,}", "\n\n", own).strip(), earlier


def _without_quoted_lines(lines: list[str]) -> str:
    keep = [not _QUOTED.match(line) for line in lines]
    for i in range(len(lines)):
        if keep[i]:
            continue
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0 and keep[above] and lines[above].rstrip().endswith(":"):
            keep[above] = False
    return "\n".join(line for line, wanted in zip(lines, keep, strict=True) if wanted)


def _without_disclaimers(text: str) -> str:
    for reply in _parser().read(text).replies:
        for disclaimer in reply.disclaimers:
            if disclaimer:
                text = text.replace(disclaimer, "")
    return text


def _first_line(text: str, pattern: re.Pattern[str]) -> int | None:
    """The index of the line where `pattern` first matches `text` (a match may start with
    the line break before it)."""
    m = pattern.search(text)
    if m is None:
        return None
    start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip("\n")))
    return text.count("\n", 0, start)


def _above_earlier_message(lines: list[str]) -> list[str]:
    """The lines above the first forward or reply header."""
    joined = "\n".join(lines)
    cuts = [i for p in (_patterns()[0], _EARLIER_MESSAGE)
            if (i := _first_line(joined, p)) is not None]
    return lines[:min(cuts)] if cuts else lines


def _is_closing(line: str) -> bool:
    """"Best regards", "Viele Grüße, Ana Novak": a closing alone or with a name after it
    ("Saludos, necesito ayuda" opens a request)."""
    if line.strip() == "--":  # the signature separator, "-- "
        return True
    m = _CLOSING.match(line.strip())
    if m is None:
        return False
    name = m.group("name").split()
    return len(name) <= 3 and all(word[0].isupper() and word.isalpha() for word in name)


def _without_signature(lines: list[str]) -> list[str]:
    """The lines above the first closing line that follows some text, and a postscript."""
    for i, line in enumerate(lines):
        if _is_closing(line) and any(above.strip() for above in lines[:i]):
            below = lines[i + 1:]
            ps = next((j for j, rest in enumerate(below) if _POSTSCRIPT.match(rest.strip())),
                      None)
            return lines[:i] + (below[ps:] if ps is not None else [])
    return lines


def _without_disclaimer_paragraphs(text: str) -> str:
    """`text` without each paragraph a disclaimer starts in: the parser's match ends at
    the first character it does not expect ("$", a digit group), the paragraph does not."""
    while m := _patterns()[1].search(text):
        start = m.start() + len(m.group(0)) - len(m.group(0).lstrip("\n\r.!? \t\u00a0"))
        end = text.find("\n\n", start)
        text = text[:start] + (text[end:] if end >= 0 else "")
    return text

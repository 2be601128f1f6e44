"""The part of a message a route model scores: an e-mail without its quoting.

A customer who answers our e-mail sends the thread back: quoted earlier messages, reply
headers ("On … wrote:", "-----Original Message----- From: … Sent: …", in their own
language), a legal disclaimer. Scored whole, the quoted text — often our own agent's
words, or an older request — competes with what the customer asks now.
`strip_email_quoting` sets aside what is certainly not the customer's words:

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

The models score this text (`router.models.local.model.prepare_texts`, which the local
and e5 models, evaluation and certification all go through); the handlers always get
the whole message (an order id in a quoted part still counts there).
A one-line message cannot hold any of this and skips the parser, which costs a fraction
of a millisecond even when it finds nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mailparser_reply import EmailReplyParser

EMAIL_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pl", "sv", "cs")
"""The router's languages that mail-parser-reply has header and disclaimer patterns for."""
MIN_KEPT_WORDS = 4
"""Fewer words left than this: the text was not an e-mail thread after all; keep it whole."""
_QUOTED = re.compile(r"^[ \t]*>")
_WORD = re.compile(r"[^\W\d_]{2,}")


@lru_cache(maxsize=1)
def _parser() -> EmailReplyParser:
    return EmailReplyParser(languages=list(EMAIL_LANGUAGES))


def strip_email_quoting(text: str) -> str:
    """`text` without `>`-quoted lines, their attribution line and disclaimers; `text`
    itself when it has none of them or hardly anything else."""
    if "\n" not in text.strip():
        return text
    kept = _without_quoted_lines(text.splitlines())
    for reply in _parser().read(kept).replies:
        for disclaimer in reply.disclaimers:
            if disclaimer:
                kept = kept.replace(disclaimer, "")
    kept = re.sub(r"\n{3,}", "\n\n", kept).strip()
    if kept == text.strip() or len(_WORD.findall(kept)) < MIN_KEPT_WORDS:
        return text
    return kept


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

"""The human queue: cases handed off to people, and a person's reply to one.

A case is in the queue while its status is `handed_off`. The queue is read a page at a
time, oldest first (by the case's last update, then id): `list_handoffs` returns at most
`limit` rows (default 50, at most 200) and an opaque `next_cursor` to pass back for the
following page (None on the last one), plus how many cases wait in all that match the
filters: `older_than_s` keeps only cases waiting at least that long, `newer_than_s` only
those waiting at most that long, `lang` only those whose newest customer message is in
that language (the guess of router/storage/message_features.py; `und` when it knew no
word).

An agent's reply is added to the case as a message from `agent` (the customer reads it
as is), recorded as an `handoff.agent_reply` action, and resolves the case; a later
customer message is routed again like any other. Exactly one reply resolves a case:
the write is conditional on the case still being `handed_off` (`CaseBook.record_if_status`),
so of several agents replying at once — in one process or several — one wins and the
others get `not_handed_off` (409), as a reply to an already answered case does. The
action records who replied: `principal` is the authenticated caller, `agent` the name
they gave, for display only. Bad input (an empty or over-long text, a name with control
characters, an unknown case, a case not in the queue, a malformed cursor) is refused
before anything is written.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from handlers.observation import success
from handlers.services.cases import Action, CaseBook, Turn
from router.errors import Conflict, InvalidInput, NotFound
from router.storage.message_features import LANGUAGES, UNDETERMINED

MAX_AGENT_CHARS = 64
MAX_REPLY_CHARS = 4000
MAX_NOTE_CHARS = 1000
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class HandoffOutcome:
    case_id: str
    agent: str
    """The display name the agent gave."""
    principal: str
    """Who the audit trail records as having replied (the authenticated caller)."""
    reply: str
    case_status: str


@dataclass(frozen=True)
class HandoffPage:
    items: list[dict[str, Any]]
    next_cursor: str | None
    total: int
    """Cases in the queue that match the filters, on every page."""


def _cursor(at: datetime, case_id: str) -> str:
    raw = json.dumps([at.isoformat(), case_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    """The (updated_at, case id) key a cursor stands for; `invalid_cursor` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, case_id = json.loads(raw)
        if not isinstance(at, str) or not isinstance(case_id, str):
            raise TypeError("cursor fields")
        return datetime.fromisoformat(at), case_id
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this queue returned (pass `next_cursor` "
                           "as it came)", code="invalid_cursor") from exc


QUEUE_LANGUAGES: tuple[str, ...] = (*LANGUAGES, UNDETERMINED)
"""The values the `lang` filter accepts."""


def _ago(cases: CaseBook, seconds: float | None, code: str) -> datetime | None:
    if seconds is None:
        return None
    if seconds < 0:
        raise InvalidInput(f"a waiting time must be ≥ 0 s, not {seconds}", code=code)
    return cases.now() - timedelta(seconds=seconds)


def list_handoffs(cases: CaseBook, *, limit: int = DEFAULT_PAGE_SIZE,
                  cursor: str | None = None, older_than_s: float | None = None,
                  newer_than_s: float | None = None, lang: str | None = None,
                  ) -> HandoffPage:
    """One page of the open queue, oldest first, with each case's last customer message
    and the reason it was handed off."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidInput(f"limit must be 1–{MAX_PAGE_SIZE}, not {limit}",
                           code="invalid_limit")
    if lang is not None and lang not in QUEUE_LANGUAGES:
        raise InvalidInput(f"lang must be one of {', '.join(QUEUE_LANGUAGES)}, not {lang!r}",
                           code="invalid_lang")
    before = _ago(cases, older_than_s, "invalid_older_than")
    since = _ago(cases, newer_than_s, "invalid_newer_than")
    after = _parse_cursor(cursor) if cursor else None
    rows = cases.page("handed_off", limit=limit + 1, after=after, updated_before=before,
                      updated_after=since, lang=lang)
    more, rows = len(rows) > limit, rows[:limit]
    ids = [case.id for case in rows]
    last_texts = cases.last_messages(ids, role="customer")
    handoffs = cases.last_actions(ids, name="handoff.human_queue")
    items = []
    for case in rows:
        handoff = handoffs.get(case.id, {})
        items.append({"case_id": case.id, "customer_id": case.customer_id,
                      "since": case.updated_at, "opened": case.created_at,
                      "lang": case.lang,
                      "reason": handoff.get("artifacts", {}).get("reason"),
                      "summary": handoff.get("summary"),
                      "last_customer_message": last_texts.get(case.id)})
    next_cursor = _cursor(rows[-1].updated_at, rows[-1].id) if more else None
    return HandoffPage(items=items, next_cursor=next_cursor,
                       total=cases.count("handed_off", updated_before=before,
                                         updated_after=since, lang=lang))


def check_display_name(name: str, *, code: str) -> str:
    """A person's name as typed, stripped; `InvalidInput(code)` if empty, too long or
    holding control characters (pure)."""
    name = name.strip()
    if not name or len(name) > MAX_AGENT_CHARS or _CONTROL.search(name):
        raise InvalidInput(f"a name must be 1–{MAX_AGENT_CHARS} printable characters, "
                           f"not {name!r}", code=code)
    return name


def check_note(note: str) -> str:
    """A supervisor's note on a decision, stripped (may be empty); `InvalidInput`
    (`invalid_note`) if too long or holding control characters other than line breaks
    (pure)."""
    note = note.strip()
    if len(note) > MAX_NOTE_CHARS or _CONTROL.search(note):
        raise InvalidInput(f"a note must be at most {MAX_NOTE_CHARS} printable characters",
                           code="invalid_note")
    return note


def check_reply(agent: str, text: str) -> tuple[str, str]:
    """The agent's name and reply, stripped; `InvalidInput` names what is wrong (pure)."""
    agent, text = check_display_name(agent, code="invalid_agent"), text.strip()
    if not text:
        raise InvalidInput("the reply text is empty", code="empty_text")
    if len(text) > MAX_REPLY_CHARS:
        raise InvalidInput(f"the reply has {len(text)} characters; the limit is "
                           f"{MAX_REPLY_CHARS}", code="text_too_long")
    if _CONTROL.search(text):
        raise InvalidInput("the reply contains control characters",
                           code="control_characters")
    return agent, text


def _not_waiting(case_id: str, status: str) -> Conflict:
    return Conflict(f"case {case_id!r} is {status}, not waiting for a person",
                    code="not_handed_off")


def reply_to_handoff(cases: CaseBook, case_id: str, *, agent: str, text: str,
                     principal: str, now: datetime | None = None) -> HandoffOutcome:
    """Add a person's reply to a handed-off case and resolve it, exactly once."""
    agent, text = check_reply(agent, text)
    case = cases.get(case_id)
    if case is None:
        raise NotFound(f"no case {case_id!r}", code="unknown_case")
    if case.status != "handed_off":
        raise _not_waiting(case_id, case.status)
    obs = success("agent_replied", f"{principal} replied (as {agent!r})",
                  principal=principal, agent=agent, at=now.isoformat() if now else None)
    written = cases.record_if_status(case_id, Turn(
        request_id=None, customer_text=None, decision=None,
        actions=[Action("handoff.agent_reply", obs)], reply=text, status="resolved",
        flow=None, customer_id=case.customer_id, reply_role="agent",
    ), status="handed_off")
    if not written:  # another reply resolved it between the read above and this write
        now_case = cases.get(case_id)
        raise _not_waiting(case_id, now_case.status if now_case else "gone")
    return HandoffOutcome(case_id=case_id, agent=agent, principal=principal, reply=text,
                          case_status="resolved")

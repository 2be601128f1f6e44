"""The human queue: cases handed off to people, and a person's reply to one.

A case is in the queue while its status is `handed_off`. An agent's reply is added to
the case as a message from `agent` (the customer reads it as is), recorded as an
`handoff.agent_reply` action, and resolves the case; a later customer message is routed
again like any other. Bad input (an empty or over-long text, an agent name with control
characters, an unknown case, a case not in the queue) is refused before anything is
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from handlers.observation import success
from handlers.services.cases import Action, CaseBook, Turn
from router.errors import Conflict, InvalidInput, NotFound

MAX_AGENT_CHARS = 64
MAX_REPLY_CHARS = 4000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class HandoffOutcome:
    case_id: str
    agent: str
    reply: str
    case_status: str


def _last(messages: list[dict[str, Any]], role: str) -> str | None:
    texts = [m["text"] for m in messages if m["role"] == role]
    return texts[-1] if texts else None


def list_handoffs(cases: CaseBook) -> list[dict[str, Any]]:
    """The open queue, oldest first, with the customer's last message and the reason."""
    rows = []
    for case in cases.with_status("handed_off"):
        view = cases.view(case.id) or {"messages": [], "actions": []}
        handoffs = [a for a in view["actions"] if a["name"] == "handoff.human_queue"]
        reason = handoffs[-1].get("artifacts", {}).get("reason") if handoffs else None
        summary = handoffs[-1].get("summary") if handoffs else None
        rows.append({"case_id": case.id, "customer_id": case.customer_id,
                     "since": case.updated_at, "reason": reason, "summary": summary,
                     "last_customer_message": _last(view["messages"], "customer")})
    return rows


def check_reply(agent: str, text: str) -> tuple[str, str]:
    """The agent's name and reply, stripped; `InvalidInput` names what is wrong (pure)."""
    agent, text = agent.strip(), text.strip()
    if not agent or len(agent) > MAX_AGENT_CHARS or _CONTROL.search(agent):
        raise InvalidInput(f"agent must be 1–{MAX_AGENT_CHARS} printable characters, "
                           f"not {agent!r}", code="invalid_agent")
    if not text:
        raise InvalidInput("the reply text is empty", code="empty_text")
    if len(text) > MAX_REPLY_CHARS:
        raise InvalidInput(f"the reply has {len(text)} characters; the limit is "
                           f"{MAX_REPLY_CHARS}", code="text_too_long")
    if _CONTROL.search(text):
        raise InvalidInput("the reply contains control characters",
                           code="control_characters")
    return agent, text


def reply_to_handoff(cases: CaseBook, case_id: str, *, agent: str, text: str,
                     now: datetime | None = None) -> HandoffOutcome:
    """Add a person's reply to a handed-off case and resolve it; nothing else changes."""
    agent, text = check_reply(agent, text)
    case = cases.get(case_id)
    if case is None:
        raise NotFound(f"no case {case_id!r}", code="unknown_case")
    if case.status != "handed_off":
        raise Conflict(f"case {case_id!r} is {case.status}, not waiting for a person",
                       code="not_handed_off")
    obs = success("agent_replied", f"{agent} replied to the customer", agent=agent,
                  at=now.isoformat() if now else None)
    cases.record(case_id, Turn(
        request_id=None, customer_text=None, decision=None,
        actions=[Action("handoff.agent_reply", obs)], reply=text, status="resolved",
        flow=None, customer_id=case.customer_id, reply_role="agent",
    ))
    return HandoffOutcome(case_id=case_id, agent=agent, reply=text, case_status="resolved")

"""The agent's pages: the hand-off queue (paged, filtered), a case's history, the reply.

The queue is the desk's `list_handoffs`, the API's own use case: oldest first, a page at
a time (keyset cursor), filtered by how long a case has waited (at least / at most) and
by the language of its newest customer message. A case is shown to an agent only if it
went through the human queue (the API's agent role reads nothing else). Exactly one reply
resolves a case: a second reply, from this page or any other, is told the case is no
longer waiting (409 `not_handed_off`) on the case's own page.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from handlers.fallback.handoffs import QUEUE_LANGUAGES
from router.errors import Conflict, InvalidInput, NotFound
from router.gateway.console.deps import AgentSession, CheckedForm
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.deps import ServicesDep
from router.gateway.schemas import Identifier

router = APIRouter(route_class=ConsoleRoute)

PAGE_SIZE = 25
WAITS: tuple[tuple[str, int | None], ...] = (
    ("any time", None), ("5 min", 300), ("30 min", 1800), ("1 h", 3600), ("4 h", 14400),
    ("1 day", 86400), ("1 week", 604800),
)
"""The waiting times the filters offer, in seconds."""
HANDOFF_ACTION = "handoff.human_queue"


def _seconds(value: str | None, name: str) -> int | None:
    """A waiting-time filter's whole seconds; None when empty (pure)."""
    if not value:
        return None
    if not value.isdigit() or int(value) > 10 ** 9:
        raise InvalidInput(f"{name} must be whole seconds, not {value!r}",
                           code="invalid_filter")
    return int(value)


def _filters(lang: str | None, min_wait: int | None, max_wait: int | None) -> dict[str, Any]:
    return {k: v for k, v in (("lang", lang), ("min_wait", min_wait),
                              ("max_wait", max_wait)) if v not in (None, "")}


@router.get("/handoffs")
async def handoffs(
    request: Request, session: AgentSession, services: ServicesDep,
    lang: Annotated[str | None, Query(pattern=r"^([a-z]{2,3})?$")] = None,
    min_wait: Annotated[str | None, Query(max_length=12)] = None,
    max_wait: Annotated[str | None, Query(max_length=12)] = None,
    cursor: Annotated[str | None, Query(max_length=200, pattern=r"^[A-Za-z0-9_-]*$")] = None,
) -> Response:
    """Cases waiting for a person, oldest first, a page at a time (an empty filter field,
    as the form sends "any", is no filter)."""
    lang = lang or None
    at_least, at_most = _seconds(min_wait, "min_wait"), _seconds(max_wait, "max_wait")
    page = await run_in_threadpool(lambda: services.desk.list_handoffs(
        limit=PAGE_SIZE, cursor=cursor or None, older_than_s=at_least,
        newer_than_s=at_most, lang=lang))
    filters = _filters(lang, at_least, at_most)
    next_url = (f"?{urlencode(filters | {'cursor': page.next_cursor})}"
                if page.next_cursor else None)
    return render(request, "handoffs.html", page=page, filters=filters,
                  languages=QUEUE_LANGUAGES, waits=WAITS, next_url=next_url,
                  first_url=f"?{urlencode(filters)}" if cursor else None)


async def _case_page(request: Request, services: ServicesDep, case_id: str, *,
                     status_code: int = 200, notice: dict[str, str] | None = None) -> Response:
    case = await run_in_threadpool(services.desk.get_case, case_id)
    if not any(action["name"] == HANDOFF_ACTION for action in case["actions"]):
        raise NotFound(f"case {case_id!r} never reached the human queue",
                       code="unknown_case")
    replies = [a for a in case["actions"] if a["name"] == "handoff.agent_reply"]
    return render(request, "handoff.html", status_code=status_code, case=case,
                  notice=notice, replied=replies[-1] if replies else None)


@router.get("/handoffs/{case_id}")
async def handoff(case_id: Identifier, request: Request, session: AgentSession,
                  services: ServicesDep) -> Response:
    """A handed-off case's whole history, and the reply box while it waits."""
    return await _case_page(request, services, case_id)


@router.post("/handoffs/{case_id}/reply")
async def reply(case_id: Identifier, request: Request, session: AgentSession,
                form: CheckedForm, services: ServicesDep) -> Response:
    """Send the reply to the customer and resolve the case, once."""
    try:
        await run_in_threadpool(lambda: services.desk.reply_handoff(
            case_id, session.key_name, form.get("text", ""), principal=session.key_name))
    except Conflict as conflict:
        return await _case_page(request, services, case_id, status_code=409,
                                notice={"code": conflict.code, "message": conflict.message})
    return RedirectResponse(f"{console_base(request)}/handoffs/{case_id}", status_code=303,
                            headers=SECURITY_HEADERS)

"""`POST /v1/messages`: route one customer message, act on it, reply.

`customer` in the body is the customer the caller (a `gateway`-role key: a signed-in
chat, a mail system) authenticated, and is trusted as such; an e-mail in `text` is only
a claim, and the desk verifies it with a one-time code before any change
(`handlers.identity`). Give the `gateway` role only to channels that authenticate their
customers.

A plain `def` on purpose: the handlers do several blocking database transactions (and,
with a chat model configured, a remote call), which belong on a worker thread, not the
event loop. The reply is serialised once from the validated `MessageOut` instead of
letting FastAPI validate the returned object against `response_model` a second time
(that re-validation was about 7% of the endpoint's CPU in a profile under load); the
declared `response_model` still documents the body in OpenAPI.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from router.app.conversation import IncomingMessage
from router.gateway.deps import ServicesDep, require_role
from router.gateway.desk_schemas import MessageIn, MessageOut
from router.gateway.middleware.access import ACCESS_RESPONSES

router = APIRouter(tags=["messages"], dependencies=[Depends(require_role("gateway"))],
                   responses=ACCESS_RESPONSES)


@router.post("/v1/messages", response_model=MessageOut)
def post_message(body: MessageIn, services: ServicesDep, request: Request) -> Response:
    """Route one customer message, act on it, and reply; later messages continue the case."""
    message = IncomingMessage(text=body.text, case_id=body.case_id, customer=body.customer,
                              kind=body.kind)
    outcome = services.conversation.reply(message, request_id=request.state.request_id)
    reply = MessageOut.model_validate(outcome, from_attributes=True)
    return Response(reply.model_dump_json(), media_type="application/json")

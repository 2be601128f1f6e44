"""One customer message through the whole conversation: prepare, route, handle, record.

The one use case behind `POST /v1/messages`, the task runner and the CLI; nothing here
knows HTTP. The steps, and why they come in this order:

1. **prepare** (`SupportDesk.prepare`): the message is checked against our own records
   before anything is written (unknown case, unknown authenticated customer, an
   invalid amount → a 4xx and no write) and the case facts the code rules need are
   read once; handling reuses them instead of reading the case again.
2. **route** (`RouterService.decide`): code rules, then the decision model under its
   policy. Not logged yet.
3. **handle** (`SupportDesk.handle_message`): the deterministic handlers or the fallback
   act; the turn is written to the case in one transaction (a refund in the refund
   service's own transaction).
4. **record** (`RouterService.record`): the decision-log row is written once, with the
   handler's outcome in it, and in the same transaction as the case's turn: handling
   hands the turn to this step instead of writing it (`record_turn`), so the turn and
   its decision commit together or not at all, through the log's group commit (one
   transaction for the messages of concurrent requests). A handler that fails before
   its turn is recorded still leaves its decision logged (without an outcome).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import cast

from handlers.desk import MessageOutcome, SupportDesk
from handlers.services.cases import Turn
from router.contracts import DecisionRoute
from router.routing.rules import RouteRequest
from router.routing.service import RouterService, new_request_id


@dataclass(frozen=True)
class IncomingMessage:
    """A customer message as every channel hands it over (validated at the boundary)."""

    text: str
    case_id: str | None = None
    customer: str | None = None
    """The customer the calling system authenticated, if any."""
    kind: DecisionRoute | None = None
    """A form field that names the kind of request (a code rule may route on it)."""


class Conversation:
    """Takes one message at a time through prepare, route, handle and record."""

    def __init__(self, router: RouterService, desk: SupportDesk) -> None:
        self._router = router
        self._desk = desk

    def reply(self, message: IncomingMessage, *, request_id: str | None = None
              ) -> MessageOutcome:
        """Route one message, act on it and answer; later messages continue the case."""
        facts = self._desk.prepare(message.text, case_id=message.case_id,
                                   customer=message.customer)
        request = RouteRequest(
            text=message.text, case_id=facts.case_id, customer=message.customer,
            # The desk names a case's route only for an open refund or account flow.
            kind=message.kind, case_route=cast("DecisionRoute | None", facts.case_route),
            case_has_held_refund=facts.case_has_held_refund,
            earlier_texts=facts.clarified_texts,
        )
        decision = self._router.decide(request, request_id=request_id or new_request_id())
        recorded = False

        def record_turn(case_id: str, turn: Turn) -> None:
            nonlocal recorded
            self._router.record(request, decision, outcome=turn.status,
                                together_with=partial(self._desk.cases.write_turn,
                                                      case_id=case_id, turn=turn))
            recorded = True

        try:
            return self._desk.handle_message(message.text, facts.case_id, message.customer,
                                             decision, facts=facts, record_turn=record_turn)
        except BaseException:
            if not recorded:
                self._router.record(request, decision)
            raise

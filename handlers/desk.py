"""The support desk: what happens to a routed message, and to a supervisor's decision.

`SupportDesk` is the handlers' one entry point for the gateway and the CLI:

- `prepare(text, case_id=, customer=)` checks a message before anything is written
  (unknown case → `unknown_case` 404, unknown authenticated customer →
  `unknown_customer` 422, an authenticated customer other than the case's →
  `customer_mismatch` 409, a negative, zero or absurd amount in the customer's own words
  → `invalid_amount` 422; one in a quoted earlier message is not theirs)
  and returns the case facts the router's code rules need (`case_route`,
  `case_has_held_refund`). A new case gets its id here, so the decision log has it.
- `handle_message(text, case_id, customer, decision)` acts on the router's decision:
  `refund`/`account` → the deterministic handlers; `clarify` → one question, no change;
  `other` → the fallback (`handlers.fallback.responder`: FAQ answer, the customer's own
  order status, or hand-off to the human queue → `resolved` / `handed_off`). The turn is
  written to the case in one transaction; the reply is a template filled from the
  observations. Identity (`handlers.identity`): a message whose text names another
  account than the case's is refused and leaves the case as it was; a message that is
  only a one-time code answers the case's pending challenge, and when it is right the
  flow that asked for it continues with the request it was asked for.
- `list_approvals(status)`, `review_approval(operation)` (the held refund with its case,
  order, customer and the order's earlier refunds), `decide_approval(operation, decision,
  supervisor, principal=, note=)`: the supervisor's side of held refunds; the customer's
  reply is added to the case, the supervisor's note kept in the case's history. A held
  refund the refund service closed as no longer refundable (by a decision, or because
  another refund took the order's remainder) is told once on its own case.
- `list_handoffs(limit=, cursor=, older_than_s=, newer_than_s=, lang=)`,
  `reply_handoff(case_id, agent, text, principal=)`: the human queue
  (`handlers.fallback.handoffs`).
- `get_case(case_id)`: the case with its messages, decisions and actions.

Who acted: `principal` is the authenticated caller (the gateway passes its API key's
name, or `anonymous@loopback` without keys) and is what the audit trail records as the
decider or replier; the name in a request body (`supervisor`, `agent`) is kept beside it
as a display name only. Callers with the database's own access (the CLI, the task
runner) are `OPERATOR_PRINCIPAL`.

Durable: everything a later message or decision needs is read from the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from handlers.account import AccountHandler
from handlers.extract import InvalidAmount, customer_words, parse_amounts
from handlers.fallback.handoffs import (
    DEFAULT_PAGE_SIZE,
    HandoffOutcome,
    HandoffPage,
    check_display_name,
    check_note,
    list_handoffs,
    reply_to_handoff,
)
from handlers.fallback.responder import Fallback, build_responder
from handlers.flow import FlowInput, HandlerResult
from handlers.identity import AWAITING_CODE, IdentityGate, claims_other_account, require_customer
from handlers.observation import Observation, success
from handlers.refund import CLOSE_ACTION, RefundHandler
from handlers.replies import compose, format_money
from handlers.services.cases import Action, CaseBook, CaseRow, CaseStatus, Turn, new_case_id
from handlers.services.notifier import Notifier, OutboxNotifier
from handlers.services.refunds import (
    RefundService,
    receipt_observation,
    retry_lost_responses,
)
from handlers.services.store import SqlStore, load_fixture, seed_store
from handlers.services.verification import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TTL_S,
    VerificationService,
    find_code,
)
from router.contracts import Decision
from router.errors import Conflict, InvalidInput, NotFound, StoreError

APPROVAL_FILTERS = ("held", "approved", "rejected", "closed", "all")
_MAY_CLOSE_HELD = frozenset({"refund_issued", "refund_approved", "no_longer_refundable"})
"""Outcomes after which other held refunds on the order may have been closed."""
MAX_FLOW_TEXTS = 5
"""How many of the customer's messages an open flow keeps for the next one to build on."""
RecordTurn = Callable[[str, Turn], None]
"""Writes a message's turn on a case (`CaseBook.record`, or the caller's own commit)."""
OPERATOR_PRINCIPAL = "operator@local"
"""Who acts when the caller has the database's own access (CLI, task runner): no key."""


@dataclass(frozen=True)
class CaseFacts:
    """What our own records say about a case before the router decides."""

    case_id: str
    is_new: bool
    case_route: str | None = None
    case_has_held_refund: bool = False
    clarified_texts: tuple[str, ...] = ()
    """The customer's earlier messages when the router asked them to say more."""
    case: CaseRow | None = None
    """The case as `prepare` read it, so handling the message does not read it again."""
    customer_account_id: str | None = None
    """The account of the authenticated `customer`, when the calling system gave one."""


@dataclass(frozen=True)
class MessageOutcome:
    case_id: str
    decision: Decision
    route: str
    status: CaseStatus
    reply: str
    actions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ApprovalOutcome:
    operation: str
    case_id: str
    decision: str
    operation_status: str
    refund_id: int | None
    replayed: bool
    case_status: str
    reply: str
    observation: dict[str, Any]
    decided_by: str | None
    """The principal recorded as the decider (the first one, for a replayed decision)."""
    supervisor: str
    """The display name this request gave."""


class SupportDesk:
    def __init__(self, store: SqlStore, refunds: RefundService, cases: CaseBook, *,
                 today: date, fallback: Fallback | None = None,
                 verifications: VerificationService | None = None) -> None:
        self.store = store
        self.refunds = refunds
        self.cases = cases
        self.verifications = verifications
        gate = IdentityGate(store, verifications)
        self._refund = RefundHandler(store, refunds, today=today, identity=gate)
        self._account = AccountHandler(store, identity=gate)
        self._fallback = fallback or build_responder(store)

    def close(self) -> None:
        """Release what the fallback holds open: the agent's checkpointer connections."""
        checkpointer = getattr(self._fallback, "checkpointer", None)
        if checkpointer is not None:
            from handlers.fallback.agent import close_checkpointer

            close_checkpointer(checkpointer)

    # -- messages ---------------------------------------------------------------------

    def prepare(self, text: str, *, case_id: str | None = None,
                customer: str | None = None) -> CaseFacts:
        """Validate a message and return its case facts; writes nothing."""
        case = None
        if case_id is not None:
            case = self.cases.get(case_id)
            if case is None:
                raise NotFound(f"no case {case_id!r}", code="unknown_case")
        account_id = None
        if customer is not None:
            account_id = require_customer(self.store, customer).id
            if case is not None and case.customer_id not in (None, account_id):
                raise Conflict(f"case {case.id!r} belongs to another customer than the "
                               "authenticated one; open a new case", code="customer_mismatch")
        try:
            parse_amounts(customer_words(text))
        except InvalidAmount as exc:
            raise InvalidInput(f"the message states an invalid amount: {exc}",
                               code="invalid_amount") from exc
        if case is None:
            return CaseFacts(case_id=case_id or new_case_id(), is_new=True,
                             customer_account_id=account_id)
        held = any(r.status == "held" for r in self.refunds.for_case(case.id))
        awaiting = case.status == "awaiting_customer"
        in_flow = awaiting and case.flow in ("refund", "account")
        clarified = awaiting and case.flow is None
        return CaseFacts(case_id=case.id, is_new=False,
                         case_route=case.flow if in_flow else None,
                         case_has_held_refund=held,
                         clarified_texts=tuple(case.context.get("texts", ())) if clarified else (),
                         case=case, customer_account_id=account_id)

    def handle_message(self, text: str, case_id: str | None, customer: str | None,
                       decision: Decision, *, facts: CaseFacts | None = None,
                       record_turn: RecordTurn | None = None) -> MessageOutcome:
        """Act on the router's decision; `facts` from `prepare` (checked again if absent).

        The message's turn is written once, by `record_turn` (default: the case book, in
        a transaction of its own), so a caller can commit it together with its own rows.
        """
        if facts is None:
            facts = self.prepare(text, case_id=case_id, customer=customer)
        record = record_turn or self.cases.record
        case = facts.case
        open_flow = case is not None and case.status == "awaiting_customer"
        context = dict(case.context) if (case is not None and open_flow) else {}
        earlier = list(context.pop("texts", []))
        flow = FlowInput(case_id=facts.case_id, text=text, earlier_texts=earlier,
                         customer=customer, case_customer_id=case.customer_id if case else None,
                         case_customer_verified=case.customer_verified if case else False,
                         context=context, has_held_refund=facts.case_has_held_refund)
        refused = claims_other_account(self.store, flow)
        if refused is not None and case is not None:
            return self._refuse(case, text, decision, refused, record)

        route, result, code_answer = self._handle(decision.route, flow, case)
        status = result.status
        # A refund held earlier keeps the case waiting for the supervisor; one held by
        # this message already says so in `result.status`.
        if (status == "resolved" and facts.case_has_held_refund
                and self._has_held(facts.case_id)):
            status = "awaiting_approval"
        keep = result.awaiting or decision.route == "clarify"
        # A code is an answer, not a request: the flow keeps the requests it answers.
        texts = (earlier if code_answer else [*earlier, text])[-MAX_FLOW_TEXTS:]
        next_context = {**result.context, "texts": texts} if keep else {}
        reply = compose(a.observation for a in result.actions)
        bound = case.customer_id if case else None
        record(facts.case_id, Turn(
            request_id=decision.request_id, customer_text=text,
            decision=decision.model_dump(mode="json"), actions=result.actions, reply=reply,
            status=status, flow=route if result.awaiting else None,
            customer_id=bound or facts.customer_account_id or result.account_id,
            customer_verified_by="channel" if facts.customer_account_id else None,
            context=next_context, opens_case=facts.is_new,
        ))
        self._tell_closed(a.observation.artifacts.get("order_id") for a in result.actions
                          if a.observation.code in _MAY_CLOSE_HELD)
        return MessageOutcome(case_id=facts.case_id, decision=decision, route=decision.route,
                              status=status, reply=reply,
                              actions=[a.as_dict() for a in result.actions])

    def _handle(self, route: str, flow: FlowInput,
                case: CaseRow | None) -> tuple[str, HandlerResult, bool]:
        """The route acted on, its result, and whether the message was a one-time code
        answering the case's challenge (only a message that is a code and little else,
        on a case whose customer is not proven yet, is one)."""
        code = find_code(flow.text)
        if (code is None or self.verifications is None or case is None
                or case.customer_id is None or case.customer_verified or flow.customer):
            return route, self._dispatch(route, flow), False
        checked = self.verifications.check(case_id=case.id, account_id=case.customer_id,
                                           code=code)
        if checked is None:  # no challenge is waiting for a code here
            return route, self._dispatch(route, flow), False
        if case.status == "awaiting_customer" and case.flow in ("refund", "account"):
            route = case.flow
        answered = [Action("identity.verify", checked)]
        if checked.ok:
            # Proven: the flow that asked for the code goes on with the request it asked
            # about, as if that request had come from a verified customer.
            earlier = list(flow.earlier_texts)
            request = replace(flow, case_customer_verified=True)
            if earlier:
                request = replace(request, text=earlier[-1], earlier_texts=earlier[:-1])
            result = self._dispatch(route, request)
            return route, replace(result, actions=[*answered, *result.actions]), True
        if checked.code == "verification_code_expired":
            account = self.store.account(case.customer_id)
            again = self.verifications.challenge(case_id=case.id, account=account) \
                if account is not None else None
            if again is not None:
                answered.append(Action("identity.verify", again))
        last: Observation = answered[-1].observation
        waits = last.code in AWAITING_CODE or last.code == "verification_code_wrong"
        return route, HandlerResult("awaiting_customer" if waits else "resolved", answered,
                                    case.customer_id, awaiting=waits,
                                    context=dict(flow.context)), True

    def _refuse(self, case: CaseRow, text: str, decision: Decision,
                refused: Observation, record: RecordTurn) -> MessageOutcome:
        """Answer a message that claims another customer than the case's: the message and
        the refusal go into the history; the case's status, flow and context stay."""
        actions = [Action("identity.lookup", refused)]
        reply = compose([refused])
        status: CaseStatus = case.status  # type: ignore[assignment]
        record(case.id, Turn(
            request_id=decision.request_id, customer_text=text,
            decision=decision.model_dump(mode="json"), actions=actions, reply=reply,
            status=status, flow=case.flow, customer_id=case.customer_id,
            context=case.context,
        ))
        return MessageOutcome(case_id=case.id, decision=decision, route=decision.route,
                              status=status, reply=reply, actions=[a.as_dict() for a in actions])

    def _dispatch(self, route: str, flow: FlowInput) -> HandlerResult:
        if route == "refund":
            return self._refund.handle(flow)
        if route == "account":
            return self._account.handle(flow)
        if route == "other":
            return self._fallback.handle(flow)
        obs = success("clarify", "asked the customer to say more; nothing changed",
                      next_actions=["ask_customer"])
        return HandlerResult("awaiting_customer", [Action("desk.clarify", obs)])

    def _has_held(self, case_id: str) -> bool:
        return any(r.status == "held" for r in self.refunds.for_case(case_id))

    def _tell_closed(self, order_ids: Iterable[Any]) -> None:
        """Tell each held refund's customer, once, that it was closed as no longer
        refundable; read from the database, so a lost response or a restart in between
        is told by the next write on the order."""
        for receipt in self.refunds.closed_on(o for o in order_ids if isinstance(o, str)):
            obs = receipt_observation(replace(receipt, replayed=False))
            case = self.cases.get(receipt.case_id)
            status: CaseStatus = ("awaiting_approval" if self._has_held(receipt.case_id)
                                  else "resolved")
            self.cases.record_once(receipt.case_id, Turn(
                request_id=None, customer_text=None, decision=None,
                actions=[Action(CLOSE_ACTION, obs)], reply=compose([obs]), status=status,
                flow=None, customer_id=case.customer_id if case else receipt.account_id,
            ), action=CLOSE_ACTION, key="operation", value=receipt.operation)

    # -- cases ------------------------------------------------------------------------

    def get_case(self, case_id: str) -> dict[str, Any]:
        view = self.cases.view(case_id)
        if view is None:
            raise NotFound(f"no case {case_id!r}", code="unknown_case")
        view["refunds"] = [r.as_artifacts() for r in self.refunds.for_case(case_id)]
        return view

    # -- the human queue --------------------------------------------------------------

    def list_handoffs(self, *, limit: int = DEFAULT_PAGE_SIZE, cursor: str | None = None,
                      older_than_s: float | None = None, newer_than_s: float | None = None,
                      lang: str | None = None) -> HandoffPage:
        return list_handoffs(self.cases, limit=limit, cursor=cursor, older_than_s=older_than_s,
                             newer_than_s=newer_than_s, lang=lang)

    def reply_handoff(self, case_id: str, agent: str, text: str, *,
                      principal: str = OPERATOR_PRINCIPAL) -> HandoffOutcome:
        return reply_to_handoff(self.cases, case_id, agent=agent, text=text,
                                principal=principal)

    # -- approvals --------------------------------------------------------------------

    def list_approvals(self, status: str = "held") -> list[dict[str, Any]]:
        if status not in APPROVAL_FILTERS:
            raise InvalidInput(f"status must be one of {APPROVAL_FILTERS}, not {status!r}",
                               code="invalid_status")
        return [r.as_artifacts() | {"amount": format_money(r.amount_cents)}
                for r in self.refunds.approvals(status)]  # type: ignore[arg-type]

    def review_approval(self, operation: str) -> dict[str, Any]:
        """What a supervisor reads before deciding: the operation, its case (messages,
        decisions, actions), the order, its customer and what the order was refunded
        before; `unknown_operation` (404) if there is no such held-refund operation."""
        receipt = self.refunds.get(operation)
        if receipt is None or not receipt.requires_approval:
            raise NotFound(f"no refund operation {operation!r} needing approval",
                           code="unknown_operation")
        order = self.store.order(receipt.order_id)
        account = self.store.account(receipt.account_id)
        return {
            "approval": receipt.as_artifacts() | {"amount": format_money(receipt.amount_cents)},
            "case": self.get_case(receipt.case_id),
            "order": None if order is None else asdict(order) | {
                "total": format_money(order.total_cents)},
            "account": None if account is None else asdict(account),
            "earlier_refunds": [asdict(r) | {"amount": format_money(r.amount_cents)}
                                for r in self.store.refunds_of(receipt.order_id)],
        }

    def decide_approval(self, operation: str, decision: str, supervisor: str, *,
                        principal: str = OPERATOR_PRINCIPAL, note: str = "") -> ApprovalOutcome:
        """Apply a supervisor's decision exactly once and tell the customer on the case.

        `principal` is recorded as the decider; `supervisor` is the display name, kept in
        the case's history next to it with the `note` (for colleagues, not the customer).
        """
        display = check_display_name(supervisor, code="invalid_supervisor")
        note = check_note(note)
        obs = retry_lost_responses(
            lambda: self.refunds.decide(operation, decision, supervisor=principal))
        if obs.code == "refund_service_unreachable":
            raise StoreError(obs.summary, code=obs.code)
        if obs.status == "error":
            raise Conflict(obs.summary, code=obs.code)
        receipt = obs.artifacts
        case_id = receipt["case_id"]
        reply = compose([obs])
        status: CaseStatus = "awaiting_approval" if self._has_held(case_id) else "resolved"
        case = self.cases.get(case_id)
        told = obs.model_copy(update={"artifacts": {
            **receipt, "display_name": display, **({"note": note} if note else {})}})
        # Tell the customer once, however many decisions (replays) race to do it.
        action = CLOSE_ACTION if receipt["status"] == "closed" else "refunds.decide"
        self.cases.record_once(case_id, Turn(
            request_id=None, customer_text=None, decision=None,
            actions=[Action(action, told)], reply=reply, status=status,
            flow=None, customer_id=case.customer_id if case else receipt["account_id"],
        ), action=action, key="operation", value=operation)
        self._tell_closed([receipt["order_id"]])
        return ApprovalOutcome(
            operation=operation, case_id=case_id, decision=decision,
            operation_status=receipt["status"], refund_id=receipt["refund_id"],
            replayed=bool(receipt["replayed"]), case_status=status, reply=reply,
            observation=obs.model_dump(), decided_by=receipt.get("decided_by"),
            supervisor=display,
        )


def build_desk(engine: Engine, *, fixture_path: Path, today: date,
               now: Callable[[], datetime] = lambda: datetime.now(UTC),
               fallback_model: str | None = None, fallback_max_tokens: int = 512,
               checkpoint_path: Path | None = None, notifier: Notifier | None = None,
               verification_ttl_s: float = DEFAULT_TTL_S,
               verification_max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> SupportDesk:
    """Seed the store from the fixture when empty (the schema is migrated), build the services.

    With `fallback_model` (`provider:model`) the `other` route goes to the LangChain
    agent, checkpointed in the same PostgreSQL database when `engine` is PostgreSQL,
    otherwise in the SQLite file `checkpoint_path`; without it, to the embedded responder.
    One-time codes go through `notifier` (default: the database's `outbox` table).
    """
    seed_store(engine, load_fixture(fixture_path), today=today)
    store = SqlStore(engine)
    fallback: Fallback | None = None
    if fallback_model:
        from handlers.fallback.agent import build_agent_fallback

        fallback = build_agent_fallback(
            fallback_model, store, max_tokens=fallback_max_tokens, engine=engine,
            checkpoint_path=checkpoint_path or Path("var") / "agent-checkpoints.sqlite")
    refunds = RefundService(engine, store, today=today, now=now)
    cases = CaseBook(engine, now=now)
    verifications = VerificationService(
        engine, notifier or OutboxNotifier(engine, now=now), ttl_s=verification_ttl_s,
        max_attempts=verification_max_attempts, now=now)
    return SupportDesk(store, refunds, cases, today=today, fallback=fallback,
                       verifications=verifications)

"""The refund service: the one place refunds are written, below every handler.

Rules that hold whatever calls it:

- Each refund request has an operation key made of case, order and amount. The key is
  UNIQUE in `refund_operations`; a repeated request with the same key returns the first
  receipt marked `replayed: true` instead of writing again, and a held, rejected or
  closed key stays so.
- The limits count what actually leaves, not one request: a refund is held for a
  supervisor when the order's refunds issued without approval plus this one would pass
  `HOLD_ABOVE_CENTS` ($200), or when the customer's refunds issued without approval on
  the shop's day (all their orders) plus this one would pass `DAILY_CAP_CENTS` ($200).
  Splitting a refund over requests, cases or orders therefore does not avoid the
  supervisor. "Without approval" is counted conservatively: every refund row of the
  order (or of the customer's orders that day) except those a supervisor approved, so a
  refund written outside this service counts too.
- Approved → issued exactly once; rejected → never issued. A second decision replays
  the first when it agrees and is refused (`already_decided`) when it does not.
- A held refund that can no longer be issued as asked (the order was refunded
  meanwhile, so its amount exceeds what is left) is *closed* with code
  `no_longer_refundable`: when a supervisor decides it, when another refund on the same
  order takes the remainder below it, or when it is re-checked (`recheck`). It is never
  issued later; the desk tells the customer on the held refund's case.
- A refund never takes an order past its total: the remainder is re-checked, under a
  lock on the order row, in the transaction that issues it.
- Hold, issue, close, replay and decide each happen in one database transaction, which
  locks the order row and then its customer's account row (PostgreSQL `SELECT … FOR
  UPDATE`; SQLite takes its one write lock at `BEGIN IMMEDIATE`), so concurrent requests
  on one order — or on two orders of one customer — check the limits one at a time and
  each sees what its predecessors committed. Locks are always taken in that order
  (order, account, operation rows), so two transactions never wait on each other in a
  cycle. The loser of a race for one key sees the winner's row and replays it.

Faults (for the task suite and tests): `FaultPlan.arm("lost_response")` makes the next
call that issues a refund commit and then raise `ResponseLost` once, as a dropped
connection would. `retry_lost_responses` is how callers retry through it: the retry has
the same key, so it replays the committed receipt.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime
from typing import Any, Literal

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError

from handlers.observation import Observation, fail, success, warning
from handlers.services.store import Order, SqlStore, accounts, orders, refunds
from router.errors import InvalidInput, NotFound
from router.storage.db import read_connection
from router.telemetry.metrics import count_refund

logger = logging.getLogger(__name__)

HOLD_ABOVE_CENTS = 20_000
"""Per order: refunds issued without a supervisor's approval may total this much."""
DAILY_CAP_CENTS = 20_000
"""Per customer and shop day: refunds issued without approval on all their orders together."""
SYSTEM = "system"
"""`decided_by` of a held refund the service closed itself (found unissuable)."""
OperationStatus = Literal["held", "issued", "rejected", "closed"]
ApprovalFilter = Literal["held", "approved", "rejected", "closed", "all"]
SupervisorDecision = Literal["approve", "reject"]
HoldReason = Literal["order_limit", "daily_limit"]
FAULTS = frozenset({"lost_response"})

metadata = MetaData()

refund_operations = Table(
    "refund_operations",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("key", String(200), nullable=False, unique=True),
    Column("case_id", String(64), nullable=False, index=True),
    Column("order_id", String(16), nullable=False),
    Column("account_id", String(16), nullable=False),
    Column("amount_cents", Integer, nullable=False),
    Column("reason", String(500), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("requires_approval", Boolean, nullable=False),
    Column("refund_id", Integer),
    Column("decision", String(16)),
    Column("decided_by", String(64)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("decided_at", DateTime(timezone=True)),
)


class ResponseLost(ConnectionError):
    """The service committed, but its answer never reached the caller."""


@dataclass(frozen=True)
class Receipt:
    """What the refund service did for one operation key."""

    operation: str
    key: str
    case_id: str
    order_id: str
    account_id: str
    amount_cents: int
    status: OperationStatus
    requires_approval: bool
    refund_id: int | None = None
    decision: str | None = None
    decided_by: str | None = None
    replayed: bool = False

    def as_artifacts(self) -> dict:
        return asdict(self)


class FaultPlan:
    """Faults to inject into the next calls; thread-safe, in memory, for tests only."""

    def __init__(self) -> None:
        self._armed: dict[str, int] = {}
        self._lock = threading.Lock()

    def arm(self, fault: str, *, times: int = 1) -> None:
        if fault not in FAULTS:
            raise InvalidInput(f"unknown fault {fault!r}; known: {sorted(FAULTS)}",
                               code="unknown_fault")
        with self._lock:
            self._armed[fault] = self._armed.get(fault, 0) + times

    def take(self, fault: str) -> bool:
        with self._lock:
            if self._armed.get(fault, 0) > 0:
                self._armed[fault] -= 1
                return True
            return False


def _observe(receipt: Receipt) -> None:
    """Count and log a refund operation once it is committed (held, issued, rejected, closed).

    The log line names the order; the JSON log formatter masks order ids unless the
    retention setting allows customer data.
    """
    count_refund(receipt.status)
    logger.info("refund operation %s %s: order %s, %d cents", receipt.operation,
                receipt.status, receipt.order_id, receipt.amount_cents)


def operation_key(case_id: str, order_id: str, amount_cents: int) -> str:
    return f"{case_id}:{order_id.upper()}:{amount_cents}"


def hold_reason(amount_cents: int, *, order_unapproved_cents: int,
                day_unapproved_cents: int) -> HoldReason | None:
    """Why a refund needs a supervisor, or None: the limits count what has already left.

    `order_unapproved_cents`: the order's refunds issued without approval;
    `day_unapproved_cents`: the customer's refunds issued without approval today.
    """
    if order_unapproved_cents + amount_cents > HOLD_ABOVE_CENTS:
        return "order_limit"
    if day_unapproved_cents + amount_cents > DAILY_CAP_CENTS:
        return "daily_limit"
    return None


def _receipt(row: object, *, replayed: bool = False) -> Receipt:
    m = row._mapping  # type: ignore[attr-defined]
    return Receipt(operation=m["id"], key=m["key"], case_id=m["case_id"],
                   order_id=m["order_id"], account_id=m["account_id"],
                   amount_cents=m["amount_cents"], status=m["status"],
                   requires_approval=bool(m["requires_approval"]), refund_id=m["refund_id"],
                   decision=m["decision"], decided_by=m["decided_by"], replayed=replayed)


def receipt_observation(receipt: Receipt, **extra: Any) -> Observation:
    """The observation for a receipt, whether fresh or replayed."""
    facts = receipt.as_artifacts() | extra
    again = " (replayed: this request was already handled)" if receipt.replayed else ""
    if receipt.status == "issued" and receipt.decision == "approve":
        return success("refund_approved", f"refund {receipt.refund_id} issued after approval"
                       f" by {receipt.decided_by}{again}", **facts)
    if receipt.status == "issued":
        return success("refund_issued", f"refund {receipt.refund_id} issued{again}", **facts)
    if receipt.status == "held":
        return warning("refund_held", f"refund held for a supervisor; nothing issued{again}",
                       hint="a supervisor approves or rejects it",
                       next_actions=["await_supervisor"], **facts)
    if receipt.status == "closed":
        return warning("no_longer_refundable",
                       f"held refund closed: the order no longer has {receipt.amount_cents} "
                       f"cents left to refund; nothing issued{again}",
                       hint="the customer may ask again for what is left", **facts)
    return warning("refund_rejected", f"a supervisor rejected the refund; nothing issued{again}",
                   **facts)


class RefundService:
    def __init__(self, engine: Engine, store: SqlStore, *, today: date,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 faults: FaultPlan | None = None) -> None:
        self._engine = engine
        self._store = store
        self._today = today
        self._now = now
        self.faults = faults or FaultPlan()

    # -- reads ------------------------------------------------------------------------

    def get(self, operation: str) -> Receipt | None:
        with read_connection(self._engine) as conn:
            row = conn.execute(
                select(refund_operations).where(refund_operations.c.id == operation)
            ).first()
        return _receipt(row) if row else None

    def for_case(self, case_id: str) -> list[Receipt]:
        query = (select(refund_operations).where(refund_operations.c.case_id == case_id)
                 .order_by(refund_operations.c.created_at, refund_operations.c.id))
        with read_connection(self._engine) as conn:
            return [_receipt(r) for r in conn.execute(query)]

    def closed_on(self, order_ids: Iterable[str]) -> list[Receipt]:
        """The closed (no longer refundable) operations on these orders, oldest first."""
        ids = sorted({o.upper() for o in order_ids})
        if not ids:
            return []
        ops = refund_operations.c
        query = (select(refund_operations)
                 .where(ops.order_id.in_(ids), ops.status == "closed")
                 .order_by(ops.created_at, ops.id))
        with read_connection(self._engine) as conn:
            return [_receipt(r) for r in conn.execute(query)]

    def approvals(self, status: ApprovalFilter = "held") -> list[Receipt]:
        ops = refund_operations.c
        query = select(refund_operations).where(ops.requires_approval.is_(True))
        if status == "approved":
            query = query.where(ops.decision == "approve", ops.status == "issued")
        elif status != "all":
            query = query.where(ops.status == status)
        with read_connection(self._engine) as conn:
            return [_receipt(r) for r in conn.execute(query.order_by(ops.created_at, ops.id))]

    # -- writes -----------------------------------------------------------------------

    def request(self, *, case_id: str, order_id: str, account_id: str, amount_cents: int,
                reason: str) -> Observation:
        """Issue (or hold) one refund; a repeated key replays the first receipt."""
        if amount_cents <= 0:
            raise InvalidInput(f"refund amount must be positive, got {amount_cents} cents",
                               code="invalid_amount")
        key = operation_key(case_id, order_id, amount_cents)
        extra: dict[str, Any] = {}
        closed: list[Receipt] = []
        try:
            with self._engine.begin() as conn:
                # Lock the order (and its customer) first: requests for one order or one
                # customer run one at a time, and a request that waited sees the key and
                # the refunds its predecessors committed.
                order = self._lock_order(conn, order_id)
                receipt = self._by_key(conn, key)
                if receipt is None:
                    if order is None:
                        return fail("order_not_found", f"no order {order_id}", retry=False,
                                    stop=True, order_id=order_id)
                    refused = self._check_remaining(conn, order, amount_cents)
                    if refused is not None:
                        return refused
                    reason_held = self._hold_reason(conn, order, amount_cents)
                    receipt = self._insert(conn, key=key, case_id=case_id, order_id=order.id,
                                           account_id=account_id, amount_cents=amount_cents,
                                           reason=reason, held=reason_held is not None)
                    if reason_held is not None:
                        extra = {"hold_reason": reason_held, "limit_cents": HOLD_ABOVE_CENTS
                                 if reason_held == "order_limit" else DAILY_CAP_CENTS}
                    else:
                        closed = self._close_unissuable(conn, order, decided_by=SYSTEM)
        except IntegrityError:
            # Lost a race for the same key: the winner's row is committed; replay it.
            with read_connection(self._engine) as conn:
                receipt = self._by_key(conn, key)
            if receipt is None:
                raise
        if not receipt.replayed:  # committed just now (a replay was counted the first time)
            _observe(receipt)
        for other in closed:
            _observe(other)
        return self._answer(receipt, **extra)

    def _insert(self, conn: Connection, *, key: str, case_id: str, order_id: str,
                account_id: str, amount_cents: int, reason: str, held: bool) -> Receipt:
        op_id = f"op-{uuid.uuid4().hex[:16]}"
        conn.execute(insert(refund_operations).values(
            id=op_id, key=key, case_id=case_id, order_id=order_id, account_id=account_id,
            amount_cents=amount_cents, reason=reason[:500],
            status="held" if held else "issued", requires_approval=held,
            created_at=self._now(),
        ))
        if not held:
            refund = self._store.add_refund(order_id, amount_cents, reason,
                                            today=self._today, conn=conn)
            conn.execute(update(refund_operations).where(refund_operations.c.id == op_id)
                         .values(refund_id=refund.id))
        receipt = self._by_key(conn, key)
        assert receipt is not None
        return replace(receipt, replayed=False)

    def _answer(self, receipt: Receipt, **extra: Any) -> Observation:
        """The observation for a committed receipt — unless the fault plan loses it."""
        if receipt.status == "issued" and self.faults.take("lost_response"):
            raise ResponseLost(f"connection lost after committing {receipt.operation}")
        return receipt_observation(receipt, **extra)

    def decide(self, operation: str, decision: str, *, supervisor: str) -> Observation:
        """Apply a supervisor's decision to a held refund, exactly once.

        Approving a refund the order can no longer pay (it was refunded meanwhile)
        closes it (`no_longer_refundable`) instead of leaving it held.
        """
        if decision not in ("approve", "reject"):
            raise InvalidInput(f"decision must be 'approve' or 'reject', not {decision!r}",
                               code="invalid_decision")
        if not supervisor.strip():
            raise InvalidInput("supervisor name is empty", code="invalid_supervisor")
        ops = refund_operations.c
        closed: list[Receipt] = []
        with self._engine.begin() as conn:
            found = conn.execute(select(ops.order_id).where(ops.id == operation)).first()
            if found is None:
                raise NotFound(f"no refund operation {operation!r}", code="unknown_operation")
            order = self._lock_order(conn, found.order_id)
            row = conn.execute(
                select(refund_operations).where(ops.id == operation).with_for_update()
            ).first()
            assert row is not None  # operations are never deleted
            current = _receipt(row)
            if not current.requires_approval:
                return fail("not_awaiting_approval",
                            f"{operation} was issued without approval; nothing to decide",
                            retry=False, stop=True, **current.as_artifacts())
            if current.status == "closed":  # nothing can be issued, whatever is decided
                return self._answer(replace(current, replayed=True))
            if current.decision is not None:
                if current.decision == decision:
                    return self._answer(replace(current, replayed=True))
                return fail("already_decided",
                            f"{operation} was already {current.decision}d by "
                            f"{current.decided_by}; a later {decision} changes nothing",
                            retry=False, stop=True, **current.as_artifacts())
            decided = {"decision": decision, "decided_by": supervisor.strip()[:64],
                       "decided_at": self._now()}
            if decision == "reject":
                conn.execute(update(refund_operations).where(ops.id == operation)
                             .values(status="rejected", **decided))
            elif order is None or self._remaining(conn, order) < current.amount_cents:
                conn.execute(update(refund_operations).where(ops.id == operation)
                             .values(status="closed", **decided))
            else:
                refund = self._store.add_refund(current.order_id, current.amount_cents,
                                                row._mapping["reason"], today=self._today,
                                                conn=conn)
                conn.execute(update(refund_operations).where(ops.id == operation)
                             .values(status="issued", refund_id=refund.id, **decided))
                closed = self._close_unissuable(conn, order, decided_by=SYSTEM)
            receipt = self._by_key(conn, current.key)
        assert receipt is not None
        _observe(receipt)  # committed: a repeated decision returned above as a replay
        for other in closed:
            _observe(other)
        return self._answer(replace(receipt, replayed=False))

    def recheck(self, operation: str) -> Receipt | None:
        """A refund operation as it stands now; a held one the order can no longer pay is
        closed first. `replayed` is False only when this call closed it."""
        ops = refund_operations.c
        closed: list[Receipt] = []
        with self._engine.begin() as conn:
            found = conn.execute(select(ops.order_id, ops.status)
                                 .where(ops.id == operation)).first()
            if found is None:
                return None
            if found.status == "held":
                order = self._lock_order(conn, found.order_id)
                if order is not None:
                    closed = self._close_unissuable(conn, order, decided_by=SYSTEM,
                                                    only=operation)
            row = conn.execute(select(refund_operations).where(ops.id == operation)).first()
        for receipt in closed:
            _observe(receipt)
        return _receipt(row, replayed=not closed)

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _by_key(conn: Connection, key: str) -> Receipt | None:
        row = conn.execute(
            select(refund_operations).where(refund_operations.c.key == key)
        ).first()
        return _receipt(row, replayed=True) if row else None

    def _lock_order(self, conn: Connection, order_id: str) -> Order | None:
        """Lock the order row, then its customer's account row (always in this order)."""
        order = self._store.order(order_id, conn=conn, lock=True)
        if order is not None:
            conn.execute(select(accounts.c.id).where(accounts.c.id == order.account_id)
                         .with_for_update())
        return order

    def _remaining(self, conn: Connection, order: Order) -> int:
        return order.total_cents - self._store.refunded_cents(order.id, conn=conn)

    def _check_remaining(self, conn: Connection, order: Order,
                         amount_cents: int) -> Observation | None:
        """Refuse an amount past what is left to refund (the order is locked)."""
        remaining = self._remaining(conn, order)
        if amount_cents > remaining:
            return fail("exceeds_refundable",
                        f"{amount_cents} cents asked, {remaining} cents left on {order.id}",
                        retry=False, stop=True, order_id=order.id,
                        amount_cents=amount_cents, remaining_cents=remaining)
        return None

    def _hold_reason(self, conn: Connection, order: Order, amount_cents: int) -> HoldReason | None:
        approved = (select(refund_operations.c.refund_id)
                    .where(refund_operations.c.decision == "approve",
                           refund_operations.c.refund_id.is_not(None)))
        unapproved = (select(func.coalesce(func.sum(refunds.c.amount_cents), 0))
                      .where(refunds.c.id.not_in(approved)))
        on_order = conn.execute(unapproved.where(refunds.c.order_id == order.id)).scalar_one()
        today = conn.execute(
            unapproved.join(orders, orders.c.id == refunds.c.order_id)
            .where(orders.c.account_id == order.account_id,
                   refunds.c.created_on == self._today)).scalar_one()
        return hold_reason(amount_cents, order_unapproved_cents=int(on_order),
                           day_unapproved_cents=int(today))

    def _close_unissuable(self, conn: Connection, order: Order, *, decided_by: str,
                          only: str | None = None) -> list[Receipt]:
        """Close the order's held refunds that exceed what is left (the order is locked)."""
        ops = refund_operations.c
        remaining = self._remaining(conn, order)
        query = select(refund_operations).where(
            ops.order_id == order.id, ops.status == "held", ops.amount_cents > remaining)
        if only is not None:
            query = query.where(ops.id == only)
        rows = conn.execute(query.order_by(ops.created_at, ops.id).with_for_update()).all()
        closed = []
        for row in rows:
            conn.execute(update(refund_operations).where(ops.id == row.id)
                         .values(status="closed", decided_by=decided_by,
                                 decided_at=self._now()))
            receipt = self._by_key(conn, row.key)
            assert receipt is not None
            closed.append(replace(receipt, replayed=False))
        return closed


def retry_lost_responses(call: Callable[[], Observation], *, attempts: int = 3) -> Observation:
    """Call a refund-service write, retrying when its answer is lost in transit.

    Safe because every write is keyed: the retry replays what the first call committed.
    """
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return call()
        except (ResponseLost, OperationalError) as exc:
            last = exc
    # The error's type only: its text names the database server, its SQL and its driver's
    # message, and this summary reaches API clients (a supervisor's 503) and the agent.
    return fail("refund_service_unreachable",
                f"no answer from the refund service after {attempts} attempts "
                f"({type(last).__name__})",
                retry=True, stop=True, retry_after_s=30.0,
                hint="try again later; a repeated request cannot refund twice")

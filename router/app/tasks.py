"""The task-suite runner: end-to-end checks of the handlers through the conversation.

A task file is JSONL, one task per line::

    {"id": "refund-full-damaged", "message": "Hi, this is ana.novak@…",
     "approval": "approve" | "reject" | null, "fault": "lost_response" | null,
     "expect": {"refunds": [{"order_id": "O-1001", "amount_cents": 4800}]},
     "status": "awaiting_approval"}

- `message` is one customer message. A task may carry `"messages": [...]` instead: they
  are sent in order on one case (the first opens it, the rest carry its `case_id`), to
  check the continuation of a case, e.g. an answer to a clarifying question.
- `customer` (optional) is sent as the request's authenticated customer.
- `sender` (optional, `verified` | `claimed`; the run's `sender` option otherwise, which
  defaults to `verified`): who vouches for the e-mail address in a message. The runner
  plays the channel the gateway sits behind. `verified` is a mail system that
  authenticated the From address: the first e-mail in a message that is on an account is
  sent as that message's authenticated `customer` (an address on no account is sent as
  none, so the text's claim meets the gateway as it is). `claimed` is an anonymous chat:
  no `customer` is sent, the e-mail is only claimed, and any write waits for the one-time
  code sent to the address on file. The gateway itself never does the former: only the
  caller's `customer` field is trusted.
- `{code}` / `{wrong_code}` in a message are replaced by the last one-time code sent on
  the task's case (read from the outbox) / a code that is certainly not it.
- `codes_sent` (optional): how many one-time codes the case must have been sent.
- `approval`: after the messages, a supervisor decides the case's held refund.
- `fault: lost_response`: the refund service's next refund-issuing call commits and then
  loses its answer once; the task also fails if the fault never fired while a refund
  was expected.
- `status` (optional): the case status after the last message, before any approval.
- `route` (optional): the route each message should get (one string, or a list with one
  entry per message). A failed task whose routes differ says "misrouted" in its reason.
  With `route_hints=True` (tests of the handlers alone) each message also carries its
  route as the request's form `kind`, so the code rules route it and the model is not
  asked; the suites' real runs leave it off and route with the embedded model.
- `expect` names the exact changes to the shop's business tables (accounts, addresses,
  orders, refunds, preferences): `refunds` = exactly these new rows (order id and
  amount); `addresses` = exactly these changed rows, compared accent-, case- and
  comma-insensitively; `preferences` = exactly these writes per account. A table not
  named must not change; `{}` means no writes at all. The refund service's operations
  and the router's own tables are not compared.

Each task runs on a fresh SQLite file seeded from the fixture, with the shared trained
model directory of the given settings, through the same use cases the gateway calls
(`Conversation.reply` for each message, `SupportDesk.decide_approval` for the supervisor).
"""

from __future__ import annotations

import json
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from handlers.extract import find_emails
from handlers.services.notifier import OutboxNotifier
from handlers.services.store import BUSINESS_TABLES, snapshot
from handlers.services.verification import code_in_notification
from router.app.bootstrap import build_services
from router.app.conversation import IncomingMessage
from router.app.services import Services
from router.contracts import DecisionRoute
from router.errors import InvalidInput, SupportRouterError
from router.settings import Settings

SUPERVISOR = "task-runner"
_EXPECT_KEYS = frozenset({"refunds", "addresses", "preferences"})
_STATUSES = frozenset({"resolved", "awaiting_customer", "awaiting_approval", "handed_off"})
_ROUTES = frozenset({"refund", "account", "other", "clarify"})
_ADDRESS_FIELDS = ("id", "line1", "city", "postal_code", "country")
SENDERS = ("verified", "claimed")


@dataclass(frozen=True)
class Task:
    id: str
    messages: list[str]
    approval: str | None = None
    fault: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    customer: str | None = None
    routes: list[str | None] = field(default_factory=list)
    sender: str | None = None
    codes_sent: int | None = None

    def expected_route(self, index: int) -> str | None:
        return self.routes[index] if index < len(self.routes) else None


@dataclass(frozen=True)
class TaskResult:
    id: str
    passed: bool
    reason: str
    route: str | None
    status: str | None
    reply: str | None
    routes: list[str]
    """The route of each message, in order (`clarify` where the router asked)."""
    wrote: bool
    """Whether any business table changed."""


@dataclass(frozen=True)
class SuiteReport:
    results: list[TaskResult]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failed": self.failed,
                "results": [asdict(r) for r in self.results]}


def parse_task(raw: Mapping[str, Any], *, where: str) -> Task:
    """One task from its JSON object; names the line and field when it is malformed."""
    messages = raw.get("messages") or ([raw["message"]] if raw.get("message") else [])
    if not raw.get("id") or not messages or not all(isinstance(m, str) for m in messages):
        raise InvalidInput(f"{where}: a task needs an id and a message (or messages)",
                           code="invalid_task")
    expect = raw.get("expect")
    if not isinstance(expect, dict) or set(expect) - _EXPECT_KEYS:
        raise InvalidInput(f"{where}: expect must be an object with keys among "
                           f"{sorted(_EXPECT_KEYS)}", code="invalid_task")
    if raw.get("approval") not in (None, "approve", "reject"):
        raise InvalidInput(f"{where}: approval must be approve, reject or null",
                           code="invalid_task")
    if raw.get("status") not in (None, *_STATUSES):
        raise InvalidInput(f"{where}: status must be one of {sorted(_STATUSES)}",
                           code="invalid_task")
    if raw.get("sender") not in (None, *SENDERS):
        raise InvalidInput(f"{where}: sender must be one of {list(SENDERS)}",
                           code="invalid_task")
    codes_sent = raw.get("codes_sent")
    if codes_sent is not None and (not isinstance(codes_sent, int) or codes_sent < 0):
        raise InvalidInput(f"{where}: codes_sent must be a whole number",
                           code="invalid_task")
    route = raw.get("route")
    routes = [route] * len(messages) if isinstance(route, str) or route is None else route
    if len(routes) != len(messages) or not set(routes) <= {None, *_ROUTES}:
        raise InvalidInput(f"{where}: route must be one of {sorted(_ROUTES)} or a list of "
                           "them, one per message", code="invalid_task")
    return Task(id=str(raw["id"]), messages=list(messages), approval=raw.get("approval"),
                fault=raw.get("fault"), expect=expect, status=raw.get("status"),
                customer=raw.get("customer"), routes=list(routes), sender=raw.get("sender"),
                codes_sent=codes_sent)


def load_tasks(path: Path) -> list[Task]:
    tasks = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            tasks.append(parse_task(json.loads(line), where=f"{path}:{number}"))
    ids = Counter(t.id for t in tasks)
    if duplicates := [i for i, n in ids.items() if n > 1]:
        raise InvalidInput(f"{path}: duplicate task ids {duplicates}", code="invalid_task")
    return tasks


# -- comparing the store -----------------------------------------------------------------


def normalize_text(value: object) -> str:
    """Accent-, case- and comma-insensitive form of an address field."""
    text = unicodedata.normalize("NFKD", str(value))
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return re.sub(r"\s+", " ", text.replace(",", " ")).strip()


def _by_key(rows: list[dict], key: tuple[str, ...]) -> dict[tuple, dict]:
    return {tuple(r[k] for k in key): r for r in rows}


def _changed(before: list[dict], after: list[dict], key: tuple[str, ...]) -> list[dict]:
    old, new = _by_key(before, key), _by_key(after, key)
    removed = [{"removed": list(k)} for k in old if k not in new]
    return removed + [row for k, row in new.items() if old.get(k) != row]


def compare_store(expect: Mapping[str, Any], before: Mapping[str, list[dict]],
                  after: Mapping[str, list[dict]]) -> str | None:
    """Why the store's changes differ from `expect`, or None when they match exactly."""
    keys = {"accounts": ("id",), "addresses": ("id",), "orders": ("id",),
            "refunds": ("id",), "preferences": ("account_id", "key")}
    problems = []
    for table in BUSINESS_TABLES:
        changed = _changed(before[table], after[table], keys[table])
        if table not in expect:
            if changed:
                problems.append(f"{table} must not change, got {changed}")
            continue
        got: Counter[tuple]
        want: Counter[tuple]
        if table == "refunds":
            got = Counter((r.get("order_id"), r.get("amount_cents")) for r in changed)
            want = Counter((r["order_id"], r["amount_cents"]) for r in expect["refunds"])
        elif table == "addresses":
            got = Counter(tuple(normalize_text(r.get(f)) for f in _ADDRESS_FIELDS)
                          for r in changed)
            want = Counter(tuple(normalize_text(r[f]) for f in _ADDRESS_FIELDS)
                           for r in expect["addresses"])
        else:
            got = Counter((r.get("account_id"), r.get("key"), r.get("value")) for r in changed)
            want = Counter((account, k, v) for account, prefs in expect["preferences"].items()
                           for k, v in prefs.items())
        if got != want:
            problems.append(f"{table}: expected {sorted(want.elements(), key=str)}, "
                            f"got {sorted(got.elements(), key=str)}")
    return "; ".join(problems) or None


# -- running -----------------------------------------------------------------------------


def _error(exc: SupportRouterError) -> str:
    return f"{exc.status_code} {exc.code}: {exc.message}"


def _verified_sender(services: Services, text: str) -> str | None:
    """The From address a mail system would have authenticated: the first e-mail in the
    message that is on an account."""
    for email in find_emails(text):
        if services.desk.store.account_by_email(email) is not None:
            return email
    return None


def _codes(services: Services, case_id: str | None) -> list[str]:
    """The one-time codes sent on a case, oldest first (read from the outbox)."""
    if case_id is None:
        return []
    sent = OutboxNotifier(services.engine).messages(case_id=case_id)
    codes = [code_in_notification(m["body"]) for m in sent if m["kind"] == "verification_code"]
    return [c for c in codes if c]


def _fill_codes(services: Services, text: str, case_id: str | None) -> str | None:
    """`text` with `{code}` / `{wrong_code}` filled in; None when no code was sent."""
    if "{code}" not in text and "{wrong_code}" not in text:
        return text
    codes = _codes(services, case_id)
    if not codes:
        return None
    wrong = f"{(int(codes[-1]) + 1) % 1_000_000:06d}"
    return text.replace("{code}", codes[-1]).replace("{wrong_code}", wrong)


def _drive(services: Services, task: Task, result: dict[str, Any], *,
           route_hints: bool, sender: str) -> str | None:
    """Send the task's messages and the supervisor's decision; a failure reason or None."""
    case_id = None
    for index, template in enumerate(task.messages):
        text = _fill_codes(services, template, case_id)
        if text is None:
            return f"message {index + 1} needs a code, but none was sent on the case"
        hint = task.expected_route(index)
        kind: DecisionRoute | None = None
        if route_hints and hint in ("refund", "account", "other"):
            kind = cast("DecisionRoute", hint)  # one of the routes just checked
        customer = task.customer
        if customer is None and (task.sender or sender) == "verified":
            customer = _verified_sender(services, text)
        message = IncomingMessage(text=text, case_id=case_id, customer=customer, kind=kind)
        try:
            outcome = services.conversation.reply(message)
        except SupportRouterError as exc:
            return f"message {index + 1} → {_error(exc)}"
        case_id = outcome.case_id
        result["routes"].append(outcome.route)
        result.update(route=outcome.route, status=outcome.status, reply=outcome.reply)
    if task.status and result["status"] != task.status:
        return f"status {result['status']!r}, expected {task.status!r}"
    sent = len(_codes(services, case_id))
    if task.codes_sent is not None and sent != task.codes_sent:
        return f"{sent} one-time codes sent, expected {task.codes_sent}"
    if task.approval:
        held = services.desk.list_approvals("held")
        ops = [row["operation"] for row in held if row["case_id"] == case_id]
        if len(ops) != 1:
            return f"expected one held refund to {task.approval}, found {len(ops)}"
        try:
            decided = services.desk.decide_approval(ops[0], task.approval, SUPERVISOR)
        except SupportRouterError as exc:
            return f"approval → {_error(exc)}"
        result["reply"] = decided.reply
    return None


def _misrouted(task: Task, routes: list[str]) -> str | None:
    wrong = [f"message {i + 1}: got {got}, expected {task.expected_route(i)}"
             for i, got in enumerate(routes)
             if task.expected_route(i) is not None and got != task.expected_route(i)]
    return f"misrouted ({'; '.join(wrong)})" if wrong else None


def run_task(task: Task, *, settings: Settings, route_hints: bool = False,
             sender: str = "verified") -> TaskResult:
    """Run one task on a fresh store through the conversation use case (module docstring)."""
    if sender not in SENDERS:
        raise InvalidInput(f"sender must be one of {list(SENDERS)}, not {sender!r}",
                           code="invalid_sender")
    result: dict[str, Any] = {"route": None, "status": None, "reply": None, "routes": []}
    with tempfile.TemporaryDirectory(prefix="support-task-") as tmp:
        task_settings = settings.model_copy(update={
            "var_dir": Path(tmp), "database_url": f"sqlite:///{Path(tmp) / 'store.db'}",
        })
        services = build_services(task_settings)
        try:
            before = snapshot(services.engine)
            faults = services.desk.refunds.faults
            if task.fault:
                faults.arm(task.fault)
            reason = _drive(services, task, result, route_hints=route_hints, sender=sender)
            after = snapshot(services.engine)
            if reason is None:
                reason = compare_store(task.expect, before, after)
            if reason is None and task.fault and task.expect.get("refunds") \
                    and faults.take(task.fault):
                reason = f"fault {task.fault} never fired"
        finally:
            services.close()
    if reason is not None and (misrouted := _misrouted(task, result["routes"])):
        reason = f"{misrouted}: {reason}"
    return TaskResult(
        id=task.id, passed=reason is None, reason=reason or "ok", wrote=after != before, **result
    )


def run_suite(path: Path, *, settings: Settings, route_hints: bool = False,
              sender: str = "verified") -> SuiteReport:
    tasks = load_tasks(path)
    return SuiteReport([run_task(t, settings=settings, route_hints=route_hints, sender=sender)
                        for t in tasks])


def format_result(result: TaskResult) -> str:
    mark = "PASS" if result.passed else "FAIL"
    return f"{mark}  {result.id:<44} route={result.route} status={result.status}  " \
           f"{result.reason}"


def format_report(report: SuiteReport) -> str:
    lines = [format_result(r) for r in report.results]
    lines.append(f"{report.passed} passed, {report.failed} failed")
    return "\n".join(lines)

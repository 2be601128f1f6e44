"""Shared constants and builders for the handler tests (not fixtures)."""

from __future__ import annotations

import uuid
from datetime import date

from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.extract import find_emails
from handlers.services.notifier import OutboxNotifier
from handlers.services.verification import code_in_notification
from router.contracts import Decision
from tests.paths import DATASETS

TODAY = date(2026, 3, 15)
FIXTURE = DATASETS / "store" / "fixture.json"


def decision(route: str, *, request_id: str | None = None) -> Decision:
    """A hand-built router decision, to drive the desk without a model."""
    return Decision(request_id=request_id or uuid.uuid4().hex, route=route, scores=None,
                    threshold=0.5, policy_version="test", reason="rule:test", model="test")


def new_refunds(before: dict, after: dict) -> list[tuple[str, int]]:
    """(order id, cents) of refund rows added between two store snapshots."""
    old = {r["id"] for r in before["refunds"]}
    return [(r["order_id"], r["amount_cents"]) for r in after["refunds"] if r["id"] not in old]


def mail_sender(desk: SupportDesk, text: str) -> str | None:
    """The customer a mail system would vouch for: the first e-mail in the text that is on
    an account (the task runner's `verified` sender); None when there is none."""
    for email in find_emails(text):
        if desk.store.account_by_email(email) is not None:
            return email
    return None


def codes_sent(engine: Engine, case_id: str) -> list[str]:
    """The one-time codes the outbox holds for a case, oldest first."""
    bodies = [m["body"] for m in OutboxNotifier(engine).messages(case_id=case_id)]
    return [c for c in map(code_in_notification, bodies) if c]


def other_code(code: str) -> str:
    """A six-digit code that is certainly not `code`."""
    return f"{(int(code) + 1) % 1_000_000:06d}"

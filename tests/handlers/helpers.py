"""Shared constants and builders for the handler tests (not fixtures)."""

from __future__ import annotations

import uuid
from datetime import date

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

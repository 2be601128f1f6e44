"""Decision-log rows for the labelling tests: what the console's queue is fed from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from router.contracts import Decision, RouteScores
from router.storage.decision_log import DecisionLog

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def log_decisions(log: DecisionLog,
                  rows: Iterable[tuple[str, str, Mapping[str, float] | None]]) -> list[str]:
    """Append one decision per (request id, text, probabilities), a second apart; None
    probabilities make a rule decision (no model answer). The request ids, in order."""
    ids = []
    for i, (request_id, text, probabilities) in enumerate(rows):
        scores = None if probabilities is None else RouteScores.from_probabilities(
            "m", dict(probabilities))
        route = "refund" if scores is None else (
            "clarify" if scores.choice == "unclear" else scores.choice)
        log.append(Decision(
            request_id=request_id, route=route, scores=scores,
            threshold=0.5, policy_version="p1", model="m",
            reason="confident" if scores else "rule:kind",
            created_at=T0 + timedelta(seconds=i)), text=text)
        ids.append(request_id)
    return ids


def probabilities(choice: str, confidence: float) -> dict[str, float]:
    """Four route probabilities whose top is `choice` with roughly this p_max."""
    rest = (1.0 - confidence) / 3
    return {route: confidence if route == choice else rest
            for route in ("refund", "account", "other", "unclear")}

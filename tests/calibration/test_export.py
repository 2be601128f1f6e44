from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from calibration.export import export_rows, redact
from router.contracts import Decision, RouteScores
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail me at ana.novak@example.com", "mail me at [email]"),
        ("order O-7720 and account A-100", "order [id] and account [id]"),
        ("charged $12.50 twice", "charged [amount] twice"),
        ("me cobraron 89,90 € dos veces", "me cobraron [amount] dos veces"),
        ("refund 120 EUR please", "refund [amount] please"),
        ("I have 3 kids and 2 cats", "I have 3 kids and 2 cats"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def _decision(request_id: str, at: datetime, choice: str = "refund") -> Decision:
    probabilities = {"refund": 0.1, "account": 0.1, "other": 0.1, "unclear": 0.1, choice: 0.7}
    scores = RouteScores.from_probabilities("m", probabilities)
    return Decision(request_id=request_id, route=choice, scores=scores, threshold=0.5,
                    policy_version="v1", reason="confident", model="m", created_at=at)


def test_export_from_a_real_decision_log(tmp_path: Path) -> None:
    log = DecisionLog(make_engine(f"sqlite:///{tmp_path / 'log.db'}"))
    log.create_schema()
    start = datetime(2026, 3, 1, tzinfo=UTC)
    log.append(_decision("r1", start), text="old message about O-1001")
    log.append(_decision("r2", start + timedelta(days=2)), text="refund O-1001, $48 please")
    log.append(_decision("r3", start + timedelta(days=3), "account"),
               text="refund O-1001, $48 please")  # same text: exported once
    rows = export_rows(log.rows(since=start + timedelta(days=1)), redact_text=True)
    assert [r["id"] for r in rows] == ["r2"]
    assert rows[0]["text"] == "refund [id], [amount] please"
    assert rows[0]["choice"] == "refund" and rows[0]["confidence"] == pytest.approx(0.6)
    assert set(rows[0]["probabilities"]) == {"refund", "account", "other", "unclear"}

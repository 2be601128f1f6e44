"""The decision log's storage, the same on SQLite and PostgreSQL.

Labelling, recalibration and A/B reports read these rows back, so what goes in must come
out unchanged on both backends: scores, outcome and shadow decisions, the time filter
and the experiment filter, and a request id that can be logged only once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from router.contracts import Decision, RouteScores
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog

T0 = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def log(any_db_url: str) -> Iterator[DecisionLog]:
    engine: Engine = make_engine(any_db_url)
    log = DecisionLog(engine)
    log.create_schema()
    yield log
    close = getattr(log, "close", None)
    if callable(close):
        close()
    engine.dispose()


def _decision(request_id: str, minutes: int, route: str = "refund") -> Decision:
    scores = RouteScores.from_probabilities(
        "m", {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1})
    return Decision(request_id=request_id, route=route, scores=scores, threshold=0.5,
                    policy_version="p1", reason="confident", model="m",
                    created_at=T0 + timedelta(minutes=minutes))


def _as_utc(value: datetime) -> datetime:
    """SQLite gives back naive UTC datetimes, PostgreSQL aware ones: compare as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def test_rows_come_back_as_written_in_time_order(log: DecisionLog) -> None:
    log.append(_decision("r2", 2), text="second", case_id="c-1", experiment="exp")
    log.append(_decision("r1", 1, route="clarify"), text="first")
    log.set_outcome("r2", "resolved")
    log.set_shadow("r2", {"shadow-a": {"route": "refund", "confidence": 0.5}})

    rows = log.rows()
    assert [r["request_id"] for r in rows] == ["r1", "r2"]
    first, second = rows
    assert [_as_utc(r["created_at"]) for r in rows] == [T0 + timedelta(minutes=1),
                                                        T0 + timedelta(minutes=2)]
    assert (first["route"], first["outcome"], first["shadow"]) == ("clarify", None, None)
    assert (second["case_id"], second["experiment"], second["outcome"]) == \
        ("c-1", "exp", "resolved")
    assert json.loads(second["shadow"]) == {"shadow-a": {"route": "refund",
                                                         "confidence": 0.5}}
    assert json.loads(second["probabilities"])["refund"] == pytest.approx(0.7)
    assert second["confidence"] == pytest.approx(0.6)


def test_since_and_experiment_filters(log: DecisionLog) -> None:
    for minute, experiment in ((0, None), (5, "exp"), (10, "exp"), (15, "other")):
        log.append(_decision(f"r{minute}", minute), text="t", experiment=experiment)
    since = T0 + timedelta(minutes=5)
    assert [r["request_id"] for r in log.rows(since=since)] == ["r5", "r10", "r15"]
    assert [r["request_id"] for r in log.rows(experiment="exp")] == ["r5", "r10"]
    assert [r["request_id"] for r in log.rows(since=T0 + timedelta(minutes=6),
                                              experiment="exp")] == ["r10"]


def test_rows_for_reads_the_asked_request_ids_in_chunks(log: DecisionLog) -> None:
    for i in range(520):  # more than one chunk of the IN list
        log.append(_decision(f"r{i}", i), text=f"text {i}")
    found = log.rows_for(["r3", "r519", "nope", "r3"])
    assert {k: v["text"] for k, v in found.items()} == {"r3": "text 3", "r519": "text 519"}
    assert len(log.rows_for(f"r{i}" for i in range(520))) == 520
    assert log.rows_for([]) == {}


def test_a_request_id_is_logged_once(log: DecisionLog) -> None:
    log.append(_decision("same", 0), text="t")
    with pytest.raises(IntegrityError):
        log.append(_decision("same", 1), text="t")
    assert len(log.rows()) == 1


def test_each_row_records_the_message_form_and_feature_rows_read_only_that(
        log: DecisionLog) -> None:
    """What the drift monitor reads: length and language guess, never the text; only the
    model decisions of the asked policy version in the window, newest first."""
    log.append(_decision("a", 0), text="Bitte erstatten Sie mir das Geld für die Jacke.")
    log.append(_decision("b", 5), text="where is my parcel")
    log.append(_decision("c", 6).model_copy(update={"reason": "rule:kind"}), text="refund")
    log.append(_decision("d", 7).model_copy(update={"policy_version": "p2"}), text="x y")
    log.append(_decision("old", -60), text="too early")
    rows = log.feature_rows(policy_version="p1", since=T0, limit=10)
    assert rows == [
        {"confidence": pytest.approx(0.6), "route": "refund", "choice": "refund",
         "text_chars": 18, "lang": "en", "projections": None},
        {"confidence": pytest.approx(0.6), "route": "refund", "choice": "refund",
         "text_chars": 47, "lang": "de", "projections": None},
    ]
    assert log.feature_rows(policy_version="p1", since=T0, limit=1)[0]["text_chars"] == 18


def test_an_e5_decision_logs_its_projections_and_others_none(log: DecisionLog) -> None:
    """The drift monitor reads the projections back as written; a decision no e5 model
    scored has NULL (and the API's view of the decision never carries them)."""
    projected = _decision("e5", 1).model_copy(update={"projections": [0.125, -0.5, 0.0]})
    log.append(projected, text="where is my refund")
    log.append(_decision("local", 2), text="where is my parcel")
    rows = log.feature_rows(policy_version="p1", since=T0, limit=10)
    assert [r["projections"] for r in rows] == [None, "[0.125, -0.5, 0.0]"]
    assert "projections" not in projected.model_dump()

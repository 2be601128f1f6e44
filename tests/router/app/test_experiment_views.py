"""The experiments page's read model, on SQLite and PostgreSQL: the database's running
experiment with the live figures `support-router ab-report` computes from its
decision-log rows, and the empty state when none runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from calibration.ab_report import ab_report
from router.app.experiment_views import read_experiments
from router.contracts import Decision, ExperimentConfig, RouteScores
from router.storage.decision_log import DecisionLog
from router.storage.experiment_db import ExperimentDB

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
CONFIG = ExperimentConfig.model_validate({
    "name": "split", "salt": "s", "planned_requests": 400,
    "variants": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3}]})


@pytest.fixture
def log(engine: Engine) -> Iterator[DecisionLog]:
    log = DecisionLog(engine)
    yield log
    log.close()


def _log(log: DecisionLog, counts: dict[str, int], *, experiment: str = "split") -> None:
    """`counts[variant]` decisions per variant: every fourth one a clarify, half resolved."""
    for variant, n in counts.items():
        for i in range(n):
            route = "clarify" if i % 4 == 0 else "refund"
            scores = RouteScores.from_probabilities(
                "m", {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1})
            decision = Decision(
                request_id=f"{experiment}-{variant}-{i}", route=route, scores=scores,
                threshold=0.5, policy_version="p1", model="m", variant=variant,
                experiment=experiment,
                reason="below_threshold" if route == "clarify" else "confident",
                created_at=T0 + timedelta(seconds=i))
            log.append(decision, text="customer text the page never reads",
                       experiment=experiment, outcome="resolved" if i % 2 else None)


def test_no_running_experiment_is_the_empty_state(engine: Engine, log: DecisionLog) -> None:
    db = ExperimentDB(engine)
    assert read_experiments(db, log).running is None
    db.start(CONFIG, by="alice")
    db.stop("split", by="bob")
    page = read_experiments(db, log)
    assert page.running is None
    assert [(r.name, r.started_by, r.stopped_by) for r in page.history] == [
        ("split", "alice", "bob")]


def test_the_running_experiment_shows_the_ab_reports_figures(engine: Engine,
                                                             log: DecisionLog) -> None:
    db = ExperimentDB(engine)
    run = db.start(CONFIG, by="alice")
    _log(log, {"a": 52, "b": 148})
    _log(log, {"a": 30}, experiment="another")  # not this experiment's rows
    page = read_experiments(db, log)
    assert page.running is not None
    view = page.running
    assert (view.run.id, view.run.started_by, view.requests) == (run.id, "alice", 200)
    a, b = view.variants
    assert (a.name, a.configured_share, a.requests, a.observed_share) == ("a", 0.25, 52, 0.26)
    assert (b.configured_share, b.requests) == (0.75, 148)
    assert a.clarify_rate == pytest.approx(13 / 52)
    assert a.routes == {"refund": 39, "account": 0, "other": 0, "clarify": 13}
    assert a.outcomes["resolved"] == 26 and a.outcomes["pending"] == 26
    expected = ab_report(log.rows(experiment="split"), experiment="split",
                         expected_shares=CONFIG.expected_shares(), planned_requests=400)
    assert view.sample_ratio.p_value == pytest.approx(expected["traffic"]["srm"]["p_value"])
    assert not view.sample_ratio.mismatch
    assert (view.horizon.planned_requests, view.horizon.reached) == (400, False)


def test_a_broken_split_is_flagged(engine: Engine, log: DecisionLog) -> None:
    ExperimentDB(engine).start(CONFIG, by="alice")
    _log(log, {"a": 100, "b": 100})  # configured 1:3
    view = read_experiments(ExperimentDB(engine), log).running
    assert view is not None
    assert view.sample_ratio.mismatch and view.sample_ratio.p_value < 0.001
    assert any("sample-ratio mismatch" in note for note in view.notes)


def test_the_level_is_the_ab_reports() -> None:
    from calibration.ab_report import SRM_P
    from router.app.experiment_views import SampleRatioOut

    assert SampleRatioOut(statistic=0, df=1, p_value=1, mismatch=False).level == SRM_P

"""The shared experiment store, on SQLite and PostgreSQL: at most one experiment running,
every start and stop recorded with who and when, a refused change writing nothing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, select, update

from router.contracts import ExperimentConfig
from router.errors import Conflict, InvalidInput, NotFound, SupportRouterError
from router.storage.experiment_db import ExperimentDB, experiments

AT = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def _config(name: str, salt: str = "s") -> ExperimentConfig:
    return ExperimentConfig.model_validate({
        "name": name, "salt": salt, "planned_requests": 100,
        "variants": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3}]})


@pytest.fixture
def db(engine: Engine) -> ExperimentDB:
    return ExperimentDB(engine)


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(select(experiments).order_by(experiments.c.id))]


def test_start_then_stop_is_recorded_with_who_and_when(db: ExperimentDB) -> None:
    assert db.running_id() is None and db.running() is None and db.latest() is None
    run = db.start(_config("e1"), by="alice", now=AT)
    assert db.running_id() == run.id
    assert db.running() == run
    assert (run.name, run.status, run.started_by, run.started_at) == ("e1", "running",
                                                                      "alice", AT)
    assert run.config == _config("e1")

    stopped = db.stop("e1", by="bob", now=AT.replace(hour=10))
    assert (stopped.status, stopped.stopped_by, stopped.stopped_at) == (
        "stopped", "bob", AT.replace(hour=10))
    assert db.running_id() is None
    assert db.history() == [stopped]
    assert db.latest() == stopped and db.latest("e1") == stopped and db.latest("x") is None


def test_a_second_start_while_one_runs_is_refused_and_writes_nothing(
    db: ExperimentDB, engine: Engine
) -> None:
    db.start(_config("e1"), by="alice")
    before = _rows(engine)
    with pytest.raises(Conflict) as refused:
        db.start(_config("e2"), by="bob")
    assert refused.value.code == "experiment_running"
    assert "e1" in refused.value.message
    assert _rows(engine) == before


def test_a_name_is_not_reused_for_another_config_but_a_restart_is_allowed(
    db: ExperimentDB, engine: Engine
) -> None:
    db.start(_config("e1"), by="alice")
    db.stop("e1", by="alice")
    before = _rows(engine)
    with pytest.raises(Conflict) as refused:
        db.start(_config("e1", salt="other"), by="alice")
    assert refused.value.code == "experiment_name_taken"
    assert _rows(engine) == before
    again = db.start(_config("e1"), by="carol")
    assert [r.status for r in db.history()] == ["stopped", "running"]
    assert db.latest("e1") == again  # the running one first


def test_stop_refuses_what_is_not_running(db: ExperimentDB, engine: Engine) -> None:
    with pytest.raises(NotFound) as unknown:
        db.stop("never", by="alice")
    assert unknown.value.code == "unknown_experiment"
    db.start(_config("e1"), by="alice")
    db.stop("e1", by="alice")
    db.start(_config("e2"), by="alice")
    before = _rows(engine)
    with pytest.raises(Conflict) as not_running:
        db.stop("e1", by="alice")
    assert not_running.value.code == "experiment_not_running"
    assert _rows(engine) == before


def test_adopt_only_into_a_table_that_never_had_an_experiment(db: ExperimentDB) -> None:
    adopted = db.adopt(_config("seed"), by="SUPPORT_ROUTER_EXPERIMENT")
    assert adopted is not None and db.running() == adopted
    db.stop("seed", by="alice")
    assert db.adopt(_config("seed"), by="SUPPORT_ROUTER_EXPERIMENT") is None
    assert db.running_id() is None  # a stopped experiment stays stopped after a restart


def test_concurrent_starts_let_exactly_one_run(db: ExperimentDB) -> None:
    """Eight starts at once (threads, each its own connection and transaction)."""
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def start(i: int) -> None:
        barrier.wait()
        try:
            db.start(_config(f"e{i}"), by=f"user{i}")
            outcomes.append("started")
        except SupportRouterError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["experiment_running"] * 7 + ["started"]
    assert [r.status for r in db.history()] == ["running"]


def test_a_stored_config_broken_by_hand_is_refused_naming_the_field(
    db: ExperimentDB, engine: Engine
) -> None:
    run = db.start(_config("e1"), by="alice")
    with engine.begin() as conn:
        conn.execute(update(experiments).values(config='{"name": "e1", "variants": []}'))
    with pytest.raises(InvalidInput) as broken:
        db.load(run.id)
    assert broken.value.code == "invalid_experiment"
    assert "field 'variants'" in broken.value.message

"""The decision log's group commit and SQLite's in-process write lock.

What matters is durability and isolation, not speed (that is measured by bench/load.py):
a request is answered only after its own row is committed, one bad row fails only its
own request, and a transaction that fails or is abandoned never leaves the lock held.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import IntegrityError

from router.contracts import Decision, RouteScores
from router.storage.db import make_engine, read_connection
from router.storage.decision_log import DecisionLog, GroupCommitWriter, decisions


def _decision(request_id: str) -> Decision:
    scores = RouteScores.from_probabilities(
        "m", {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1})
    return Decision(request_id=request_id, route="refund", scores=scores, threshold=0.5,
                    policy_version="p", reason="confident", model="m")


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'log.db'}")
    DecisionLog(engine).create_schema()
    return engine


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(decisions)).scalar_one()


def test_each_row_is_committed_before_its_request_resumes(engine: Engine) -> None:
    log = DecisionLog(engine)
    other = make_engine(str(engine.url))  # another pool: sees only committed rows

    async def one(i: int) -> int:
        await log.append_async(_decision(f"r{i}"), text=f"message {i}")
        with other.connect() as conn:
            found = conn.execute(select(decisions.c.request_id)
                                 .where(decisions.c.request_id == f"r{i}")).all()
        return len(found)

    async def main() -> list[int]:
        return await asyncio.gather(*(one(i) for i in range(60)))

    try:
        assert asyncio.run(main()) == [1] * 60
        assert _count(engine) == 60
    finally:
        log.close()
        other.dispose()


def test_concurrent_rows_are_written_in_batches(engine: Engine,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    commit = GroupCommitWriter._commit

    def record(self: GroupCommitWriter, batch: list) -> None:
        sizes.append(len(batch))
        commit(self, batch)

    monkeypatch.setattr(GroupCommitWriter, "_commit", record)
    log = DecisionLog(engine)

    async def main() -> None:
        await asyncio.gather(*(log.append_async(_decision(f"b{i}"), text="t")
                               for i in range(40)))

    asyncio.run(main())
    log.close()
    assert sum(sizes) == 40
    assert len(sizes) < 40  # rows submitted in one loop turn share a transaction


def test_a_bad_row_fails_only_its_own_request(engine: Engine) -> None:
    log = DecisionLog(engine)

    async def main() -> list[BaseException | None]:
        ids = ["ok1", "dup", "ok2", "dup", "ok3"]
        return await asyncio.gather(*(log.append_async(_decision(i), text="t") for i in ids),
                                    return_exceptions=True)

    results = asyncio.run(main())
    log.close()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], IntegrityError)
    assert _count(engine) == 4


def test_the_writer_restarts_after_close(engine: Engine) -> None:
    log = DecisionLog(engine)
    asyncio.run(log.append_async(_decision("before"), text="t"))
    log.close()
    asyncio.run(log.append_async(_decision("after"), text="t"))
    log.close()
    assert _count(engine) == 2


def test_in_memory_sqlite_is_written_on_the_calling_thread() -> None:
    engine = make_engine("sqlite://")
    log = DecisionLog(engine)
    log.create_schema()
    asyncio.run(log.append_async(_decision("mem"), text="t"))
    assert _count(engine) == 1


def test_failed_and_abandoned_transactions_release_the_write_lock(engine: Engine) -> None:
    with pytest.raises(Exception, match="no such table"):
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO nowhere VALUES (1)"))
    abandoned = engine.connect()
    abandoned.execute(text("SELECT 1"))  # opens a transaction, never committed
    abandoned.close()

    done = threading.Event()

    def write() -> None:
        with engine.begin() as conn:
            conn.execute(text("SELECT 1"))
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert done.is_set()


def test_threads_of_one_process_all_get_their_writes_in(engine: Engine) -> None:
    log = DecisionLog(engine)

    def writer(n: int) -> None:
        for i in range(25):
            log.append(_decision(f"t{n}-{i}"), text="t")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _count(engine) == 200


def test_rows_from_threads_are_committed_before_append_returns_and_share_commits(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    commit = GroupCommitWriter._commit
    gate = threading.Event()

    def slow_first(self: GroupCommitWriter, batch: list) -> None:
        if not sizes:  # hold the first commit so the other threads' rows queue up
            gate.wait(timeout=30)
        sizes.append(len(batch))
        commit(self, batch)

    monkeypatch.setattr(GroupCommitWriter, "_commit", slow_first)
    log = DecisionLog(engine)
    other = make_engine(str(engine.url))
    seen: dict[str, int] = {}

    def writer(i: int) -> None:
        log.append(_decision(f"th{i}"), text="t")
        with other.connect() as conn:
            seen[f"th{i}"] = len(conn.execute(select(decisions.c.request_id).where(
                decisions.c.request_id == f"th{i}")).all())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(12)]
    try:
        for thread in threads:
            thread.start()
        gate.set()
        for thread in threads:
            thread.join(timeout=60)
        assert seen == {f"th{i}": 1 for i in range(12)}
        assert sum(sizes) == 12 and len(sizes) < 12
    finally:
        log.close()
        other.dispose()


def test_a_bad_row_from_a_thread_fails_only_that_thread(engine: Engine) -> None:
    log = DecisionLog(engine)
    log.append(_decision("twice"), text="t")
    errors: list[BaseException] = []

    def writer(request_id: str) -> None:
        try:
            log.append(_decision(request_id), text="t")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(rid,))
               for rid in ("fresh1", "twice", "fresh2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    log.close()
    assert len(errors) == 1 and isinstance(errors[0], IntegrityError)
    assert _count(engine) == 3


def test_a_read_connection_does_not_wait_for_an_open_write_transaction(
        engine: Engine) -> None:
    log = DecisionLog(engine)
    log.append(_decision("committed"), text="t")
    log.close()
    writing = engine.connect()
    writing.begin()  # BEGIN IMMEDIATE: holds the write lock until it ends
    writing.execute(decisions.delete())
    try:
        read: list[int] = []

        def reader() -> None:
            with read_connection(engine) as conn:
                read.append(conn.execute(select(func.count()).select_from(decisions))
                            .scalar_one())

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        thread.join(timeout=10)
        # It answered while the writer held the lock, from the last committed state.
        assert read == [1]
    finally:
        writing.rollback()
        writing.close()

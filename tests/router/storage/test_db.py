"""SQLite engines of several processes opening one new file at the same moment.

That is how a multi-worker gateway starts on a fresh checkout: every worker connects to
a database file that does not exist yet, and each connection switches it to WAL. SQLite
refuses that switch with "database is locked", without waiting, while another process
is making it, so one worker in a few failed to start (seen once in a load-bench run).
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from router.storage.db import make_engine

PROCESSES = 4
ROUNDS = 30  # a race: with the bug, 4 of 5 runs of this test failed


def _open_and_write(paths: list[str], barrier: Barrier, report: Queue) -> None:
    failures = []
    for path in paths:
        engine = make_engine(f"sqlite:///{path}")
        barrier.wait(timeout=60)  # every process connects to the new file at once
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
                time.sleep(0.02)  # hold the write lock while the others connect
        except Exception as error:  # noqa: BLE001 - reported to the test
            failures.append(f"{path}: {error}")
        finally:
            engine.dispose()
    report.put(failures)


def test_processes_opening_a_new_sqlite_file_at_once_all_connect(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"round-{i}.db") for i in range(ROUNDS)]
    context = multiprocessing.get_context("spawn")
    barrier, report = context.Barrier(PROCESSES), context.Queue()
    processes = [
        context.Process(target=_open_and_write, args=(paths, barrier, report))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    results = [report.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert [f for failures in results for f in failures] == []
    for path in paths:
        engine = make_engine(f"sqlite:///{path}")
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == PROCESSES
        engine.dispose()

"""Without a PostgreSQL server: a laptop skips those tests and says why; CI fails.

Runs pytest itself on one PostgreSQL test, pointed at a port where nothing listens.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO_ROOT

ONE_TEST = "tests/router/storage/test_decision_log.py::test_a_request_id_is_logged_once[postgresql]"


def _pytest_without_postgres(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["SUPPORT_ROUTER_TEST_POSTGRES_URL"] = "postgresql+psycopg://postgres@127.0.0.1:9/test"
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        # One test: no xdist workers (`-n 0`), whatever the project's addopts ask for.
        [sys.executable, "-m", "pytest", "-q", "-ra", "-n", "0", "-p", "no:cacheprovider",
         ONE_TEST],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def test_without_ci_the_postgres_tests_are_skipped_with_the_reason() -> None:
    run = _pytest_without_postgres(None)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "1 skipped" in run.stdout
    assert "SKIPPED" in run.stdout and "no PostgreSQL at" in run.stdout


def test_under_ci_the_postgres_tests_fail() -> None:
    run = _pytest_without_postgres("true")
    assert run.returncode == 1, run.stdout[-3000:]
    assert "1 error" in run.stdout
    assert "CI is set, so the PostgreSQL tests are mandatory" in run.stdout

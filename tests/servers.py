"""Real servers for tests: a free loopback port, and `support-router serve` as a process.

`GatewayProcess` starts the gateway on a free loopback port with its output in a log
file, waits until it answers 200 on its ready path (failing the test with the log's tail
if it exits or never does), and stops it with SIGTERM as a process manager would.
`gateway_env` is the environment for one, `child_pids` finds its worker processes.
`shared_database` and `gateways_on` are two hosts over one database: one PostgreSQL
schema or one SQLite file, each gateway with its own copy of the model folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from router.app.training import TrainResult
from tests.conftest import postgres_schema, sqlite_url
from tests.paths import REPO_ROOT

SERVE = (sys.executable, "-c", "from router.cli.main import app; app()", "serve")
"""`support-router serve` from this checkout's sources."""
TAIL_CHARS = 4000


def gateway_env(model_dir: Path, policy_path: Path, var_dir: Path,
                **settings: str) -> dict[str, str]:
    """This machine's environment without our settings, plus the given files and
    `settings` (as `SUPPORT_ROUTER_<NAME>`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update({
        "SUPPORT_ROUTER_MODEL_DIR": str(model_dir),
        "SUPPORT_ROUTER_POLICY_PATH": str(policy_path),
        "SUPPORT_ROUTER_VAR_DIR": str(var_dir),
    })
    env.update({f"SUPPORT_ROUTER_{name.upper()}": value for name, value in settings.items()})
    return env


def child_pids(pid: int) -> set[int]:
    """The processes `pid` started (any of its threads), from Linux's /proc."""
    children: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children.update(int(c) for c in (task / "children").read_text().split())
    except FileNotFoundError:  # the process (or a thread) is gone
        pass
    return children


def free_port() -> int:
    """A loopback port nothing listens on right now (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GatewayProcess:
    """One `serve` subprocess; as a context manager, stopped at exit whatever happened."""

    def __init__(self, command: Sequence[str] = SERVE, ready_path: str = "/readyz") -> None:
        self.command, self.ready_path = list(command), ready_path
        self.port, self.url = 0, ""
        self.log = Path()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str], args: Sequence[str], log: Path, *,
              cwd: Path = REPO_ROOT) -> str:
        """Start `command --port <free port> *args` with `env` in `cwd` (default: the
        checkout, whose sources `python -c` then imports), output to `log`; the URL."""
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*self.command, "--port", str(self.port), *args],
                cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        return self.url

    def wait_ready(self, timeout: float) -> None:
        """Return once `ready_path` answers 200; fail the test if it exits or times out."""
        process = self._started()
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                pytest.fail(f"gateway exited with {process.returncode}:\n{self._tail()}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"gateway not ready within {timeout:.3g} s:\n{self._tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (SIGKILL if still running after `timeout` s); the exit code."""
        process = self._started()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.process is not None:
            self.stop()

    def _started(self) -> subprocess.Popen[bytes]:
        assert self.process is not None, "GatewayProcess.start() was not called"
        return self.process

    def _tail(self) -> str:
        return self.output()[-TAIL_CHARS:]


DATABASES = ["postgresql", "sqlite"]
"""`shared_database`'s kinds, for `@pytest.fixture(params=DATABASES)`."""


@contextmanager
def shared_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of one fresh database of `request.param`'s kind (see `DATABASES`)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    postgres_admin: Engine = request.getfixturevalue("postgres_admin")
    with postgres_schema(postgres_admin) as url:
        yield url


@contextmanager
def gateways_on(database_url: str, trained: TrainResult, tmp_path: Path, *,
                names: Sequence[str] = ("a", "b"), start_timeout_s: float = 180.0,
                **settings: str) -> Iterator[list[GatewayProcess]]:
    """One ready gateway per name on `database_url`, each with its own model folder and
    policy file (`tmp_path/models-<name>`, as a host's own disk) and `settings`; the log
    of each is `tmp_path/serve-<name>.log`. Stopped on exit."""
    gateways: list[GatewayProcess] = []
    try:
        for name in names:
            models = tmp_path / f"models-{name}"
            models.mkdir()
            (models / trained.model_path.name).symlink_to(trained.model_path)
            shutil.copy(trained.policy_path, models / "policy.json")
            env = gateway_env(models, models / "policy.json", tmp_path / f"var-{name}",
                              database_url=database_url, **settings)
            gateways.append(GatewayProcess())
            gateways[-1].start(env, [], tmp_path / f"serve-{name}.log")
        deadline = time.monotonic() + start_timeout_s
        for gateway in gateways:
            gateway.wait_ready(deadline - time.monotonic())
        yield gateways
    finally:
        for gateway in gateways:
            if gateway.process is not None:
                gateway.stop()


FOLLOW_POLL_S = 0.5
"""The poll interval of `following_gateways` (tests/e2e/conftest.py)."""
FOLLOW_BOUND_S = FOLLOW_POLL_S + 1.5
"""A change made on one gateway must be served by every one this long after it returned."""
AFTER_BOUND_REQUESTS = 40


def route(gateway: GatewayProcess, body: dict[str, Any]) -> dict[str, Any]:
    """The decision `/v1/route` answers, on a new connection."""
    answer = httpx.post(f"{gateway.url}/v1/route", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    decision: dict[str, Any] = answer.json()
    return decision


def decisions_after_the_bound(gateways: Sequence[GatewayProcess], field: str, value: object,
                              since: float,
                              body: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Each gateway's decisions carry `field` == `value` within FOLLOW_BOUND_S of `since`;
    then the decisions of AFTER_BOUND_REQUESTS requests sent to the gateways in turn after
    the bound. `body(unit)` is a request's body, `unit` naming it ("probe", "c-<n>")."""
    for gateway in gateways:
        while (seen := route(gateway, body("probe"))[field]) != value:
            assert time.monotonic() - since < FOLLOW_BOUND_S, \
                f"{gateway.url} still serves {field} {seen}, {FOLLOW_BOUND_S} s after the change"
            time.sleep(0.02)
    time.sleep(max(0.0, since + FOLLOW_BOUND_S - time.monotonic()))
    return [route(gateways[i % len(gateways)], body(f"c-{i}"))
            for i in range(AFTER_BOUND_REQUESTS)]

"""Shared fixtures: one embedded model trained per test session, fresh state per test.

Databases: `any_db_url` runs a test on a SQLite file and on PostgreSQL. PostgreSQL is
the server at `SUPPORT_ROUTER_TEST_POSTGRES_URL` (default: the local server's `test`
database, trust auth); each test gets its own throw-away *schema* there (the URL sets
`search_path` and an `application_name`), dropped afterwards with any connection the
test left open. A schema costs about 1 ms where a database costs about 200 ms, and a
schema per test keeps concurrent test sessions on one server apart all the same.

Redis (the shared rate limits) is the server at `SUPPORT_ROUTER_TEST_REDIS_URL`
(default: the local one); each test gets a key prefix of its own, deleted afterwards.

Without a server the PostgreSQL or Redis tests are skipped with the reason (`pytest -ra`
lists it); with the `CI` environment variable set they fail instead, so CI cannot pass
without having run them.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from filelock import FileLock
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from router.app.training import MODEL_FILES, TrainResult, train_local
from router.gateway.app import create_app
from router.settings import Settings, get_settings
from router.storage.db import make_engine, migrate
from router.storage.policy_store import load_policy
from tests.paths import DATASETS

POSTGRES_URL = os.environ.get(
    "SUPPORT_ROUTER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("SUPPORT_ROUTER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pytest-xdist keys tests by node id: two tests sharing one would run only once.

    Files whose tests need no trained model run first: while one xdist worker trains the
    session's model, the others run them instead of waiting on its lock. Of the rest,
    the end-to-end files (the longest) go first, so no worker is left alone at the end
    with a long one. The order within a file is kept."""
    counts = Counter(item.nodeid for item in items)
    shared = sorted(nodeid for nodeid, count in counts.items() if count > 1)
    if shared:
        raise pytest.UsageError(f"tests share a node id (give them ids): {shared[:5]}")
    needs_model = {item.path for item in items if "trained" in item.fixturenames}
    end_to_end = Path(__file__).parent / "e2e"

    def rank(item: pytest.Item) -> int:
        if item.path not in needs_model:
            return 0
        return 1 if end_to_end in item.path.parents else 2

    items.sort(key=rank)  # stable: collection order within each rank


def in_ci() -> bool:
    """CI systems set `CI` (GitHub, GitLab: "true"); there PostgreSQL and Redis are
    mandatory."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'shop.db'}"


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """An autocommit engine on the test server: skipped without one, failed under CI."""
    url = make_url(POSTGRES_URL)
    shown = url.render_as_string(hide_password=True)
    admin = create_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server here"
        admin.dispose()
        reason = f"no PostgreSQL at {shown}: {type(exc).__name__}: {exc}".splitlines()[0]
        if in_ci():
            pytest.fail(f"CI is set, so the PostgreSQL tests are mandatory: {reason}",
                        pytrace=False)
        pytest.skip(f"{reason} (set SUPPORT_ROUTER_TEST_POSTGRES_URL, or CI=1 to fail)")
    yield admin
    admin.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis server's URL: skipped without one, failed under CI (like PostgreSQL)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = f"no Redis at {REDIS_URL}: {type(exc).__name__}"
        if in_ci():
            pytest.fail(f"CI is set, so the Redis tests are mandatory: {reason}", pytrace=False)
        pytest.skip(f"{reason} (set SUPPORT_ROUTER_TEST_REDIS_URL, or CI=1 to fail)")
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of one test's own; its keys are deleted afterwards."""
    import redis

    prefix = f"sr-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def postgres_url(postgres_admin: Engine) -> Iterator[str]:
    """A fresh, empty PostgreSQL schema for one test (its URL); dropped afterwards."""
    with postgres_schema(postgres_admin) as url:
        yield url


@contextmanager
def postgres_schema(postgres_admin: Engine) -> Iterator[str]:
    """A fresh, empty schema (its URL) for any fixture scope; dropped on exit."""
    name = f"sr_test_{uuid.uuid4().hex[:12]}"
    with postgres_admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{name}"'))
    url = make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={name}", "application_name": name})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with postgres_admin.connect() as conn:
            # Connections the test left open (an engine not disposed, a checkpointer
            # pool, a killed server process) would otherwise hold locks or leak slots.
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = :name AND pid <> pg_backend_pid()"),
                         {"name": name})
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on a PostgreSQL schema."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def engine(any_db_url: str) -> Iterator[Engine]:
    """A migrated engine on each database of `any_db_url` (a package or module needing
    another engine defines its own `engine`)."""
    engine = make_engine(any_db_url)
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> TrainResult:
    """The embedded model on the project's data, trained once per test run.

    Under pytest-xdist the workers share one folder: the first to take the lock trains
    (about two minutes), the others wait and load what it wrote. A developer iterating on
    code that does not touch training may point `SUPPORT_ROUTER_TEST_TRAINED_DIR` at a
    folder `train` wrote (it must hold `policy.json`, with the drift `reference` this
    version of `train` records); CI never sets it.
    """
    reused = os.environ.get("SUPPORT_ROUTER_TEST_TRAINED_DIR")
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    model_dir = Path(reused) if reused else shared / "trained-model"
    policy_path = model_dir / "policy.json"
    with FileLock(shared / "trained-model.lock"):
        if not policy_path.exists():  # written last by `train_local`
            return train_local(
                DATASETS / "routes",
                model_dir,
                policy_path=policy_path,
                steering_data=DATASETS / "steering",
            )
    model_path = model_dir / MODEL_FILES["local"]
    sha = hashlib.sha256(model_path.read_bytes()).hexdigest()
    return TrainResult(model_path, policy_path, sha, load_policy(policy_path))


@pytest.fixture
def settings(tmp_path: Path, trained: TrainResult) -> Settings:
    """Settings on a fresh SQLite file, sharing the session's trained model."""
    return Settings(
        var_dir=tmp_path / "var",
        model_dir=trained.model_path.parent,
        policy_path=trained.policy_path,
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The real app (lifespan, middleware) on the test's settings."""
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def point_cli_at(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads settings from the environment: point it at `settings`' files (until
    the test ends; clear `get_settings`' cache again after it)."""
    for name, value in (
        ("VAR_DIR", settings.var_dir),
        ("MODEL_DIR", settings.model_dir),
        ("POLICY_PATH", settings.policy_path),
    ):
        monkeypatch.setenv(f"SUPPORT_ROUTER_{name}", str(value))
    get_settings.cache_clear()


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The CLI on the test's files."""
    point_cli_at(settings, monkeypatch)
    yield settings
    get_settings.cache_clear()

"""Fixtures for the handlers: a fresh seeded store per test, on SQLite (and PostgreSQL).

PostgreSQL tests use `SUPPORT_ROUTER_TEST_POSTGRES_URL` (default: the local server's
`test` database) and create a throw-away database per test; they are skipped when no
server answers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from handlers.desk import SupportDesk, build_desk
from router.db import make_engine
from tests.handlers.helpers import FIXTURE, TODAY

POSTGRES_URL = os.environ.get(
    "SUPPORT_ROUTER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'shop.db'}"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return sqlite_url(tmp_path)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def desk(engine: Engine) -> SupportDesk:
    return build_desk(engine, fixture_path=FIXTURE, today=TODAY)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    admin_url = make_url(POSTGRES_URL)
    try:
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server here"
        pytest.skip(f"no PostgreSQL at {admin_url.render_as_string(hide_password=True)}: {exc}")
    name = f"sr_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    return request.getfixturevalue("postgres_url")


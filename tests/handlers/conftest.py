"""Fixtures for the handlers: a fresh seeded store per test, on SQLite and on PostgreSQL.

`db_url` is `any_db_url` (tests/conftest.py), so every test that touches the database
through `engine` or `desk` runs on both backends; PostgreSQL runs are skipped with a
reason when no server answers (and fail under CI).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk, build_desk
from router.storage.db import make_engine, migrate
from tests.handlers.helpers import FIXTURE, TODAY


@pytest.fixture
def db_url(any_db_url: str) -> str:
    return any_db_url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    migrate(engine)  # as bootstrap does once at start: the handlers never migrate
    yield engine
    engine.dispose()


@pytest.fixture
def desk(engine: Engine) -> SupportDesk:
    return build_desk(engine, fixture_path=FIXTURE, today=TODAY)

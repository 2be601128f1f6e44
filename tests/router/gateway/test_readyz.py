"""`GET /readyz`: not ready until model and policy are loaded, the database answers and
its schema is at the newest migration.

A load balancer sends traffic only to ready instances, so a gateway whose database went
away must say so (503) rather than accept requests it cannot log or act on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine

from router.app.bootstrap import build_services
from router.gateway.app import create_app
from router.gateway.deps import Services
from router.settings import Settings
from router.storage.db import make_engine
from tests.conftest import sqlite_url
from tests.servers import free_port


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = build_services(settings)
    engine = built.engine
    yield built
    engine.dispose()


def _unreachable_postgres() -> Engine:
    return create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none",
                         connect_args={"connect_timeout": 2})


def _sqlite_in_a_missing_directory(tmp_path_str: str) -> Engine:
    return create_engine(f"sqlite:///{tmp_path_str}/no-such-dir/deeper/router.storage.db")


def test_ready_when_model_policy_and_database_are_there(services: Services) -> None:
    with TestClient(create_app(services.settings, services=services)) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready" and body["ready"] is True
    assert body["checks"] == {"model_and_policy": True, "database": True, "schema": True}


def test_not_ready_while_services_are_not_ready(services: Services) -> None:
    services.ready = False
    with TestClient(create_app(services.settings, services=services)) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["model_and_policy"] is False
        services.ready = True
        assert client.get("/readyz").status_code == 200
        assert client.get("/healthz").status_code == 200  # alive all along


@pytest.mark.parametrize("broken", ["postgres_closed_port", "sqlite_missing_directory"])
def test_not_ready_when_the_database_does_not_answer(
    services: Services, broken: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if broken == "postgres_closed_port":
        services.engine = _unreachable_postgres()
    else:
        services.engine = _sqlite_in_a_missing_directory(str(tmp_path_factory.mktemp("db")))
    with TestClient(create_app(services.settings, services=services)) as client:
        response = client.get("/readyz")
        assert client.get("/healthz").status_code == 200
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready" and body["ready"] is False
    assert body["checks"] == {"model_and_policy": True, "database": False, "schema": False}


def test_not_ready_on_a_database_that_answers_but_is_not_migrated(
    services: Services, tmp_path: Path
) -> None:
    """A database recreated empty answers `SELECT 1`, yet every request on it would fail."""
    services.engine = make_engine(sqlite_url(tmp_path / "empty"))
    try:
        with TestClient(create_app(services.settings, services=services)) as client:
            response = client.get("/readyz")
    finally:
        services.engine.dispose()
    assert response.status_code == 503
    body = response.json()
    assert body["checks"] == {"model_and_policy": True, "database": True, "schema": False}
    assert body["schema_revision"] is None

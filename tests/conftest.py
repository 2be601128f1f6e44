"""Shared fixtures: one embedded model trained per test session, fresh state per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.gateway.app import create_app
from router.settings import PROJECT_ROOT, Settings, get_settings
from router.training import TrainResult, train_local


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    model_dir = tmp_path_factory.mktemp("models")
    return train_local(
        PROJECT_ROOT / "datasets" / "routes", model_dir, policy_path=model_dir / "policy.json"
    )


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


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The CLI reads settings from the environment: point it at the test's files."""
    for name, value in (
        ("VAR_DIR", settings.var_dir),
        ("MODEL_DIR", settings.model_dir),
        ("POLICY_PATH", settings.policy_path),
    ):
        monkeypatch.setenv(f"SUPPORT_ROUTER_{name}", str(value))
    get_settings.cache_clear()
    yield settings
    get_settings.cache_clear()

"""Shared fixtures: one embedded model trained per test session, fresh state per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.settings import PROJECT_ROOT, Settings
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

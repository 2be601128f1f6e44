"""`support-router drift` over a real decision log, written by the real app.

Exit codes as documented in `router.cli.drift`: 0 quiet or too little traffic, 1 an error
(no reference, a bad --since), 4 drift.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from calibration.drift import with_reference
from router.app.training import TrainResult
from router.cli.drift import DRIFT_EXIT_CODE, parse_since
from router.cli.main import app
from router.errors import InvalidInput
from router.gateway.app import create_app
from router.models.local.model import LocalRouteModel
from router.settings import Settings, get_settings
from router.storage.policy_store import save_policy
from tests.conftest import point_cli_at
from tests.traffic import shifted_texts, split_halves

RUNNER = CliRunner()


def make_settings(tmp_path: Path, trained: TrainResult, monkeypatch: pytest.MonkeyPatch, *,
                  reference: bool) -> Settings:
    model_dir = tmp_path / "models"
    model_dir.mkdir()
    shutil.copy(trained.model_path, model_dir / trained.model_path.name)
    policy = trained.policy.model_copy(update={"version": "drift-cli", "reference": None})
    if reference:
        first, _ = split_halves()
        texts = [r.text for r in first]
        scores = LocalRouteModel.load(trained.model_path).score_batch(texts)
        policy = with_reference(policy, scores, texts, source="test split, first half")
    save_policy(policy, model_dir / "policy.json")
    settings = Settings(var_dir=tmp_path / "var", model_dir=model_dir,
                        policy_path=model_dir / "policy.json")
    point_cli_at(settings, monkeypatch)
    return settings


@pytest.fixture
def with_reference_settings(tmp_path: Path, trained: TrainResult,
                            monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    yield make_settings(tmp_path, trained, monkeypatch, reference=True)
    get_settings.cache_clear()


def send(settings: Settings, texts: list[str]) -> None:
    with TestClient(create_app(settings)) as client:
        for text in texts:
            assert client.post("/v1/route", json={"text": text}).status_code == 200


def test_shifted_traffic_exits_with_the_drift_code(with_reference_settings: Settings) -> None:
    send(with_reference_settings, shifted_texts())
    result = RUNNER.invoke(app, ["drift", "--since", "1h", "--json"])
    assert result.exit_code == DRIFT_EXIT_CODE, result.output
    report = json.loads(result.stdout)
    assert report["verdict"] == "drift" and report["policy_version"] == "drift-cli"
    assert report["n_recent"] == len(shifted_texts())
    by_feature = {f["feature"]: f for f in report["features"]}
    assert by_feature["length"]["status"] == "drift"
    assert by_feature["length"]["psi"] > 0.25

    table = RUNNER.invoke(app, ["drift", "--since", "1h"])
    assert table.exit_code == DRIFT_EXIT_CODE
    assert "verdict: drift" in table.stdout and "length" in table.stdout


def test_quiet_traffic_exits_0(with_reference_settings: Settings) -> None:
    _, second = split_halves()
    send(with_reference_settings, [r.text for r in second[:300]])
    result = RUNNER.invoke(app, ["drift", "--since", "24h"])
    assert result.exit_code == 0, result.output
    assert "verdict: ok" in result.stdout


def test_a_window_without_traffic_says_so_and_exits_0(
        with_reference_settings: Settings) -> None:
    send(with_reference_settings, shifted_texts()[:5])
    result = RUNNER.invoke(app, ["drift", "--since", "2999-01-01"])
    assert result.exit_code == 0, result.output
    assert "not_enough_traffic" in result.stdout


def test_a_policy_without_a_reference_is_an_error_that_says_what_to_do(
        tmp_path: Path, trained: TrainResult, monkeypatch: pytest.MonkeyPatch) -> None:
    make_settings(tmp_path, trained, monkeypatch, reference=False)
    try:
        result = RUNNER.invoke(app, ["drift"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 1
    assert "error (no_drift_reference)" in result.stderr
    assert "run calibrate to record one" in result.stderr


def test_since_takes_durations_and_iso_times() -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert parse_since("24h", now=now) == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_since("90m", now=now) == datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    assert parse_since("7d", now=now) == datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_since("2026-12-01T08:00:00", now=now) == datetime(2026, 12, 1, 8,
                                                                   tzinfo=UTC)
    with pytest.raises(InvalidInput) as caught:
        parse_since("yesterday", now=now)
    assert caught.value.code == "bad_since"
    bad = RUNNER.invoke(app, ["drift", "--since", "yesterday"])
    assert bad.exit_code == 1 and "error (bad_since)" in bad.stderr

"""score → calibrate → report → the gateway publishes the policy → decisions carry it →
rollback, through the real CLI, real files and the real app."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from router.app.training import TrainResult
from router.cli.main import app
from router.contracts import Policy
from router.gateway.app import create_app
from router.settings import Settings, get_settings
from router.storage.policy_store import load_policy
from tests.conftest import point_cli_at
from tests.paths import DATASETS

RUNNER = CliRunner()
ROUTES_DATA = DATASETS / "routes"


@pytest.fixture
def own_settings(tmp_path: Path, trained: TrainResult, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[Settings]:
    """A private copy of the trained model and policy: publishing rewrites the policy file."""
    model_dir = tmp_path / "models"
    model_dir.mkdir()
    shutil.copy(trained.model_path, model_dir / trained.model_path.name)
    shutil.copy(trained.policy_path, model_dir / "policy.json")
    settings = Settings(var_dir=tmp_path / "var", model_dir=model_dir,
                        policy_path=model_dir / "policy.json")
    point_cli_at(settings, monkeypatch)
    yield settings
    get_settings.cache_clear()


def _cli(*args: str) -> str:
    result = RUNNER.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_score_calibrate_report_publish_rollback(own_settings: Settings, tmp_path: Path) -> None:
    predictions, new_policy = tmp_path / "pred.jsonl", tmp_path / "policy-new.json"
    _cli("score", "--data", str(ROUTES_DATA), "--out", str(predictions))
    assert "0 calls" in _cli("score", "--data", str(ROUTES_DATA), "--out", str(predictions),
                             "--dry-run")
    output = _cli("calibrate", "--predictions", str(predictions), "--labels", str(ROUTES_DATA),
                  "--alpha", "0.15", "--delta", "0.05", "--recalibrate", "temperature",
                  "--n-boot", "200", "--out", str(new_policy))
    assert "training split left out" in output and "Clopper-Pearson" in output
    policy = load_policy(new_policy)
    original = load_policy(own_settings.policy_path)
    assert policy.model == original.model and policy.guarantee.upper_bound <= 0.15
    assert policy.calibrator.kind == "temperature"
    _cli("report", "--predictions", str(predictions), "--labels", str(ROUTES_DATA),
         "--policy", str(new_policy), "--out", str(tmp_path / "report"), "--n-boot", "100")
    assert (tmp_path / "report" / "index.html").exists()
    assert (tmp_path / "report" / "risk_coverage.png").exists()

    text = {"text": "my kettle arrived broken, please refund order O-1001"}
    with TestClient(create_app(own_settings)) as client:
        assert client.post("/v1/route", json=text).json()["policy_version"] == original.version
        published = client.post("/v1/admin/policy", json=json.loads(new_policy.read_text()))
        assert published.status_code == 200, published.text
        assert published.json() == {"action": "publish", "version": policy.version,
                                    "previous_version": original.version,
                                    "threshold": policy.threshold}
        decision = client.post("/v1/route", json=text).json()
        assert (decision["policy_version"], decision["threshold"]) == (policy.version,
                                                                       policy.threshold)
        assert load_policy(own_settings.policy_path).version == policy.version

        foreign = json.loads(new_policy.read_text())
        foreign["version"], foreign["model"]["artifact_sha"] = "foreign", "0" * 64
        refused = client.post("/v1/admin/policy", json=foreign)
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "policy_model_mismatch"
        assert client.post("/v1/route", json=text).json()["policy_version"] == policy.version

        rolled = client.post("/v1/admin/policy/rollback")
        assert rolled.status_code == 200, rolled.text
        assert rolled.json()["version"] == original.version
        assert client.post("/v1/route", json=text).json()["policy_version"] == original.version
        again = client.post("/v1/admin/policy/rollback")
        assert (again.status_code, again.json()["error"]["code"]) == (409, "no_previous_policy")
        logged = [row["policy_version"] for row in client.app.state.services.router._log.rows()]
    assert logged == [original.version, policy.version, policy.version, original.version]
    assert load_policy(own_settings.policy_path) == original


def test_cli_rollback_then_gateway_reload(own_settings: Settings, tmp_path: Path) -> None:
    original = load_policy(own_settings.policy_path)
    newer = original.model_copy(update={"version": "hand-v2", "threshold": 0.99})
    path = tmp_path / "hand.json"
    path.write_text(newer.model_dump_json())
    assert "active policy: hand-v2" in _cli("policy", "publish", str(path))
    with TestClient(create_app(own_settings)) as client:
        assert client.post("/v1/route", json={"text": "refund"}).json()["threshold"] == 0.99
        assert f"active policy {original.version}" in _cli("policy", "rollback")
        reloaded = client.post("/v1/admin/policy/reload").json()
        assert (reloaded["version"], reloaded["previous_version"]) == (original.version,
                                                                       "hand-v2")
        assert client.post("/v1/route", json={"text": "refund"}).json()["policy_version"] == (
            original.version)
    history = _cli("policy", "history")
    assert [line.split()[1] for line in history.strip().splitlines()] == [
        "adopt", "publish", "rollback"]
    assert isinstance(Policy.model_validate_json(path.read_text()), Policy)

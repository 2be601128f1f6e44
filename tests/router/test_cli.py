from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from router.cli import app
from router.contracts import Policy, PolicyModel
from router.policy import save_policy
from router.settings import Settings, get_settings

RUNNER = CliRunner()
TINY = [
    {"text": "My teapot arrived smashed, please give me my money back", "label": "refund"},
    {"text": "Please unsubscribe me from your marketing newsletter", "label": "account"},
    {"text": "Do you ship to Malta? How much is delivery?", "label": "other"},
    {"text": "Do you ship to Norway and what does it cost?", "label": "refund"},  # mislabelled
]


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("SUPPORT_ROUTER_MODEL_DIR", str(settings.model_dir))
    monkeypatch.setenv("SUPPORT_ROUTER_POLICY_PATH", str(settings.policy_path))
    get_settings.cache_clear()
    yield settings
    get_settings.cache_clear()


def test_eval_json_by_hand(cli_env: Settings, tmp_path: Path) -> None:
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in TINY))
    policy = tmp_path / "policy.json"
    save_policy(Policy(version="hand", model=PolicyModel(backend="local", name="x"),
                       threshold=0.0), policy)
    result = RUNNER.invoke(app, ["eval", "--data", str(data), "--policy", str(policy), "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    # Threshold 0: every non-unclear choice routes. Choices refund, account, other, other.
    assert metrics["n"] == 4
    assert metrics["accuracy"] == pytest.approx(3 / 4)
    assert metrics["misroute_rate_routed"] == pytest.approx(1 / 4)
    assert metrics["misroute_rate"] == pytest.approx(1 / 4)
    assert metrics["coverage"] == pytest.approx(1.0)
    assert metrics["clarify_rate"] == pytest.approx(0.0)
    assert metrics["correct_outcome_rate"] == pytest.approx(3 / 4)
    assert metrics["per_route"]["refund"] == {"precision": 1.0, "recall": 0.5, "n": 2}
    assert metrics["per_route"]["other"]["precision"] == pytest.approx(0.5)
    assert metrics["policy_version"] == "hand"


def test_route_command(cli_env: Settings) -> None:
    result = RUNNER.invoke(app, ["route", "stop sending me marketing emails", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scores"]["choice"] == "account"


def test_eval_reports_bad_data_clearly(cli_env: Settings, tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"text": "hi", "label": "refunds"}\n')
    result = RUNNER.invoke(app, ["eval", "--data", str(data)])
    assert result.exit_code == 1
    assert "bad_label_row" in result.output

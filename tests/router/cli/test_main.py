from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from router.app.training import MODEL_FILES, STAGES
from router.cli.main import app
from router.contracts import Policy, PolicyModel
from router.settings import Settings
from router.storage.policy_store import load_policy, save_policy
from tests.paths import REPO_ROOT

RUNNER = CliRunner()
TINY = [
    {"text": "My teapot arrived smashed, please give me my money back", "label": "refund"},
    {"text": "Please unsubscribe me from your marketing newsletter", "label": "account"},
    {"text": "Do you ship to Malta? How much is delivery?", "label": "other"},
    {"text": "Do you ship to Norway and what does it cost?", "label": "refund"},  # mislabelled
    {"text": "refund the kettle and change my address to 5 Elm St", "label": "unclear"},
    {"text": "help", "label": "unclear"},
]


def _expected_by_hand(predictions: list[dict], threshold: float) -> dict:
    """The eval definitions written out with plain loops, independent of calibration.metrics."""
    labels = [row["label"] for row in TINY]
    choices = [p["choice"] for p in predictions]
    routed = [
        c != "unclear" and p["confidence"] >= threshold
        for c, p in zip(choices, predictions, strict=True)
    ]
    misroutes = sum(r and c != y for r, c, y in zip(routed, choices, labels, strict=True))
    correct = sum(r and c == y for r, c, y in zip(routed, choices, labels, strict=True))
    needed = sum(not r and y == "unclear" for r, y in zip(routed, labels, strict=True))
    clear = [y != "unclear" for y in labels]
    return {
        "accuracy": sum(c == y for c, y in zip(choices, labels, strict=True)) / len(labels),
        "misroute_rate_routed": misroutes / max(sum(routed), 1),
        "misroute_rate": misroutes / len(labels),
        "coverage": sum(r and k for r, k in zip(routed, clear, strict=True)) / sum(clear),
        "clarify_rate": routed.count(False) / len(labels),
        "unclear_recall": needed / labels.count("unclear"),
        "correct_outcome_rate": (correct + needed) / len(labels),
    }


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_eval_json_matches_hand_computed_metrics(
    cli_env: Settings, tmp_path: Path, threshold: float
) -> None:
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in TINY))
    policy = tmp_path / "policy.json"
    predictions = tmp_path / "predictions.jsonl"
    save_policy(
        Policy(version="hand", model=PolicyModel(backend="local", name="x"), threshold=threshold),
        policy,
    )
    result = RUNNER.invoke(
        app,
        [
            "eval",
            "--data",
            str(data),
            "--policy",
            str(policy),
            "--json",
            "--predictions-out",
            str(predictions),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert metrics["n"] == len(TINY) == len(rows)
    for key, value in _expected_by_hand(rows, threshold).items():
        assert metrics[key] == pytest.approx(value), key
    assert metrics["policy_version"] == "hand"
    assert metrics["threshold"] == threshold


def test_eval_refuses_a_policy_made_for_another_artifact(
    cli_env: Settings, tmp_path: Path
) -> None:
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in TINY))
    policy = tmp_path / "policy.json"
    other = PolicyModel(backend="local", name="local-tfidf-lr@0000", artifact_sha="0" * 64)
    save_policy(Policy(version="elsewhere", model=other, threshold=0.5), policy)
    result = RUNNER.invoke(app, ["eval", "--data", str(data), "--policy", str(policy)])
    assert result.exit_code == 1
    assert "policy_model_mismatch" in result.output and "elsewhere" in result.output


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


# Enough rows of every class (refund, account, other, both kinds of unclear) to cross-fit.
SMALL_TRAINING_SET = ("en_clear", "short_and_vague", "other_variety", "refund_variety",
                      "account_variety", "two_requests_shapes", "unclear_variety")


def test_train_reports_each_stage_on_a_pipe_and_writes_model_and_policy(
    tmp_path: Path,
) -> None:
    data = tmp_path / "small.jsonl"
    routes = REPO_ROOT / "datasets" / "routes"
    data.write_text("".join(
        line + "\n"
        for name in SMALL_TRAINING_SET
        for line in (routes / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:25]
    ), encoding="utf-8")
    out = tmp_path / "models"
    result = RUNNER.invoke(app, ["train", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    # stderr is not a terminal here: one "[elapsed] done/total stage" line per stage.
    lines = result.stderr.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        f"{done}/3 {stage}" for done, stage in enumerate([*STAGES["local"], "done"])
    ]
    assert all(line.startswith("[") and "s] " in line for line in lines)
    policy = load_policy(out / "policy.json")
    assert policy.model.backend == "local" and (out / MODEL_FILES["local"]).exists()
    assert f"threshold {policy.threshold:.2f}" in result.stdout

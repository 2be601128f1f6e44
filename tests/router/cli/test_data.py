"""The data team's commands through the real CLI (CliRunner) on real files."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from calibration.data import load_labelled
from router.cli.main import app
from router.contracts import ROUTES, Decision, RouteScores
from router.models.typesafe import question_sha
from router.settings import Settings, get_settings
from router.storage.db import make_engine, migrate
from router.storage.decision_log import DecisionLog
from router.storage.policy_db import PolicyDB
from tests.calibration.test_calibrate import synthetic

RUNNER = CliRunner()
MODEL = f"typesafe:jev-test@{question_sha()[:8]}"


def _write(
    tmp_path: Path,
    n: int,
    *,
    seed: int = 0,
    model: str = MODEL,
    labels_override: np.ndarray | None = None,
    tag: str = "",
) -> tuple[Path, Path]:
    ids, labels, probs = synthetic(n, seed=seed)
    labels = labels if labels_override is None else labels_override
    label_path, pred_path = tmp_path / f"labels{tag}.jsonl", tmp_path / f"pred{tag}.jsonl"
    label_path.write_text(
        "".join(
            json.dumps({"id": i, "text": f"synthetic request {i}", "label": y}) + "\n"
            for i, y in zip(ids, labels, strict=True)
        )
    )
    pred_path.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "probabilities": dict(zip(ROUTES, p.tolist(), strict=True)),
                    "model": model,
                    "question_sha": question_sha(),
                }
            )
            + "\n"
            for i, p in zip(ids, probs, strict=True)
        )
    )
    return label_path, pred_path


def _run(*args: object) -> tuple[int, str]:
    result = RUNNER.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_calibrate_then_check_holds_and_then_fails(cli_env: Settings, tmp_path: Path) -> None:
    labels, preds = _write(tmp_path, 4000)
    policy = tmp_path / "policy.json"
    code, out = _run(
        "calibrate",
        "--predictions",
        preds,
        "--labels",
        labels,
        "--alpha",
        0.1,
        "--cost-misroute",
        10,
        "--cost-clarify",
        1,
        "--n-boot",
        100,
        "--out",
        policy,
    )
    assert code == 0, out
    written = json.loads(policy.read_text())
    assert written["model"] == {
        "backend": "typesafe",
        "name": MODEL,
        "artifact_sha": question_sha(),
    }
    assert set(written) >= {
        "version",
        "created_at",
        "model",
        "calibrator",
        "threshold",
        "min_margin",
        "guarantee",
        "data",
        "metrics_test",
    }
    new_labels, new_preds = _write(tmp_path, 3000, seed=7, tag="-new")
    code, out = _run(
        "check", "--policy", policy, "--predictions", new_preds, "--labels", new_labels
    )
    assert code == 0, out
    assert "still holds" in out
    ids, truth, probs = synthetic(3000, seed=7)
    routed = (probs.argmax(axis=1) != 3) & (
        (probs.max(axis=1) - 0.25) / 0.75 >= written["threshold"]
    )
    drifted = np.where(routed & (np.arange(3000) % 4 == 0), "unclear", truth)  # 25% misroutes
    bad_labels, bad_preds = _write(tmp_path, 3000, seed=7, labels_override=drifted, tag="-bad")
    code, out = _run(
        "check", "--policy", policy, "--predictions", bad_preds, "--labels", bad_labels
    )
    assert code == 1 and "no longer holds" in out and "too many for a rate of 0.1" in out
    other_labels, other_preds = _write(
        tmp_path, 3000, seed=7, model="typesafe:other@x", tag="-other"
    )
    code, out = _run(
        "check", "--policy", policy, "--predictions", other_preds, "--labels", other_labels
    )
    assert "warning: predictions come from model 'typesafe:other@x'" in out


@pytest.mark.parametrize(
    ("extra", "exit_code", "message"),
    [
        (["--alpha", "0.001"], 1, "error (no_certified_threshold)"),
        (["--alpha", "0.1", "--recalibrate", "isotonic"], 1,
         "isotonic recalibration needs at least"),
        (["--alpha", "0.1", "--cost-misroute", "5"], 2, "give both or neither"),
        (["--alpha", "0.1", "--recalibrate", "platt"], 2,
         "'platt' is not one of 'none', 'temperature', 'isotonic'"),
    ],
)
def test_calibrate_refusals(
    cli_env: Settings, tmp_path: Path, extra: list[str], exit_code: int, message: str
) -> None:
    labels, preds = _write(tmp_path, 2000)
    out_path = tmp_path / "policy.json"
    code, out = _run(
        "calibrate", "--predictions", preds, "--labels", labels, "--out", out_path, *extra
    )
    assert code == exit_code and message in " ".join(out.split())
    assert not out_path.exists()


def test_score_dry_run_on_typesafe_makes_no_call(cli_env: Settings, tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(
        '{"id": "x1", "text": "refund my kettle", "label": "refund"}\n'
        '{"id": "x2", "text": "refund my kettle", "label": "refund"}\n'
    )
    code, out = _run(
        "score",
        "--data",
        data,
        "--backend",
        "typesafe",
        "--model",
        "jev-small",
        "--out",
        tmp_path / "p.jsonl",
        "--dry-run",
    )
    assert code == 0, out
    assert "2 rows, 1 distinct texts, 0 cached: 1 calls to typesafe:jev-small@" in out


def test_agreement_command(tmp_path: Path) -> None:
    a, b = tmp_path / "ana.jsonl", tmp_path / "bo.jsonl"
    a.write_text(
        '{"id": "1", "text": "t1", "label": "refund"}\n'
        '{"id": "2", "text": "t2", "label": "account"}\n'
    )
    b.write_text(
        '{"id": "1", "text": "t1", "label": "refund"}\n'
        '{"id": "2", "text": "t2", "label": "unclear"}\n'
    )
    code, out = _run("agreement", a, b)
    assert code == 0 and "raw agreement 0.500" in out and "2: ana=account bo=unclear" in out


def test_export_redacted_then_label_without_a_terminal(cli_env: Settings, tmp_path: Path) -> None:
    log = DecisionLog(make_engine(cli_env.resolved_database_url))
    log.create_schema()
    scores = RouteScores.from_probabilities(
        "m", {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1}
    )
    for i, text in enumerate(["refund O-1001, it cost $48", "mail ana@example.com please"]):
        log.append(
            Decision(
                request_id=f"q{i}",
                route="refund",
                scores=scores,
                threshold=0.5,
                policy_version="v",
                reason="confident",
                model="m",
                created_at=datetime(2026, 3, 10 + i, tzinfo=UTC),
            ),
            text=text,
        )
    export = tmp_path / "export.jsonl"
    code, out = _run("export-decisions", "--since", "2026-03-11", "--redact", "--out", export)
    assert code == 0 and "exported 1 requests" in out
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert [(r["id"], r["text"]) for r in rows] == [("q1", "mail [email] please")]
    code, out = _run("export-decisions", "--redact", "--out", export)
    labels = tmp_path / "labels.jsonl"
    result = RUNNER.invoke(
        app,
        [
            "label",
            "--input",
            str(export),
            "--out",
            str(labels),
            "--annotator",
            "bo",
            "--sample",
            "uncertainty",
        ],
        input="a\nq\n",
    )
    assert result.exit_code == 0, result.output
    assert [(r.id, r.label) for r in load_labelled(labels)] == [("q0", "account")]
    direct = tmp_path / "direct.jsonl"
    result = RUNNER.invoke(
        app,
        [
            "label",
            "--from-decisions",
            "--since",
            "2026-03-11",
            "--out",
            str(direct),
            "--annotator",
            "bo",
        ],
        input="u\n",
    )
    assert result.exit_code == 0, result.output
    assert [(r.id, r.label, r.text) for r in load_labelled(direct)] == [
        ("q1", "unclear", "mail ana@example.com please")
    ]
    code, out = _run("label", "--out", labels, "--annotator", "bo")
    assert code == 2 and "exactly one of --input FILE or --from-decisions" in out


def _policy_file(path: Path, version: str, calibrator: dict[str, object]) -> Path:
    path.write_text(json.dumps({"version": version, "threshold": 0.5, "calibrator": calibrator,
                                "model": {"backend": "local", "name": "local-m"}}))
    return path


@pytest.fixture
def policy_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicyDB]:
    """The CLI's policy commands on the test's own database (SUPPORT_ROUTER_VAR_DIR)."""
    monkeypatch.setenv("SUPPORT_ROUTER_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("SUPPORT_ROUTER_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    engine = make_engine(get_settings().resolved_database_url)
    migrate(engine)
    yield PolicyDB(engine)
    engine.dispose()
    get_settings.cache_clear()


def test_policy_publish_refuses_an_invalid_artifact_and_changes_nothing(
        tmp_path: Path, policy_db: PolicyDB) -> None:
    (tmp_path / "models").mkdir()
    active = _policy_file(tmp_path / "models" / "policy.json", "trained", {"kind": "none"})
    before = active.read_bytes()
    bad = _policy_file(tmp_path / "bad.json", "v2", {"kind": "temperature", "params": {}})
    result = RUNNER.invoke(app, ["policy", "publish", str(bad), "--policy-path", str(active)])
    assert result.exit_code == 1
    assert "error (invalid_policy)" in result.output
    assert "field 'calibrator.params'" in result.output
    assert active.read_bytes() == before
    assert (policy_db.history(), policy_db.active_version()) == ([], None)


def test_policy_publish_replaces_a_broken_active_file(tmp_path: Path,
                                                      policy_db: PolicyDB) -> None:
    (tmp_path / "models").mkdir()
    active = _policy_file(tmp_path / "models" / "policy.json", "trained",
                          {"kind": "temperature", "params": {"temperature": 0}})
    good = _policy_file(tmp_path / "good.json", "v2",
                        {"kind": "temperature", "params": {"temperature": 1.5}})
    result = RUNNER.invoke(app, ["policy", "publish", str(good), "--policy-path", str(active)])
    assert result.exit_code == 0, result.output
    assert "active policy: v2 (was None)" in result.output
    assert json.loads(active.read_text())["version"] == "v2"
    assert policy_db.stack() == ["v2"]  # the broken file is not kept as a version


def test_policy_publish_rollback_and_history_work_on_the_database(
        tmp_path: Path, policy_db: PolicyDB) -> None:
    (tmp_path / "models").mkdir()
    active = _policy_file(tmp_path / "models" / "policy.json", "trained", {"kind": "none"})
    good = _policy_file(tmp_path / "good.json", "v2", {"kind": "none"})
    published = RUNNER.invoke(app, ["policy", "publish", str(good), "--policy-path",
                                    str(active)])
    assert "active policy: v2 (was trained)" in published.output, published.output
    assert policy_db.active_version() == "v2"
    rolled_back = RUNNER.invoke(app, ["policy", "rollback", "--policy-path", str(active)])
    assert "rolled back: active policy trained (was v2)" in rolled_back.output, \
        rolled_back.output
    assert policy_db.active_version() == "trained"
    assert json.loads(active.read_text())["version"] == "trained"
    history = RUNNER.invoke(app, ["policy", "history"])
    assert [line.split()[1:3] for line in history.output.splitlines()] == [
        ["adopt", "trained"], ["publish", "v2"], ["rollback", "trained"]]
    who = f"by cli:{getpass.getuser()})"
    assert [line.endswith(who) for line in history.output.splitlines()] == [False, True, True]

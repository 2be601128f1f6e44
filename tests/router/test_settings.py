"""Where state goes: the data dir from settings, never the package's own folder.

Every test starts from an environment without `SUPPORT_ROUTER_*` variables and in a
fresh working directory, as an operator's shell would be.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import router
from router.app.training import TrainResult
from router.cli.main import app as cli
from router.gateway.app import create_app
from router.packaged import data_path, data_root
from router.settings import Settings, get_settings, keep_caches_in_var_dir
from tests.messages import ANA, TEAPOT
from tests.paths import DATASETS

PACKAGE_DIR = Path(router.__file__).resolve().parent
STATE_PATHS = ("var_dir", "model_dir", "policy_path", "e5_policy_path", "typesafe_policy_path")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No SUPPORT_ROUTER_* variables, and an empty working directory."""
    for name in list(os.environ):
        if name.startswith("SUPPORT_ROUTER_"):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    get_settings.cache_clear()
    yield work
    get_settings.cache_clear()


def test_state_defaults_to_the_working_directory(clean_env: Path) -> None:
    settings = Settings()
    assert settings.data_dir == clean_env
    assert settings.var_dir == clean_env / "var"
    assert settings.model_dir == clean_env / "models"
    assert settings.policy_path == clean_env / "models" / "policy.json"
    assert settings.e5_policy_path == clean_env / "models" / "policy-e5.json"
    assert settings.typesafe_policy_path == clean_env / "models" / "policy-typesafe.json"
    assert settings.resolved_database_url == (
        f"sqlite:///{clean_env / 'var' / 'support-router.storage.db'}")
    for name in STATE_PATHS:
        assert not getattr(settings, name).is_relative_to(PACKAGE_DIR), name


def test_the_data_dir_setting_moves_every_relative_path(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "srv" / "router"
    monkeypatch.setenv("SUPPORT_ROUTER_DATA_DIR", str(elsewhere))
    monkeypatch.setenv("SUPPORT_ROUTER_VAR_DIR", "state")
    monkeypatch.setenv("SUPPORT_ROUTER_ROUTES_DATA", "labels/routes")
    monkeypatch.setenv("SUPPORT_ROUTER_STORE_FIXTURE", str(tmp_path / "shop.json"))
    settings = Settings()
    assert settings.data_dir == elsewhere
    assert settings.var_dir == elsewhere / "state"
    assert settings.model_dir == elsewhere / "models"
    assert settings.routes_data == elsewhere / "labels" / "routes"  # the operator's own data
    assert settings.store_fixture == tmp_path / "shop.json"  # absolute: kept as given


def test_a_relative_data_dir_is_taken_from_the_working_directory(clean_env: Path) -> None:
    settings = Settings(data_dir=Path("gateway-a"))
    assert settings.data_dir == clean_env / "gateway-a"
    assert settings.var_dir == clean_env / "gateway-a" / "var"


def test_the_policies_follow_the_model_dir_unless_given(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORT_ROUTER_MODEL_DIR", str(tmp_path / "trained"))
    settings = Settings()
    assert settings.policy_path == tmp_path / "trained" / "policy.json"
    assert settings.e5_policy_path == tmp_path / "trained" / "policy-e5.json"
    monkeypatch.setenv("SUPPORT_ROUTER_POLICY_PATH", "policies/week12.json")
    settings = Settings()
    assert settings.policy_path == clean_env / "policies" / "week12.json"  # the data dir's
    assert settings.e5_policy_path == tmp_path / "trained" / "policy-e5.json"


def test_the_data_defaults_are_the_shipped_files(clean_env: Path) -> None:
    settings = Settings()
    assert settings.routes_data == data_path("routes")
    assert settings.steering_data == data_path("steering")
    assert settings.store_fixture == data_path("store", "fixture.json")
    assert any(settings.routes_data.glob("*.jsonl"))
    assert any(settings.steering_data.glob("*.jsonl"))
    assert settings.store_fixture.is_file()
    for parts in (("faq", "faq.json"), ("faq", "questions.jsonl"),
                  ("tasks", "support16.jsonl"), ("LABELLING.md",)):
        assert data_path(*parts).is_file(), parts


def test_a_checkout_reads_its_own_datasets_folder() -> None:
    """The shipped data in a source checkout is the folder developers edit."""
    assert data_root() == DATASETS


def test_numba_caches_its_kernels_under_var_unless_told_otherwise(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")  # so that the variable is restored afterwards
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    keep_caches_in_var_dir(Settings())
    assert os.environ["NUMBA_CACHE_DIR"] == str(clean_env / "var" / "numba-cache")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "operator-cache"))
    keep_caches_in_var_dir(Settings())
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "operator-cache")


def _gateway_in(folder: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    folder.mkdir()
    monkeypatch.chdir(folder)
    return TestClient(create_app(Settings()))


def test_two_gateways_started_in_two_folders_share_no_state(
    clean_env: Path, trained: TrainResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both run the same model; each keeps its own database under its own folder."""
    monkeypatch.setenv("SUPPORT_ROUTER_MODEL_DIR", str(trained.model_path.parent))
    monkeypatch.setenv("SUPPORT_ROUTER_POLICY_PATH", str(trained.policy_path))
    with _gateway_in(clean_env / "a", monkeypatch) as a, \
            _gateway_in(clean_env / "b", monkeypatch) as b:
        message = {"text": TEAPOT, "kind": "refund", "customer": ANA}
        first = a.post("/v1/messages", json=message).json()
        second = b.post("/v1/messages", json=message).json()
        # A shared store would replay the first refund; each store issues its own.
        for body in (first, second):
            assert body["status"] == "resolved"
            assert "It has been issued (refund 2)" in body["reply"]
        assert a.get(f"/v1/cases/{first['case_id']}").status_code == 200
        assert b.get(f"/v1/cases/{first['case_id']}").status_code == 404
    for folder in ("a", "b"):
        assert (clean_env / folder / "var" / "support-router.storage.db").is_file()
    assert not (clean_env / "var").exists()


def test_the_cli_keeps_state_in_the_folder_it_runs_in(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    for folder in ("a", "b"):
        (clean_env / folder).mkdir()
        monkeypatch.chdir(clean_env / folder)
        get_settings.cache_clear()
        result = runner.invoke(cli, ["approvals", "list"])
        assert result.exit_code == 0, result.output
        assert "no refunds in that state" in result.output
        assert (clean_env / folder / "var" / "support-router.storage.db").is_file()
    assert not (clean_env / "var").exists()

"""`support-router experiment start | stop | show` on the database the settings name: the
same refusals as the admin API (nothing written), recorded as `cli:<user>`."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from router.cli.main import app
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.experiment_db import ExperimentDB

RUNNER = CliRunner()


def _write(tmp_path: Path, name: str, **changes: Any) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "salt": "s",
                                "variants": [{"name": "a"}, {"name": "b"}], **changes}))
    return path


def _history(settings: Settings) -> list[Any]:
    engine = make_engine(settings.resolved_database_url)
    try:
        return ExperimentDB(engine).history()
    finally:
        engine.dispose()


def test_start_show_stop(cli_env: Settings, tmp_path: Path) -> None:
    started = RUNNER.invoke(app, ["experiment", "start", "--file", str(_write(tmp_path, "e1"))])
    assert started.exit_code == 0, started.output
    assert "started: e1" in started.output and "a 50%, b 50%" in started.output

    again = RUNNER.invoke(app, ["experiment", "start", "--file", str(_write(tmp_path, "e2"))])
    assert again.exit_code == 1
    assert "error (experiment_running)" in again.output

    shown = RUNNER.invoke(app, ["experiment", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.stdout)
    assert body["running"]["name"] == "e1"
    assert body["running"]["started_by"] == f"cli:{getpass.getuser()}"

    stopped = RUNNER.invoke(app, ["experiment", "stop", "e1"])
    assert stopped.exit_code == 0, stopped.output
    assert [r.status for r in _history(cli_env)] == ["stopped"]
    assert "running: none" in RUNNER.invoke(app, ["experiment", "show"]).output


def test_a_start_that_does_not_load_writes_nothing(cli_env: Settings, tmp_path: Path) -> None:
    broken = _write(tmp_path, "e1", variants=[{"name": "a", "model": str(tmp_path / "no")}])
    result = RUNNER.invoke(app, ["experiment", "start", "--file", str(broken)])
    assert result.exit_code == 1
    assert "error (invalid_variant): variant 'a' does not load" in result.output
    invalid = _write(tmp_path, "e2", variants=[])
    result = RUNNER.invoke(app, ["experiment", "start", "--file", str(invalid)])
    assert result.exit_code == 1
    assert "error (invalid_experiment)" in result.output and "field 'variants'" in result.output
    unknown = RUNNER.invoke(app, ["experiment", "stop", "e1"])
    assert unknown.exit_code == 1 and "error (unknown_experiment)" in unknown.output
    assert _history(cli_env) == []

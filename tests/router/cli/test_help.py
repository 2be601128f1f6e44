"""Every command's `--help`: literal text, plain flags, choices, and nothing heavy imported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any, get_args

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from calibration.label import Sample
from handlers.fallback.handoffs import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from handlers.services.refunds import ApprovalFilter, SupervisorDecision
from router.access import ROLES
from router.app.tasks import SENDERS
from router.app.training import MODEL_FILES
from router.cli import choices
from router.cli.main import app
from router.contracts import Backend, CalibratorKind
from tests.paths import REPO_ROOT

RUNNER = CliRunner()
HEAVY = ("numpy", "sklearn", "scipy", "fastapi", "sqlalchemy", "numba")


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under `command`, as the words that reach it."""
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        paths.extend(_command_paths(sub, (*prefix, name)))
    return paths


ROOT = get_command(app)
COMMANDS = _command_paths(ROOT)


def _command(path: tuple[str, ...]) -> Any:
    command: Any = ROOT
    for name in path:
        command = command.commands[name]
    return command


def test_every_command_group_is_walked() -> None:
    assert {("train",), ("policy", "publish"), ("approvals", "decide"), ("handoffs", "reply"),
            ("keys", "new"), ("faq-eval",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "support-router")
def test_help_shows_flags_without_a_value_placeholder(path: tuple[str, ...]) -> None:
    result = RUNNER.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    command = _command(path)
    flags = [opt for param in command.get_params(typer.Context(command))
             if getattr(param, "is_flag", False) for opt in param.opts]
    assert "--help" in flags
    for flag in flags:
        # The flag, then its help text (or a line break): never a value placeholder.
        assert re.search(rf"^ +{re.escape(flag)}(  |\n)", result.output, re.M), flag


def test_train_help_shows_the_e5_extra_literally() -> None:
    result = RUNNER.invoke(app, ["train", "--help"])
    assert "needs the [e5] extra" in result.output
    assert "--backend <local|e5>" in result.output


@pytest.mark.parametrize(
    ("path", "option"),
    [
        (["report"], "--part <test|all>"),
        (["eval"], "--backend <local|e5|typesafe|cascade>"),
        (["score"], "--backend <local|e5|typesafe>"),
        (["calibrate"], "--recalibrate <none|temperature|isotonic>"),
        (["label"], "--sample <random|uncertainty|disagreement|stratified|drifted>"),
        (["approvals", "list"], "--status <held|approved|rejected|closed|all>"),
        (["approvals", "decide"], "decision <approve|reject>"),
        (["keys", "new"], "--role <gateway|agent|supervisor|labeller|admin>"),
        (["label"], "--since <date>"),
        (["compare"], "--n-boot <int>"),
    ],
)
def test_enumerated_options_show_their_choices(path: list[str], option: str) -> None:
    assert option in RUNNER.invoke(app, [*path, "--help"]).output


def test_the_command_list_shows_whole_first_sentences() -> None:
    listed = RUNNER.invoke(app, ["--help"]).output.split("Commands:")[1]
    listed = " ".join(listed.split())
    assert "Start the HTTP gateway (trains the embedded model first if it is missing)." in listed
    assert "..." not in listed


@pytest.mark.parametrize(
    ("cli", "owner"),
    [
        (get_args(choices.Backend), get_args(Backend)),
        (get_args(choices.ScoreBackend), tuple(b for b in get_args(Backend) if b != "cascade")),
        (get_args(choices.TrainBackend), tuple(MODEL_FILES)),
        (get_args(choices.CalibratorKind), get_args(CalibratorKind)),
        (get_args(choices.Sample), get_args(Sample)),
        (get_args(choices.ApprovalFilter), get_args(ApprovalFilter)),
        (get_args(choices.SupervisorDecision), get_args(SupervisorDecision)),
        (get_args(choices.Sender), SENDERS),
        ((choices.HANDOFF_PAGE_SIZE, choices.HANDOFF_MAX_PAGE_SIZE),
         (DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)),
        (tuple(role.value for role in choices.Role), ROLES),
    ],
)
def test_the_cli_choices_are_their_owners_values(
    cli: tuple[str, ...], owner: tuple[str, ...]
) -> None:
    assert cli == owner


RENDER_EVERY_HELP = """
import json, sys
from typer.main import get_command
from router.cli.main import app

def walk(command, ctx):
    command.get_help(ctx)
    for name, sub in getattr(command, "commands", {}).items():
        walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True))

root = get_command(app)
walk(root, root.make_context("support-router", [], resilient_parsing=True))
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_building_the_app_and_rendering_every_help_imports_nothing_heavy() -> None:
    # A fresh interpreter: this test process has imported all of them already.
    done = subprocess.run([sys.executable, "-c", RENDER_EVERY_HELP], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    imported = set(json.loads(done.stdout))
    assert "typer" in imported  # the walk did run
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


def test_python_m_router_help_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "router", "--help"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    # `-X importtime` writes one "import time: self | cumulative | name" line per module.
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0]
                for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "router" in imported
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))

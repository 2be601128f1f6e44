"""The CLI's one error boundary: our errors exit 1 with their code, usage errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from router.cli.boundary import command_group
from router.cli.main import app
from router.errors import ArtifactError, InvalidInput, SupportRouterError

RUNNER = CliRunner()


def _group_raising(exc: Exception) -> typer.Typer:
    """A two-level command group whose `inner fail` command raises `exc`."""
    outer = command_group("Outer.")
    inner = command_group("Inner.")

    @inner.command("fail")
    def fail_command() -> None:
        raise exc

    @inner.command("ok")
    def ok_command() -> None:
        typer.echo("fine")

    outer.add_typer(inner, name="inner")
    return outer


@pytest.mark.parametrize(
    ("exc", "printed"),
    [
        (InvalidInput("no rows in x.jsonl"), "error (invalid_input): no rows in x.jsonl"),
        (ArtifactError("needs the [e5] extra", code="e5_missing"),
         "error (e5_missing): needs the [e5] extra"),
        (SupportRouterError("boom"), "error (internal_error): boom"),
    ],
)
def test_our_errors_print_their_code_on_stderr_and_exit_1(
    exc: SupportRouterError, printed: str
) -> None:
    result = RUNNER.invoke(_group_raising(exc), ["inner", "fail"])
    assert result.exit_code == 1
    assert result.stderr == printed + "\n"
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_other_exceptions_are_bugs_and_are_not_swallowed() -> None:
    result = RUNNER.invoke(_group_raising(KeyError("bug")), ["inner", "fail"])
    assert isinstance(result.exception, KeyError)
    assert "error (" not in result.output


def test_a_sub_group_on_its_own_has_the_boundary_too() -> None:
    inner = command_group("Inner.")

    @inner.command("fail")
    def fail_command() -> None:
        raise InvalidInput("bad", code="bad_thing")

    @inner.command("ok")
    def ok_command() -> None:
        pass

    result = RUNNER.invoke(inner, ["fail"])
    assert result.exit_code == 1 and result.stderr == "error (bad_thing): bad\n"


@pytest.mark.parametrize(
    ("args", "option", "choices"),
    [
        (["report", "--predictions", "p", "--labels", "l", "--policy", "x", "--out", "o",
          "--part", "everything"], "--part", "'test', 'all'"),
        (["train", "--backend", "typesafe"], "--backend", "'local', 'e5'"),
        (["eval", "--data", "d", "--backend", "jev"], "--backend", "'local', 'e5', 'typesafe'"),
        (["score", "--data", "d", "--out", "o", "--backend", "jev"], "--backend",
         "'local', 'e5', 'typesafe'"),
        (["calibrate", "--predictions", "p", "--labels", "l", "--out", "o",
          "--recalibrate", "platt"], "--recalibrate", "'none', 'temperature', 'isotonic'"),
        (["label", "--out", "o", "--annotator", "a", "--input", "i", "--sample", "first"],
         "--sample", "'random', 'uncertainty', 'disagreement', 'stratified', 'drifted'"),
        (["approvals", "list", "--status", "pending"], "--status",
         "'held', 'approved', 'rejected', 'closed', 'all'"),
        (["approvals", "decide", "op-1", "perhaps", "--supervisor", "m"], "decision",
         "'approve', 'reject'"),
        (["keys", "new", "--name", "x", "--role", "root"], "--role",
         "'gateway', 'agent', 'supervisor', 'labeller', 'admin'"),
    ],
)
def test_a_value_outside_the_choices_is_a_usage_error_naming_them(
    args: list[str], option: str, choices: str
) -> None:
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr
    assert f"is not one of {choices}" in result.stderr
    assert "Usage:" in result.stderr and "error (" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "--predictions", "p", "--labels", "l", "--out", "o",
          "--cost-misroute", "5"], "'--cost-misroute' / '--cost-clarify': give both or neither"),
        (["label", "--out", "o", "--annotator", "a"],
         "give exactly one of --input FILE or --from-decisions"),
        (["label", "--out", "o", "--annotator", "a", "--input", "i", "--from-decisions"],
         "give exactly one of --input FILE or --from-decisions"),
        (["keys", "new", "--name", "desk 1", "--role", "agent"],
         "Invalid value for '--name': String should match pattern"),
        (["approvals", "decide", "op-1"], "Missing argument"),
    ],
)
def test_contradicting_or_missing_options_are_usage_errors(
    args: list[str], message: str
) -> None:
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "printed"),
    [
        (["agreement", "{tmp}/nope-a.jsonl", "{tmp}/nope-b.jsonl"],
         "error (data_not_found): no labelled data at {tmp}/nope-a.jsonl"),
        (["train", "--data", "{tmp}/nope.jsonl", "--out", "{tmp}/models"],
         "error (data_not_found): no labelled data at {tmp}/nope.jsonl"),
        (["eval", "--data", "{tmp}/bad.jsonl"], "error (bad_label_row): {tmp}/bad.jsonl row 1:"),
        (["policy", "publish", "{tmp}/nope-policy.json", "--policy-path", "{tmp}/active.json"],
         "error (artifact_error): no policy at {tmp}/nope-policy.json"),
    ],
)
def test_a_command_failing_with_our_error_prints_its_code_and_exits_1(
    tmp_path: Path, args: list[str], printed: str
) -> None:
    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "hi", "label": "refunds"}) + "\n")
    result = RUNNER.invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 1, result.output
    # The last line: `train` reports its first stage before it fails.
    assert result.stderr.splitlines()[-1].startswith(printed.format(tmp=tmp_path))
    assert "Traceback" not in result.output

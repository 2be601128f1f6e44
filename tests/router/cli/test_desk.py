"""`support-router approvals …` and `tasks run` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from router.cli.desk import approvals_app, tasks_app
from router.gateway.app import create_app
from router.settings import Settings
from tests.messages import BEN, WHEELS

runner = CliRunner()


def _hold(settings: Settings) -> str:
    with TestClient(create_app(settings)) as client:
        client.post("/v1/messages", json={"text": WHEELS, "kind": "refund", "customer": BEN})
        return client.get("/v1/approvals").json()[0]["operation"]


def test_list_and_decide(cli_env: Settings) -> None:
    op = _hold(cli_env)
    listed = runner.invoke(approvals_app, ["list"])
    assert listed.exit_code == 0 and op in listed.output and "$350.00" in listed.output
    as_json = json.loads(runner.invoke(approvals_app, ["list", "--json"]).stdout)
    assert [r["operation"] for r in as_json] == [op]

    decided = runner.invoke(approvals_app, ["decide", op, "approve", "--supervisor", "maria"])
    assert decided.exit_code == 0, decided.output
    assert "issued" in decided.output and "(refund 2)" in decided.output
    again = runner.invoke(approvals_app, ["decide", op, "approve", "--supervisor", "maria"])
    assert again.exit_code == 0 and "already decided" in again.output
    assert "no refunds in that state" in runner.invoke(approvals_app, ["list"]).output


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["decide", "op-nope", "approve", "--supervisor", "m"], 1, "error (unknown_operation)"),
        (["decide", "{op}", "perhaps", "--supervisor", "m"], 2,
         "'perhaps' is not one of 'approve', 'reject'"),
        (["list", "--status", "pending"], 2,
         "'pending' is not one of 'held', 'approved', 'rejected', 'closed', 'all'"),
    ],
)
def test_errors_print_the_code_or_the_choices(
    cli_env: Settings, args: list[str], exit_code: int, message: str
) -> None:
    op = _hold(cli_env)
    result = runner.invoke(approvals_app, [a.format(op=op) for a in args])
    assert result.exit_code == exit_code and message in result.stderr
    held = json.loads(runner.invoke(approvals_app, ["list", "--json"]).stdout)
    assert [(r["operation"], r["status"]) for r in held] == [(op, "held")]


def test_tasks_run_json_and_exit_code(cli_env: Settings, tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    good = {"id": "handoff", "message": "hello", "expect": {}}
    suite.write_text(json.dumps(good) + "\n", encoding="utf-8")
    result = runner.invoke(tasks_app, ["run", "--suite", str(suite), "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["passed"] == 1 and report["failed"] == 0
    assert set(report["results"][0]) >= {"id", "passed", "reason", "route", "status", "reply"}
    assert report["results"][0]["wrote"] is False

    bad = {
        "id": "impossible",
        "message": "hello",
        "expect": {"refunds": [{"order_id": "O-1001", "amount_cents": 1}]},
    }
    suite.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    result = runner.invoke(tasks_app, ["run", "--suite", str(suite)])
    assert result.exit_code == 1
    assert "FAIL  impossible" in result.output and "0 passed, 1 failed" in result.output


def test_tasks_run_as_an_anonymous_chat_waits_for_codes(cli_env: Settings,
                                                        tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    task = {"id": "teapot", "route": "refund", "expect": {},
            "status": "awaiting_customer", "codes_sent": 1,
            "message": "Hi, this is ana.novak@example.com. My ceramic teapot (order O-1001) "
                       "arrived broken. Please refund the full amount."}
    suite.write_text(json.dumps(task) + "\n", encoding="utf-8")
    claimed = runner.invoke(tasks_app, ["run", "--suite", str(suite), "--sender", "claimed"])
    assert claimed.exit_code == 0, claimed.output
    verified = runner.invoke(tasks_app, ["run", "--suite", str(suite)])
    assert verified.exit_code == 1 and "status 'resolved'" in verified.output
    bad = runner.invoke(tasks_app, ["run", "--suite", str(suite), "--sender", "anyone"])
    # A usage error (exit 2) that names the choices, before any task runs.
    assert bad.exit_code == 2 and "verified" in bad.output and "claimed" in bad.output

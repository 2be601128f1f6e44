"""`support-router faq-eval` and `handoffs list|reply` through typer's CliRunner."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from router.cli.main import app
from router.gateway.app import create_app
from router.settings import Settings
from tests.messages import COMPLAINT

runner = CliRunner()


def test_faq_eval_reports_held_out_precision_and_handoff_rate() -> None:
    result = runner.invoke(app, ["faq-eval", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    held_out = report["held_out"]
    assert held_out["precision"] >= 0.95 and 0 < held_out["handoff_rate"] < 1
    assert held_out["threshold"] == report["non_test"]["threshold"]
    text = runner.invoke(app, ["faq-eval"])
    assert text.exit_code == 0 and "held-out" in text.output and "precision=" in text.output


def test_list_and_reply(cli_env: Settings) -> None:
    with TestClient(create_app(cli_env)) as client:
        case_id = client.post("/v1/messages", json={"text": COMPLAINT, "kind": "other"}).json()[
            "case_id"
        ]
    listed = runner.invoke(app, ["handoffs", "list"])
    assert listed.exit_code == 0 and case_id in listed.output
    page = json.loads(runner.invoke(app, ["handoffs", "list", "--json"]).stdout)
    assert [row["case_id"] for row in page["items"]] == [case_id]
    assert (page["next_cursor"], page["total"]) == (None, 1)
    replied = runner.invoke(
        app,
        ["handoffs", "reply", case_id, "--agent", "sam", "--text", "Sorry, I've told the courier."],
    )
    assert replied.exit_code == 0 and "resolved" in replied.output
    assert "no cases waiting" in runner.invoke(app, ["handoffs", "list"]).output
    again = runner.invoke(app, ["handoffs", "reply", case_id, "--agent", "sam", "--text", "x"])
    assert again.exit_code == 1 and "not_handed_off" in again.output


def test_reply_to_an_unknown_case_exits_1(cli_env: Settings) -> None:
    result = runner.invoke(app, ["handoffs", "reply", "c-nope", "--agent", "a", "--text", "x"])
    assert result.exit_code == 1 and "unknown_case" in result.output


def test_list_pages_with_a_cursor(cli_env: Settings) -> None:
    with TestClient(create_app(cli_env)) as client:
        cases = [client.post("/v1/messages", json={"text": COMPLAINT, "kind": "other"}).json()[
            "case_id"] for _ in range(3)]
    first = runner.invoke(app, ["handoffs", "list", "--limit", "2"])
    assert first.exit_code == 0 and "2 of 3 waiting; next page: --cursor " in first.output
    cursor = first.output.rsplit("--cursor ", 1)[1].strip()
    second = json.loads(runner.invoke(
        app, ["handoffs", "list", "--limit", "2", "--cursor", cursor, "--json"]).stdout)
    assert [row["case_id"] for row in second["items"]] == cases[2:]
    assert second["next_cursor"] is None
    bad = runner.invoke(app, ["handoffs", "list", "--cursor", "nonsense"])
    assert bad.exit_code == 1 and "invalid_cursor" in bad.output

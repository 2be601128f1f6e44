"""CLI for the desk: supervisor approvals and the task-suite runner.

Mounted by `router.cli.main` as `support-router approvals …` and `support-router tasks …`.
Approvals work on the configured database directly (no decision model is loaded), so a
supervisor can decide while the gateway is running or stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from router.cli.boundary import command_group
from router.cli.choices import ApprovalFilter, Sender, SupervisorDecision

if TYPE_CHECKING:
    from handlers.desk import SupportDesk
    from router.settings import Settings

approvals_app = command_group("Refunds held for a supervisor.")
tasks_app = command_group("End-to-end task suites for the handlers.")


def _desk(settings: Settings) -> SupportDesk:
    from router.app.bootstrap import open_desk
    from router.storage.db import make_engine

    return open_desk(settings, make_engine(settings.resolved_database_url))


def format_approvals(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no refunds in that state"
    lines = [f"{'operation':<20} {'case':<20} {'order':<8} {'amount':>11}  status"]
    for row in rows:
        state = row["status"] + (f" ({row['decision']} by {row['decided_by']})"
                                 if row["decision"] else "")
        lines.append(f"{row['operation']:<20} {row['case_id']:<20} {row['order_id']:<8} "
                     f"{row['amount']:>11}  {state}")
    return "\n".join(lines)


@approvals_app.command("list")
def list_approvals(
    status: Annotated[ApprovalFilter, typer.Option(help="Which refunds to list.")] = "held",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List refunds held for (or decided by) a supervisor."""
    from router.settings import get_settings

    rows = _desk(get_settings()).list_approvals(status)
    typer.echo(json.dumps(rows, indent=2) if as_json else format_approvals(rows))


@approvals_app.command("decide")
def decide(
    operation: Annotated[str, typer.Argument(help="The operation id (from `list`).")],
    decision: Annotated[SupervisorDecision, typer.Argument(
        help="approve: issue the refund exactly once; reject: never issue it.")],
    supervisor: Annotated[str, typer.Option(help="Who decides (recorded).")],
) -> None:
    """Approve (issue exactly once) or reject (never issue) a held refund."""
    from router.settings import get_settings

    outcome = _desk(get_settings()).decide_approval(operation, decision, supervisor)
    again = " (already decided; nothing new was done)" if outcome.replayed else ""
    typer.echo(f"{outcome.operation}: {outcome.operation_status}{again}")
    typer.echo(f"reply to the customer on {outcome.case_id}: {outcome.reply}")


@tasks_app.callback()
def _tasks() -> None:
    """End-to-end task suites for the handlers."""


@tasks_app.command("run")
def run(
    suite: Annotated[Path | None, typer.Option(
        help="Task file (JSONL; default: datasets/tasks/support16.jsonl).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    sender: Annotated[Sender, typer.Option(help=(
        "Who vouches for the e-mail in a message: `verified` (the runner plays a mail "
        "system that authenticated the sender) or `claimed` (an anonymous chat: writes "
        "wait for a one-time code). A task's own `sender` wins."))] = "verified",
) -> None:
    """Run each task on a fresh store through the conversation; exit 0 only if all pass."""
    from router.app.tasks import format_report, run_suite
    from router.packaged import data_path
    from router.settings import get_settings

    suite = suite or data_path("tasks", "support16.jsonl")
    report = run_suite(suite, settings=get_settings(), sender=sender)
    typer.echo(json.dumps(report.as_dict(), indent=2) if as_json else format_report(report))
    raise typer.Exit(0 if report.failed == 0 else 1)

"""CLI for the `other` route: the human queue and the embedded responder's evaluation.

Mounted by `router.cli.main` without a name, so its commands sit at the top level:
`support-router handoffs list|reply …` and `support-router faq-eval [--json]`.
The queue works on the configured database directly (no decision model is loaded), a
page at a time like `GET /v1/handoffs`: `list` prints the oldest `--limit` cases and the
`--cursor` that shows the next page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from router.cli.boundary import command_group
from router.cli.choices import HANDOFF_MAX_PAGE_SIZE, HANDOFF_PAGE_SIZE
from router.cli.desk import _desk

if TYPE_CHECKING:
    from handlers.fallback.faq import FaqEvaluation
    from handlers.fallback.handoffs import HandoffPage

fallback_app = command_group("The other route: FAQ responder and human queue.")
handoffs_app = command_group("Cases handed off to people.")
fallback_app.add_typer(handoffs_app, name="handoffs")


def format_handoffs(page: HandoffPage) -> str:
    if not page.items:
        return "no cases waiting for a person"
    lines = [f"{'case':<20} {'customer':<9} {'reason':<22} last message"]
    for row in page.items:
        message = (row["last_customer_message"] or "").replace("\n", " ")
        lines.append(f"{row['case_id']:<20} {row['customer_id'] or '-':<9} "
                     f"{row['reason'] or '-':<22} {message[:60]}")
    lines.append(f"{len(page.items)} of {page.total} waiting"
                 + (f"; next page: --cursor {page.next_cursor}" if page.next_cursor else ""))
    return "\n".join(lines)


def format_faq_eval(held_out: FaqEvaluation, fit: FaqEvaluation) -> str:
    lines = [f"threshold {held_out.threshold:.4f} (chosen on the {fit.n} non-test questions)"]
    for name, ev in (("held-out", held_out), ("non-test", fit)):
        lines.append(f"{name:<9} n={ev.n:<4} answered={ev.answered:<4} "
                     f"precision={ev.precision_score:.3f}  handoff_rate={ev.handoff_rate:.3f}")
    return "\n".join(lines)


@handoffs_app.command("list")
def list_command(
    limit: Annotated[int, typer.Option(min=1, max=HANDOFF_MAX_PAGE_SIZE, help="Cases per page.")]
    = HANDOFF_PAGE_SIZE,
    cursor: Annotated[str | None, typer.Option(help="Show the page after this one (the "
                                                    "cursor a previous page printed).")]
    = None,
    older_than: Annotated[float | None, typer.Option(
        "--older-than", min=0, help="Only cases waiting at least this many seconds.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the cases waiting for a person, oldest first, a page at a time."""
    from router.settings import get_settings

    page = _desk(get_settings()).list_handoffs(limit=limit, cursor=cursor,
                                               older_than_s=older_than)
    if as_json:
        payload = {"items": page.items, "next_cursor": page.next_cursor, "total": page.total}
        typer.echo(json.dumps(payload, indent=2, default=str))
    else:
        typer.echo(format_handoffs(page))


@handoffs_app.command("reply")
def reply_command(
    case_id: Annotated[str, typer.Argument(help="The case id (from `list`).")],
    agent: Annotated[str, typer.Option(help="Who replies (recorded on the case).")],
    text: Annotated[str, typer.Option(help="The reply the customer reads.")],
) -> None:
    """Reply to the customer on a handed-off case; the case is then resolved."""
    from router.settings import get_settings

    outcome = _desk(get_settings()).reply_handoff(case_id, agent, text)
    typer.echo(f"{outcome.case_id}: replied by {outcome.agent}; case {outcome.case_status}")


@fallback_app.command("faq-eval")
def faq_eval(
    faq_dir: Annotated[Path | None, typer.Option(
        help="FAQ folder with faq.json and questions.jsonl (default: datasets/faq).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Precision of direct FAQ answers and hand-off rate on the held-out questions."""
    from handlers.fallback.faq import DEFAULT_FAQ_DIR, evaluate, load_questions, split_questions
    from handlers.fallback.responder import load_faq_model

    faq_dir = faq_dir or DEFAULT_FAQ_DIR
    model = load_faq_model(faq_dir)
    fit_rows, test_rows = split_questions(load_questions(faq_dir))
    held_out = evaluate(model.index, test_rows, threshold=model.threshold)
    fit = evaluate(model.index, fit_rows, threshold=model.threshold)
    if as_json:
        typer.echo(json.dumps({"held_out": held_out.as_dict(), "non_test": fit.as_dict()},
                              indent=2))
    else:
        typer.echo(format_faq_eval(held_out, fit))

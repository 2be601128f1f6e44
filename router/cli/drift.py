"""`support-router drift`: does recent traffic still look like the certification rows?

Reads the decision log (`SUPPORT_ROUTER_DATABASE_URL`) for the active policy version and
compares its model decisions with the reference the policy carries
(`router.routing.drift`). Exit codes, for cron:

- 0: quiet (every feature ok or warn), or too little traffic for a verdict;
- 1: one of our errors, e.g. `no_drift_reference` (the policy carries no reference);
- 4 (`DRIFT_EXIT_CODE`): drift in at least one feature.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from router.errors import InvalidInput, InvalidPolicy

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from router.contracts import Policy
    from router.settings import Settings

DRIFT_EXIT_CODE = 4
"""`drift`'s exit code when a feature drifted (distinct from 1, an error, and 2, usage)."""
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(value: str, *, now: datetime) -> datetime:
    """`24h`, `90m`, `7d`, `3600s` before `now`, or an ISO date or time (UTC if it names no
    zone)."""
    ago = _AGO.match(value.strip())
    if ago:
        return now - timedelta(seconds=float(ago.group(1)) * _UNITS[ago.group(2)])
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"--since {value!r}: give a duration such as 24h, 90m or 7d, or "
                           "an ISO time such as 2026-12-01T08:00:00",
                           code="bad_since") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def active_policy(settings: Settings, engine: Engine) -> Policy:
    """The database's active version of the configured slot, else the policy file."""
    from router.storage.policy_db import PolicyDB, policy_slot
    from router.storage.policy_store import active_policy_path, load_policy

    active = PolicyDB(engine, policy_slot(settings)).active()
    return active if active is not None else load_policy(active_policy_path(settings))


def drift(
    since: Annotated[str, typer.Option(
        metavar="<24h|ISO-time>",
        help="Decisions since this long ago (30m, 24h, 7d) or since this UTC time.")] = "24h",
    policy: Annotated[Path | None, typer.Option(
        help="Policy artifact to compare with (default: the active policy).")] = None,
    max_rows: Annotated[int, typer.Option(
        min=1, metavar="<int>", help="Compare at most the newest this many decisions.")
    ] = 100_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Compare recent decisions with the active policy's certification rows; exit 4 on drift.

    Per feature (confidence, routed share, text length, language, predicted route; for an
    e5 policy the embedding and each of its directions): PSI, a chi-squared p-value and
    ok / warn / drift; exit 0 when quiet."""
    from router.app.drift import drift_report
    from router.routing.drift import format_report
    from router.settings import get_settings
    from router.storage.db import make_engine, migrate
    from router.storage.decision_log import DecisionLog
    from router.storage.policy_store import load_policy

    settings = get_settings()
    start = parse_since(since, now=datetime.now(UTC))
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate(engine)
        chosen = load_policy(policy) if policy else active_policy(settings, engine)
        report = drift_report(DecisionLog(engine), chosen, since=start, max_rows=max_rows)
    finally:
        engine.dispose()
    if report.verdict == "no_reference":
        raise InvalidPolicy(f"policy {chosen.version}: {report.message}",
                            code="no_drift_reference")
    if as_json:
        typer.echo(json.dumps({"policy_version": chosen.version, "since": start.isoformat(),
                               **report.as_dict()}, indent=2))
    else:
        typer.echo(f"policy {chosen.version}, decisions since {start:%Y-%m-%d %H:%M:%S} UTC")
        typer.echo(format_report(report))
    if report.fires:
        raise typer.Exit(DRIFT_EXIT_CODE)


def register(app: typer.Typer) -> None:
    app.command("drift")(drift)

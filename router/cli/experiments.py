"""`support-router experiment start | stop | show`: the experiments in the shared database.

What the admin endpoints do, from a shell on any host with the database's URL: a start
is refused (nothing written) unless the config fits its contract and every variant loads
here; every running gateway follows within SUPPORT_ROUTER_POLICY_POLL_S. The CLI records
itself as `cli:<user>`, where an API call records the key's name. Mounted by
`router.cli.main`.
"""

from __future__ import annotations

import contextlib
import getpass
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from router.cli.boundary import command_group

if TYPE_CHECKING:
    from router.settings import Settings
    from router.storage.experiment_db import ExperimentDB, ExperimentRun

experiment_app = command_group("Start, stop and show online experiments (shared database).")


@contextlib.contextmanager
def _experiments() -> Iterator[tuple[ExperimentDB, Settings]]:
    """The experiment store at SUPPORT_ROUTER_DATABASE_URL (migrated), and the settings."""
    from router.settings import get_settings
    from router.storage.db import make_engine, migrate
    from router.storage.experiment_db import ExperimentDB

    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate(engine)
        yield ExperimentDB(engine), settings
    finally:
        engine.dispose()


def _who() -> str:
    return f"cli:{getpass.getuser()}"


def _line(run: ExperimentRun) -> str:
    shares = ", ".join(f"{name} {share:.0%}"
                       for name, share in run.config.expected_shares().items())
    stopped = (f"  stopped {run.stopped_at.isoformat()} by {run.stopped_by}"
               if run.stopped_at else "")
    return (f"{run.name:<24} {run.status:<8} {shares}  started {run.started_at.isoformat()} "
            f"by {run.started_by}{stopped}")


@experiment_app.command("start")
def start(
    file: Annotated[Path, typer.Option("--file", help="The experiment's JSON config.")],
) -> None:
    """Start an experiment; refused while another runs or when a variant does not load."""
    from router.app.bootstrap import load_experiment
    from router.errors import ArtifactError, Conflict
    from router.storage.experiment_db import parse_experiment

    try:
        config = parse_experiment(file.read_bytes())
    except FileNotFoundError:
        raise ArtifactError(f"no experiment config at {file}") from None
    with _experiments() as (db, settings):
        running = db.running()
        if running is not None:  # before loading anything
            raise Conflict(f"experiment {running.name!r} is running; stop it first",
                           code="experiment_running")
        load_experiment(settings, config)  # every variant loads, or nothing is written
        run = db.start(config, by=_who())
    typer.echo(f"started: {_line(run)}")


@experiment_app.command("stop")
def stop(name: Annotated[str, typer.Argument(help="The running experiment's name.")]) -> None:
    """Stop the running experiment; gateways run none within the poll interval."""
    with _experiments() as (db, _):
        run = db.stop(name, by=_who())
    typer.echo(f"stopped: {_line(run)}")


@experiment_app.command("show")
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print {running, history}.")] = False,
) -> None:
    """The running experiment and every start, oldest first."""
    with _experiments() as (db, _):
        running, history = db.running(), db.history()
    if as_json:
        typer.echo(json.dumps({"running": running.model_dump(mode="json") if running else None,
                               "history": [r.model_dump(mode="json") for r in history]},
                              indent=2))
        return
    typer.echo(f"running: {running.name if running else 'none'}")
    for run in history:
        typer.echo(_line(run))

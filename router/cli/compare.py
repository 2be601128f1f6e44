"""`support-router compare` (offline, labelled rows) and `ab-report` (online experiments).

Registered on the main app by `register(app)`; each command reads files or the decision
log, calls one pure function, and prints what a `format_*` function returns.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from router.cli.data import NBootOption, SinceOption, _since, _warnings_printed
from router.errors import CalibrationError

if TYPE_CHECKING:
    from router.contracts import Policy
    from router.settings import Settings


def _policy_for(path: Path | None, model_name: str, settings: Settings, flag: str) -> Policy:
    """The given policy, or the configured one of the predictions' backend."""
    from calibration.predictions import backend_of
    from router.storage.policy_store import load_policy

    if path is not None:
        return load_policy(path)
    backend = backend_of(model_name)
    default = {"local": settings.policy_path, "e5": settings.e5_policy_path,
               "typesafe": settings.typesafe_policy_path,
               "cascade": settings.cascade_policy_path}[backend]
    if not default.exists():
        raise CalibrationError(f"no {backend} policy at {default}; pass {flag}")
    return load_policy(default)


def compare(
    a: Annotated[Path, typer.Option("--a", help="Router A's prediction JSONL.")],
    b: Annotated[Path, typer.Option("--b", help="Router B's prediction JSONL.")],
    labels: Annotated[Path, typer.Option(help="Labelled JSONL matching both by id.")],
    policy_a: Annotated[Path | None, typer.Option(
        help="Router A's policy (default: the configured policy of its backend).")] = None,
    policy_b: Annotated[Path | None, typer.Option(
        help="Router B's policy (default: the configured policy of its backend).")] = None,
    cost_misroute: Annotated[float, typer.Option(help="Cost of one misroute.")] = 10.0,
    cost_clarify: Annotated[float, typer.Option(help="Cost of one needless clarify.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print every figure as JSON.")] = False,
    out: Annotated[Path | None, typer.Option(help="Folder for an HTML page and its plot.")
                   ] = None,
    n_boot: NBootOption = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Compare two routers on the same labelled requests, each at its own policy (paired)."""
    import numpy as np

    from calibration.check import model_mismatches
    from calibration.compare import compare_routers, format_comparison, run_router
    from calibration.data import data_sha, load_labelled
    from calibration.predictions import join_labels, read_predictions
    from calibration.report.compare_page import write_comparison
    from calibration.splits import model_train_mask
    from router.settings import get_settings

    settings = get_settings()
    with _warnings_printed():
        rows = load_labelled(labels)
        training = load_labelled(settings.routes_data)
        excluded = model_train_mask(np.asarray([r.id for r in rows], dtype=object),
                                    [r.text for r in rows], training)
        rows = [r for r, ex in zip(rows, excluded, strict=True) if not ex]
        if excluded.any():
            warnings.warn(f"{int(excluded.sum())} rows are in the local model's training "
                          "split and were left out", stacklevel=1)
        if not rows:
            raise CalibrationError(f"{labels} has no rows outside the model's training split")
        label_array = np.asarray([r.label for r in rows])
        runs, certified = [], {}
        for name, path, policy_path, flag in (("A", a, policy_a, "--policy-a"),
                                              ("B", b, policy_b, "--policy-b")):
            preds = read_predictions(path)
            _, probabilities = join_labels(rows, preds)
            policy = _policy_for(policy_path, preds.model, settings, flag)
            for problem in model_mismatches(policy, preds):
                warnings.warn(f"router {name}: {problem}", stacklevel=1)
            runs.append(run_router(name, label_array, probabilities, policy))
            certified[name] = policy.data.labels_sha == data_sha(rows)
        result = compare_routers(np.asarray([r.id for r in rows]), label_array, *runs,
                                 cost_misroute=cost_misroute, cost_clarify=cost_clarify,
                                 certified_on_rows=certified,
                                 languages=np.asarray([r.lang for r in rows]), n_boot=n_boot,
                                 seed=seed)
        page = write_comparison(out, result) if out is not None else None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(format_comparison(result))
    if page is not None and not as_json:
        typer.echo(f"wrote {page}")


def ab_report(
    experiment: Annotated[str | None, typer.Option(
        help="Experiment name (default: the running one, else the last one started).")
    ] = None,
    since: SinceOption = None,
    labels: Annotated[Path | None, typer.Option(
        help="Labelled JSONL whose ids are request ids (from `export-decisions`).")] = None,
    cost_misroute: Annotated[float, typer.Option(help="Cost of one misroute.")] = 10.0,
    cost_clarify: Annotated[float, typer.Option(help="Cost of one needless clarify.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print every figure as JSON.")] = False,
    n_boot: NBootOption = 1000,
) -> None:
    """Report an online experiment from the decision log: split, routes, shadows, outcomes.

    Its config (the expected split, the planned sample size) comes from the experiments
    in the database (`support-router experiment show`)."""
    from calibration.ab_report import ab_report as build
    from calibration.ab_report import format_ab_report
    from calibration.data import load_labelled
    from router.settings import get_settings
    from router.storage.db import make_engine
    from router.storage.decision_log import DecisionLog
    from router.storage.experiment_db import ExperimentDB

    settings = get_settings()
    with _warnings_printed():
        label_map = ({r.id: r.label for r in load_labelled(labels)}
                     if labels is not None else None)
        engine = make_engine(settings.resolved_database_url)
        try:
            log = DecisionLog(engine)
            log.create_schema()
            run = ExperimentDB(engine).latest(experiment)
            if experiment is None and run is None:
                raise CalibrationError("no experiment was ever started in the database; "
                                       "pass --experiment", code="no_experiment")
            name = experiment or (run.name if run else "")
            rows = log.rows(since=_since(since), experiment=name)
        finally:
            engine.dispose()
        if not rows:
            raise CalibrationError(f"no decisions logged for experiment {name!r}",
                                   code="no_experiment_rows")
        config = run.config if run is not None else None
        report = build(rows, experiment=name,
                       expected_shares=config.expected_shares() if config else None,
                       planned_requests=config.planned_requests if config else None,
                       labels=label_map, cost_misroute=cost_misroute,
                       cost_clarify=cost_clarify, n_boot=n_boot)
    typer.echo(json.dumps(report, indent=2) if as_json else format_ab_report(report))


def register(app: typer.Typer) -> None:
    """Add `compare` and `ab-report` to the main `support-router` app."""
    app.command("compare")(compare)
    app.command("ab-report")(ab_report)

"""The data team's commands: score, calibrate, report, check, label, agreement,
export-decisions and `policy publish|rollback|history`.

Registered on the main app by `register(app)`. Every command reads files, calls one
function of `calibration`, and prints what a `format_*` function returns; our errors
reach the error boundary (`router.cli.boundary`), soft warnings are printed as
``warning: <message>`` on stderr.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from router.cli.boundary import command_group, console
from router.cli.choices import CalibratorKind, ReportPart, Sample, ScoreBackend

if TYPE_CHECKING:
    import numpy as np
    from rich.progress import Progress

    from calibration.calibrate import CalibrationResult
    from calibration.data import LabelledRow
    from calibration.predictions import Predictions
    from router.contracts import DriftReference, Policy
    from router.settings import Settings
    from router.storage.policy_db import PolicyDB

policy_app = command_group("Publish, roll back and list policy versions.")
DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
SinceOption = Annotated[datetime | None, typer.Option(
    formats=DATE_FORMATS, metavar="<date>",
    help="Only decisions since this UTC date or time (YYYY-MM-DD[THH:MM:SS]).")]
NBootOption = Annotated[int, typer.Option(min=1, metavar="<int>", help="Bootstrap resamples.")]


@contextlib.contextmanager
def _warnings_printed() -> Iterator[None]:
    """Print the soft warnings raised inside (also when an error follows) on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                typer.echo(f"warning: {warning.message}", err=True)


def _progress() -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console(stderr=True))


def _labelled_with_predictions(
    labels: Path, predictions: Path, settings: Settings
) -> tuple[Predictions, list[LabelledRow], np.ndarray, np.ndarray, np.ndarray]:
    """Labels joined to predictions by id, and the mask of the model's training rows."""
    import numpy as np

    from calibration.data import load_labelled
    from calibration.predictions import join_labels, read_predictions
    from calibration.splits import model_train_mask

    preds = read_predictions(predictions)
    rows, probabilities = join_labels(load_labelled(labels), preds)
    ids = np.asarray([r.id for r in rows], dtype=object)
    excluded = model_train_mask(ids, [r.text for r in rows], load_labelled(settings.routes_data))
    return preds, rows, ids, probabilities, excluded


def _since(value: datetime | None) -> datetime | None:
    return None if value is None else (value if value.tzinfo else value.replace(tzinfo=UTC))


def score(
    data: Annotated[Path, typer.Option(help="Labelled JSONL (file or folder) to score.")],
    out: Annotated[Path, typer.Option(help="Prediction JSONL to write.")],
    backend: Annotated[ScoreBackend, typer.Option(help="The backend that scores.")] = "local",
    model: Annotated[str | None, typer.Option(
        help="typesafe: model name on the server; local: artifact path.")] = None,
    cache: Annotated[Path | None, typer.Option(
        help="Score cache (default: <var_dir>/score-cache.jsonl).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Keep the cache in memory.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count the calls.")] = False,
    batch_size: Annotated[int, typer.Option(min=1, metavar="<int>",
                                            help="Texts per model call batch.")] = 64,
) -> None:
    """Score labelled requests with a backend; cached, resumable, never asks twice."""
    from calibration.data import load_labelled
    from calibration.predictions import (
        ScoreCache,
        build_scorer,
        identify_backend,
        plan_scoring,
        score_rows,
        write_predictions,
    )
    from router.settings import get_settings

    settings = get_settings()
    with _warnings_printed():
        rows = load_labelled(data)
        identity = identify_backend(settings, backend, model)
        store = ScoreCache(None if no_cache else cache or settings.var_dir / "score-cache.jsonl")
        plan = plan_scoring([r.text for r in rows], identity, store)
        summary = (f"{plan.n_rows} rows, {plan.n_unique} distinct texts, {plan.n_cached} cached: "
                   f"{plan.n_calls} calls to {identity.name}")
        if dry_run:
            typer.echo(f"dry run: {summary} would be made")
            return
        scorer = build_scorer(settings, backend, model)
        with _progress() as progress:
            task = progress.add_task(f"scoring with {identity.name}", total=plan.n_calls)
            predictions = score_rows(rows, scorer, identity, store, batch_size=batch_size,
                                     on_progress=lambda k: progress.advance(task, k))
        written = write_predictions(predictions, out)
    typer.echo(f"{summary}; wrote {written} predictions to {out}")


def calibrate(
    predictions: Annotated[Path, typer.Option(help="Prediction JSONL from `score`.")],
    labels: Annotated[Path, typer.Option(help="Labelled JSONL matching the predictions by id.")],
    out: Annotated[Path, typer.Option(help="Policy artifact to write.")],
    alpha: Annotated[float, typer.Option(help="Largest misroute rate among routed requests.")
                     ] = 0.02,
    delta: Annotated[float, typer.Option(help="Allowed probability the promise fails.")] = 0.05,
    recalibrate: Annotated[CalibratorKind, typer.Option(
        help="Recalibrate the probabilities before certifying.")] = "none",
    cost_misroute: Annotated[float | None, typer.Option(help="Cost of one misroute.")] = None,
    cost_clarify: Annotated[float | None, typer.Option(help="Cost of one needless clarify.")
                            ] = None,
    per_route: Annotated[bool, typer.Option("--per-route",
                                            help="One threshold per route (Bonferroni).")] = False,
    min_margin: Annotated[float | None, typer.Option(help="Least top-2 probability margin.")
                          ] = None,
    model: Annotated[str | None, typer.Option(help="Local artifact path, if not the configured."
                                              )] = None,
    version: Annotated[str | None, typer.Option(help="Policy version (default: generated).")
                       ] = None,
    n_boot: NBootOption = 1000,
) -> None:
    """Certify a threshold with a guarantee and write the policy artifact."""
    if (cost_misroute is None) != (cost_clarify is None):
        raise typer.BadParameter("give both or neither",
                                 param_hint="'--cost-misroute' / '--cost-clarify'")
    import numpy as np

    from calibration.calibrate import CalibrateOptions, format_certification_notes
    from calibration.calibrate import calibrate as run
    from calibration.data import data_sha
    from calibration.predictions import policy_model_for
    from router.settings import get_settings
    from router.storage.policy_store import save_policy

    settings = get_settings()
    options = CalibrateOptions(
        alpha=alpha, delta=delta, recalibrate=recalibrate, cost_misroute=cost_misroute,
        cost_clarify=cost_clarify, per_route=per_route, min_margin=min_margin, n_boot=n_boot,
        version=version,
    )
    with _warnings_printed():
        preds, rows, ids, probabilities, excluded = _labelled_with_predictions(
            labels, predictions, settings)
        bound = policy_model_for(preds, settings, model)
        kept = [r for r, ex in zip(rows, excluded, strict=True) if not ex]
        e5 = None
        if bound.backend == "e5":  # its reference holds an embedding summary
            from router.models.e5.model import E5RouteModel

            e5 = E5RouteModel.load(Path(model) if model else settings.e5_model_path)
        with console().status("fitting, certifying and measuring…"):
            result = run(ids, np.asarray([r.label for r in rows]), probabilities, model=bound,
                         options=options, now=datetime.now(UTC), excluded=excluded,
                         labels_sha=data_sha(kept), texts=[r.text for r in rows], e5=e5)
        save_policy(result.policy, out)
    typer.echo(format_calibration(result, format_certification_notes(result.certifications)))
    typer.echo(f"wrote policy {result.policy.version} to {out}")


def format_calibration(result: CalibrationResult, notes: str) -> str:
    """Split sizes, calibration before/after, the certified threshold and test metrics."""
    policy, parts = result.policy, result.parts
    sizes = parts.sizes()
    lines = [f"rows: fit {sizes['fit']}, certify {sizes['certify']}, test {sizes['test']} "
             f"({parts.n_excluded_train} rows of the model's training split left out)"]
    before, after = result.before, result.after
    if before:
        lines.append(f"calibration on test ({policy.calibrator.kind}): " + ", ".join(
            f"{k} {before[k]:.4f} -> {after[k]:.4f}" for k in before))
    g = policy.guarantee
    assert g is not None
    lines.append(f"guarantee: misroute rate among routed <= {g.alpha:g} with probability >= "
                 f"{1 - g.delta:g} ({g.method})")
    lines.append(notes)
    lines.append(f"Clopper-Pearson upper bound at the chosen threshold(s): {g.upper_bound:.4f}")
    routing = policy.metrics_test.get("routing")
    if routing:
        lines.append("test: " + ", ".join(
            f"{k} {v['value']:.4f} [{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]"
            for k, v in routing.items() if k in ("misroute_rate_routed", "coverage",
                                                 "clarify_rate", "unclear_recall")))
    return "\n".join(lines)


def report(
    predictions: Annotated[Path, typer.Option(help="Prediction JSONL from `score`.")],
    labels: Annotated[Path, typer.Option(help="Labelled JSONL matching the predictions.")],
    policy: Annotated[Path, typer.Option(help="Policy artifact from `calibrate`.")],
    out: Annotated[Path, typer.Option(help="Folder for index.html and the plots.")],
    part: Annotated[ReportPart, typer.Option(
        help="test: the rows `calibrate` held out; all: every row outside the model's "
             "training split.")] = "test",
    n_boot: NBootOption = 1000,
) -> None:
    """Write an offline HTML report with reliability, risk-coverage and confusion plots."""
    import numpy as np

    from calibration.check import model_mismatches
    from calibration.report.policy_report import write_report
    from calibration.splits import assign_parts
    from router.settings import get_settings
    from router.storage.policy_store import load_policy

    with _warnings_printed():
        chosen = load_policy(policy)
        preds, rows, ids, probabilities, excluded = _labelled_with_predictions(
            labels, predictions, get_settings())
        for problem in model_mismatches(chosen, preds):
            warnings.warn(problem, stacklevel=1)
        if part == "test":
            index = assign_parts(ids, excluded=excluded).test
            note = "test part: never used to fit or certify"
        else:
            index = np.flatnonzero(~excluded)
            note = "all rows except the model's training rows"
        with console().status("computing figures and drawing plots…"):
            path = write_report(out, ids=ids[index], texts=[rows[i].text for i in index],
                                labels=np.asarray([rows[i].label for i in index]),
                                probabilities=probabilities[index], policy=chosen,
                                languages=np.asarray([rows[i].lang for i in index]),
                                rows_note=note, n_boot=n_boot)
    typer.echo(f"wrote {path} ({len(index)} rows)")


def check(
    policy: Annotated[Path, typer.Option(help="The published policy artifact.")],
    predictions: Annotated[Path, typer.Option(help="Predictions on the new labelled rows.")],
    labels: Annotated[Path, typer.Option(help="Newly labelled rows.")],
    significance: Annotated[float, typer.Option(help="Level of the binomial test.")] = 0.05,
) -> None:
    """Does the published guarantee still hold on newly labelled traffic? Exit 1 if not."""
    from dataclasses import replace

    import numpy as np

    from calibration.check import check_guarantee, format_check, model_mismatches
    from router.settings import get_settings
    from router.storage.policy_store import load_policy

    with _warnings_printed():
        chosen = load_policy(policy)
        preds, rows, _, probabilities, excluded = _labelled_with_predictions(
            labels, predictions, get_settings())
        keep = ~excluded
        result = check_guarantee(np.asarray([r.label for r in rows])[keep], probabilities[keep],
                                 chosen, significance=significance)
        result = replace(result, warnings=model_mismatches(chosen, preds))
    typer.echo(format_check(result))
    if not result.holds:
        raise typer.Exit(1)


def label(
    out: Annotated[Path, typer.Option(help="Labels JSONL (appended; resumes from it).")],
    annotator: Annotated[str, typer.Option(help="Your name, recorded on every row.")],
    input_file: Annotated[Path | None, typer.Option("--input", help="JSONL with id and text."
                                                    )] = None,
    from_decisions: Annotated[bool, typer.Option("--from-decisions",
                                                 help="Label requests from the decision log.")
                              ] = False,
    since: SinceOption = None,
    sample: Annotated[Sample, typer.Option(help="How to pick the requests to label.")
                      ] = "random",
    n: Annotated[int | None, typer.Option("--n", min=1, metavar="<int>",
                                          help="How many to label (default: all).")] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed (resume needs the same).")] = 0,
    guide: Annotated[Path | None, typer.Option(
        help="Labelling guide shown on `?` (default: datasets/LABELLING.md).")] = None,
) -> None:
    """Label requests in the terminal, one at a time; resumes where it stopped."""
    if (input_file is None) == (not from_decisions):
        raise typer.BadParameter("give exactly one of --input FILE or --from-decisions",
                                 param_hint="'--input' / '--from-decisions'")
    from calibration.data import iter_jsonl, load_labelled
    from calibration.label import (
        items_from_rows,
        read_guide,
        run_session,
        select_items,
        start,
        stdin_keys,
    )
    from router.packaged import data_path

    guide = guide or data_path("LABELLING.md")
    with _warnings_printed():
        if input_file is not None:
            items = items_from_rows(iter_jsonl(input_file), source=input_file.name)
        else:
            items = items_from_rows(_decision_rows(since, redact_text=False), source="decisions")
        reference = _active_reference() if sample == "drifted" else None
        chosen = select_items(items, sample=sample, n=n, seed=seed, reference=reference)
        done = {row.id for row in load_labelled(out)} if out.exists() else set()
        keys = stdin_keys()
        with contextlib.closing(keys):
            state = run_session(start(chosen, done), keys=keys, out=out, annotator=annotator,
                                guide=read_guide(guide), console=console(),
                                clock=lambda: datetime.now(UTC))
    typer.echo(f"labelled {state.labelled} this session; labels in {out}")


def _active_reference() -> DriftReference | None:
    """The drift reference of the active policy (the database's, else the policy file's)."""
    from router.cli.drift import active_policy
    from router.settings import get_settings
    from router.storage.db import make_engine, migrate

    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate(engine)
        return active_policy(settings, engine).reference
    finally:
        engine.dispose()


def _decision_rows(since: datetime | None, *, redact_text: bool) -> list[dict]:
    from calibration.export import export_rows
    from router.settings import get_settings
    from router.storage.db import make_engine
    from router.storage.decision_log import DecisionLog

    engine = make_engine(get_settings().resolved_database_url)
    try:
        log = DecisionLog(engine)
        log.create_schema()
        return export_rows(log.rows(since=_since(since)), redact_text=redact_text)
    finally:
        engine.dispose()


def agreement(
    first: Annotated[Path, typer.Argument(help="Annotator A's labels JSONL.")],
    second: Annotated[Path, typer.Argument(help="Annotator B's labels JSONL.")],
) -> None:
    """Cohen's kappa, confusion between annotators, and the disagreements to resolve."""
    from calibration.agreement import compare_annotators, format_agreement
    from calibration.data import load_labelled

    with _warnings_printed():
        result = compare_annotators(load_labelled(first), load_labelled(second))
    typer.echo(format_agreement(result, name_a=first.stem, name_b=second.stem))


def export_decisions(
    out: Annotated[Path, typer.Option(help="JSONL to write, ready for `label --input`.")],
    since: SinceOption = None,
    redact: Annotated[bool, typer.Option("--redact",
                                         help="Mask e-mails, order ids and amounts.")] = False,
) -> None:
    """Export unlabelled requests from the decision log for labelling."""
    with _warnings_printed():
        rows = _decision_rows(since, redact_text=redact)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    typer.echo(f"exported {len(rows)} requests to {out}" + (" (redacted)" if redact else ""))


PolicyPathOption = Annotated[Path | None, typer.Option(
    "--policy-path", help="Policy file kept in step with the database's active version "
                          "(default: the configured backend's).")]


@contextlib.contextmanager
def _policies(policy_path: Path | None) -> Iterator[tuple[PolicyDB, Path]]:
    """The shared policy store (the database at SUPPORT_ROUTER_DATABASE_URL, migrated)
    and the policy file that follows it."""
    from router.settings import get_settings
    from router.storage.db import make_engine, migrate
    from router.storage.policy_db import PolicyDB, policy_slot
    from router.storage.policy_store import active_policy_path

    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate(engine)
        yield PolicyDB(engine, policy_slot(settings)), policy_path or active_policy_path(settings)
    finally:
        engine.dispose()


def _served_file(path: Path) -> Policy | None:
    """The policy in the file, to adopt when the database has none yet; a file that does
    not load (broken by hand, say) is not kept, so publishing can replace it."""
    from router.errors import ArtifactError, InvalidPolicy
    from router.storage.policy_store import load_policy

    try:
        return load_policy(path)
    except ArtifactError:
        return None
    except InvalidPolicy as exc:
        typer.echo(f"warning: {exc.message}; it is not kept as a version", err=True)
        return None


def _who() -> str:
    """Who a change made here is recorded as (an API call records its key's name)."""
    import getpass

    return f"cli:{getpass.getuser()}"


def _decides(policy: Policy) -> None:
    """Refuse a policy that does not decide on the fixed distributions (there is no
    running model here: each gateway checks it on its model's answers too before it
    serves it)."""
    from router.routing.policy_check import check_policy, fixed_scores

    check_policy(policy, fixed_scores(policy.model.name))


@policy_app.command("publish")
def policy_publish(
    artifact: Annotated[Path, typer.Argument(help="Policy artifact from `calibrate`.")],
    policy_path: PolicyPathOption = None,
) -> None:
    """Store a policy version in the database and make it active; every running gateway
    serves it within SUPPORT_ROUTER_POLICY_POLL_S.

    Refused (nothing changes) when the artifact is not a valid policy or does not decide;
    a broken policy file is replaced."""
    from router.storage.policy_store import load_policy, save_policy

    policy = load_policy(artifact)
    with _policies(policy_path) as (db, path):
        adopt = _served_file(path) if db.active_version() is None else None
        switch = db.publish(policy, accept=_decides, adopt=adopt, by=_who())
        save_policy(switch.policy, path)
    typer.echo(f"active policy: {switch.policy.version} (was {switch.previous_version})")


@policy_app.command("rollback")
def policy_rollback(policy_path: PolicyPathOption = None) -> None:
    """Return to the policy version that was active before the current one (checked as
    a published one is)."""
    from router.storage.policy_store import save_policy

    with _policies(policy_path) as (db, path):
        switch = db.rollback(accept=_decides, by=_who())
        save_policy(switch.policy, path)
    typer.echo(f"rolled back: active policy {switch.policy.version} "
               f"(was {switch.previous_version})")


@policy_app.command("history")
def policy_history(policy_path: PolicyPathOption = None) -> None:
    """List publish, adopt and rollback events, oldest first."""
    with _policies(policy_path) as (db, _):
        events = db.history()
    for event in events:
        by = f", by {event['by']}" if event["by"] else ""
        typer.echo(f"{event['at']}  {event['action']:<8} {event['version']}"
                   f"  (previous {event['previous']}{by})")


def register(app: typer.Typer) -> None:
    """Add the data team's commands to the main `support-router` app."""
    app.command("score")(score)
    app.command("calibrate")(calibrate)
    app.command("report")(report)
    app.command("check")(check)
    app.command("label")(label)
    app.command("agreement")(agreement)
    app.command("export-decisions")(export_decisions)
    app.add_typer(policy_app, name="policy")



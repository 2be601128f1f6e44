"""The `support-router` command line: serve, route, train, eval (and the data-team tools).

Every group comes from `router.cli.boundary.command_group` (one error boundary, literal
help); heavy modules are imported inside the commands so that `--help` is instant.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from router.cli.boundary import command_group, console, fail
from router.cli.cascade import register as register_cascade_command
from router.cli.choices import Backend, TrainBackend
from router.cli.compare import register as register_compare_commands
from router.cli.data import register as register_data_commands
from router.cli.desk import approvals_app, tasks_app
from router.cli.drift import register as register_drift_command
from router.cli.experiments import experiment_app
from router.cli.fallback import fallback_app
from router.cli.keys import keys_app
from router.cli.shadow import register as register_shadow_commands
from router.errors import SupportRouterError

if TYPE_CHECKING:
    from rich.table import Table

app = command_group("Route support messages with a calibrated decision model.")


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default from settings).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from settings).")] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes; each loads the model.")
    ] = 1,
) -> None:
    """Start the HTTP gateway (trains the embedded model first if it is missing).

    Without API keys only loopback may be bound; a port in use is refused before anything
    loads. While a missing model trains, /healthz answers and /readyz says what it waits
    for. With backend=cascade the local model serves at once and the e5 stage joins once
    trained and certified (/readyz lists it under `pending` meanwhile). SIGTERM lets
    requests in flight finish (up to `shutdown_grace_s`) and exits 0.
    """
    from router.gateway.server import (
        START_FAILED_EXIT_CODE,
        StartFailed,
        preflight,
        serve_gateway,
    )
    from router.settings import get_settings
    from router.telemetry.logs import configure_logging
    from router.telemetry.metrics import prepare_multiprocess_dir

    settings = get_settings()
    bind = host or settings.host
    try:
        preflight(settings, bind, port or settings.port)  # keys, loopback rule, free port
    except SupportRouterError as exc:
        # A refused start exits 2, like a usage error: a supervisor restarting the gateway
        # must not mistake it for a crash worth retrying.
        fail(exc, exit_code=2)
    configure_logging(settings)  # JSON lines from here on
    prepare_multiprocess_dir()  # PROMETHEUS_MULTIPROC_DIR: empty it before workers start
    try:
        serve_gateway(settings, host=bind, port=port or settings.port, workers=workers)
    except StartFailed as exc:
        fail(exc, exit_code=START_FAILED_EXIT_CODE)


@contextmanager
def _train_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A `train_local` progress callback: a bar with elapsed time and ETA on a terminal,
    one line per stage otherwise (a log file or CI keeps every line).

    The ETA comes from the stages finished so far; the model's cross-fit folds run inside
    one stage (`router.app.training.TrainProgress`), so it reads -:--:-- while that
    stage is the only one measured.
    """
    if not sys.stderr.isatty():
        started = time.monotonic()

        def line(stage: str, done: int, total: int) -> None:
            typer.echo(f"[{time.monotonic() - started:6.1f}s] {done}/{total} {stage}", err=True)

        yield line
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn())
    with Progress(*columns, console=console(stderr=True)) as bar:
        task = bar.add_task("training", total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        yield update


@app.command()
def train(
    data: Annotated[Path | None, typer.Option(help="Labelled JSONL file or folder.")] = None,
    out: Annotated[Path | None, typer.Option(help="Model folder (default: models/).")] = None,
    backend: Annotated[
        TrainBackend, typer.Option(help="The model to fit; e5 needs the [e5] extra.")
    ] = "local",
) -> None:
    """Train the embedded model from labelled data and write its default policy.

    Progress goes to stderr: a bar with elapsed time and ETA on a terminal, one line per
    stage otherwise.
    """
    from router.app.training import train_local
    from router.settings import get_settings

    settings = get_settings()
    model_dir = out or settings.model_dir
    default_policy = settings.policy_path if backend == "local" else settings.e5_policy_path
    policy_path = default_policy if out is None else model_dir / default_policy.name
    with _train_progress() as progress:
        result = train_local(
            data or settings.routes_data,
            model_dir,
            policy_path=policy_path,
            steering_data=settings.steering_data,
            backend=backend,
            progress=progress,
        )
    typer.echo(f"model  {result.model_path}  sha256 {result.artifact_sha[:16]}…")
    typer.echo(f"policy {result.policy_path}  threshold {result.policy.threshold:.2f}")


@app.command()
def route(
    text: Annotated[str, typer.Argument(help="The customer message.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
) -> None:
    """Route one message with the configured model and policy (not logged)."""
    from router.app.bootstrap import build_router_offline
    from router.routing.rules import RouteRequest
    from router.settings import get_settings

    decision = build_router_offline(get_settings()).decide(RouteRequest(text=text))
    if as_json:
        typer.echo(decision.model_dump_json(indent=2))
        return
    scores = decision.scores
    detail = f" (choice {scores.choice}, confidence {scores.confidence:.3f})" if scores else ""
    typer.echo(
        f"{decision.route}  reason={decision.reason}{detail}  policy={decision.policy_version}"
    )


def format_eval(metrics: dict[str, Any]) -> Table:
    from rich.table import Table

    table = Table(title=f"{metrics['model']} at threshold {metrics['threshold']:.2f}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (
        "n",
        "accuracy",
        "macro_f1",
        "coverage",
        "clarify_rate",
        "unclear_recall",
        "misroute_rate_routed",
        "misroute_rate",
        "correct_outcome_rate",
        "ece_15",
    ):
        value = metrics[key]
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    for label, stats in metrics["per_route"].items():
        table.add_row(
            f"{label} P/R (n)", f"{stats['precision']:.3f}/{stats['recall']:.3f} ({stats['n']})"
        )
    for group in ("per_label", "per_language"):
        for name, stats in metrics.get(group, {}).items():
            table.add_row(
                f"{name} coverage / misroutes among routed (n)",
                f"{stats['coverage']:.3f} / {stats['misroute_rate_routed']:.3f} ({stats['n']})")
    return table


@app.command("eval")
def eval_command(
    data: Annotated[Path, typer.Option(help="JSONL with at least `text` and `label`.")],
    backend: Annotated[Backend, typer.Option(help="The backend to evaluate.")] = "local",
    policy: Annotated[
        Path | None, typer.Option(help="Policy artifact (default: the backend's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every figure as JSON.")] = False,
    predictions_out: Annotated[
        Path | None, typer.Option(help="Also write predictions JSONL.")
    ] = None,
) -> None:
    """Evaluate a backend at a policy on labelled rows."""
    from calibration.data import load_labelled
    from calibration.evaluation import evaluate
    from router.app.bootstrap import load_backend
    from router.settings import get_settings
    from router.storage.policy_store import ensure_policy_fits, load_policy

    rows = load_labelled(data)
    bound = load_backend(get_settings(), backend)
    chosen_policy = load_policy(policy) if policy else bound.policy
    if chosen_policy.model.artifact_sha is not None:
        # The model comes from settings, not from the policy: a policy certified for
        # another artifact would silently be judged on this one.
        ensure_policy_fits(chosen_policy, bound.policy.model)
    cascade: dict[str, Any] = {}
    if backend == "cascade":
        scores, cascade = _eval_cascade(bound.model, [r.text for r in rows], chosen_policy)
    else:
        scores = bound.model.score_batch([r.text for r in rows])
    metrics = evaluate([r.label for r in rows], scores, chosen_policy, tags=[r.tags for r in rows],
                       languages=[r.lang for r in rows])
    metrics.update(cascade)
    if predictions_out:
        with predictions_out.open("w", encoding="utf-8") as handle:
            for row, s in zip(rows, scores, strict=True):
                # A cascade's rows are named by the cascade (one model per prediction
                # file), with the stage that answered alongside.
                extra = ({"model": chosen_policy.model.name, "stage": s.model,
                          "question_sha": chosen_policy.model.artifact_sha}
                         if backend == "cascade" else {})
                handle.write(json.dumps({"id": row.id, **s.model_dump(), **extra},
                                        ensure_ascii=False) + "\n")
    if as_json:
        typer.echo(json.dumps(metrics, indent=2))
    else:
        console().print(format_eval(metrics))


def _eval_cascade(model: object, texts: list[str], policy: Any) -> tuple[list[Any], dict[str, Any]]:
    """The cascade's answers under `policy`'s stages, one message at a time, with each
    stage's share and the per-message latency (`calibration.evaluation.stage_summary`)."""
    from calibration.evaluation import stage_summary
    from router.app.cascade import answer_timed
    from router.routing.cascade import CascadeModel

    if not isinstance(model, CascadeModel) or policy.stages is None:
        raise typer.BadParameter("--policy: a cascade is evaluated at a cascade policy")
    answers, latencies = answer_timed(CascadeModel(model.models, policy.stages), texts)
    scores = [a.scores for a in answers]
    # `model` names the cascade; each row's scores name the stage that answered it.
    return scores, {**stage_summary([s.model for s in scores], latencies),
                    "model": policy.model.name}


register_data_commands(app)
register_cascade_command(app)
register_compare_commands(app)
register_shadow_commands(app)
register_drift_command(app)
app.add_typer(approvals_app, name="approvals")
app.add_typer(tasks_app, name="tasks")
app.add_typer(fallback_app)
app.add_typer(keys_app, name="keys")
app.add_typer(experiment_app, name="experiment")


def main() -> None:
    """The `support-router` console script: the typer app, in a process whose compiled
    caches live under the data dir, not in the installed package (router/settings.py).

    Help needs neither settings nor caches, and stays fast without them.
    """
    args = sys.argv[1:]
    if args and not {"--help", "-h"} & set(args):
        from pydantic import ValidationError

        from router.settings import get_settings, keep_caches_in_var_dir

        try:
            keep_caches_in_var_dir(get_settings())
        except ValidationError:
            pass  # the command that needs the settings reports them; others need none
    app()

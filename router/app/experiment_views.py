"""What a person reads about the running experiment: the console's experiments page.

The running experiment is the one the shared database marks running
(`router.storage.experiment_db`), whichever worker answers; its live figures are those
of `support-router ab-report` (`calibration.ab_report`) over every decision-log row of
its name, without labels: the traffic split and its sample-ratio check, and per variant
the routes, clarify rate, confidence and the handlers' outcomes. `experiment_view` is
pure over the stored run and the rows; `read_experiments` does the two reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from router.contracts import VariantConfig
from router.storage.decision_log import DecisionLog
from router.storage.experiment_db import ExperimentDB, ExperimentRun


class SampleRatioOut(BaseModel):
    """Chi-square of the observed split against the configured shares."""

    statistic: float
    df: int
    p_value: float
    mismatch: bool
    """p below `level`: the split is broken; no other figure is to be trusted."""
    level: float = 0.001
    """`calibration.ab_report.SRM_P`, the level `ab-report` flags a mismatch at."""


class VariantOut(BaseModel):
    name: str
    backend: str
    model: str | None
    policy: str | None
    configured_share: float
    requests: int
    observed_share: float
    routes: dict[str, int]
    clarify_rate: float
    mean_confidence: float | None
    outcomes: dict[str, int]
    shadow_agreement: dict[str, float | None]
    """Shadow name → share of this variant's requests it routed the same way."""


class HorizonOut(BaseModel):
    planned_requests: int | None
    requests: int
    reached: bool
    warning: str


class RunningExperimentOut(BaseModel):
    run: ExperimentRun
    requests: int
    variants: list[VariantOut]
    shadows: list[str]
    sample_ratio: SampleRatioOut
    route_homogeneity_p: float | None
    """Chi-square p-value of routes × variant (None: too few requests to test)."""
    horizon: HorizonOut
    notes: list[str]


class ExperimentsPageOut(BaseModel):
    running: RunningExperimentOut | None
    """None: no experiment runs (the page's empty state)."""
    history: list[ExperimentRun]
    """Every start, newest first."""


def _variant(config: VariantConfig, report: dict[str, Any]) -> VariantOut:
    figures = report["variants"][config.name]
    traffic = report["traffic"]
    return VariantOut(
        name=config.name, backend=config.backend, model=config.model,
        policy=str(config.policy) if config.policy is not None else None,
        configured_share=traffic["expected_shares"][config.name],
        requests=figures["n"], observed_share=traffic["shares"][config.name],
        routes=figures["routes"], clarify_rate=figures["clarify_rate"],
        mean_confidence=figures["confidence"].get("mean"), outcomes=figures["outcomes"],
        shadow_agreement={name: entry["route_agreement"]
                          for name, entry in figures["shadow_agreement"].items()})


def experiment_view(run: ExperimentRun, rows: list[dict[str, Any]]) -> RunningExperimentOut:
    """The running experiment's live figures from its decision-log rows (oldest first)."""
    # Imported here: SciPy's statistics are no part of serving a message
    # (tests/router/models/test_serving_imports.py), only of this page.
    from calibration.ab_report import ab_report

    config = run.config
    report = ab_report(rows, experiment=run.name, expected_shares=config.expected_shares(),
                       planned_requests=config.planned_requests)
    horizon = report["horizon"]
    homogeneity = report["route_homogeneity"]
    return RunningExperimentOut(
        run=run, requests=report["n"],
        variants=[_variant(v, report) for v in config.variants],
        shadows=[s.name for s in config.shadows],
        sample_ratio=SampleRatioOut(**report["traffic"]["srm"]),
        route_homogeneity_p=homogeneity["p_value"] if homogeneity else None,
        horizon=HorizonOut(planned_requests=horizon["planned_requests"], requests=horizon["n"],
                           reached=horizon["reached"], warning=horizon["warning"]),
        notes=report["notes"])


def read_experiments(db: ExperimentDB, log: DecisionLog) -> ExperimentsPageOut:
    """The database's running experiment with its live figures, and every start."""
    running = db.running()
    view = (experiment_view(running, log.experiment_rows(running.name))
            if running is not None else None)
    return ExperimentsPageOut(running=view, history=db.history()[::-1])

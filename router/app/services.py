"""The running system, as every entry point (HTTP, CLI, task runner) receives it."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine

from handlers.desk import SupportDesk
from router.app.active_report import ReportCache
from router.app.cascade_join import CascadeJoin
from router.app.conversation import Conversation
from router.app.drift import DriftGauges
from router.app.experiment_sync import ExperimentFollower
from router.app.labelling import Labelling
from router.app.policy_sync import PolicyFollower
from router.routing.service import RouterService
from router.settings import Settings
from router.storage.decision_log import DecisionLog
from router.storage.label_db import LabelDB


@dataclass
class Services:
    settings: Settings
    engine: Engine
    router: RouterService
    desk: SupportDesk
    """The handlers' entry point, built on the same engine."""
    policies: PolicyFollower
    """The primary policy as the database names it: publish, rollback, reload, polling."""
    experiments: ExperimentFollower
    """The experiment the database marks running: start, stop, polling."""
    drift: DriftGauges
    """The drift gauges of `/metrics`, over the primary policy's recent decisions."""
    log: DecisionLog
    """The decision log the router writes (and the console's labelling and experiment
    figures read)."""
    ready: bool = False
    cascade: CascadeJoin | None = None
    """The e5 stage on its way in (backend=cascade started before it was trained)."""
    conversation: Conversation = field(init=False)
    """The message use case over `router` and `desk`."""
    labelling: Labelling = field(init=False)
    """The data team's labelling over the decision log (it only reads the log)."""
    reports: ReportCache = field(init=False)
    """The served policy's calibration report, rendered once per version."""

    def __post_init__(self) -> None:
        self.conversation = Conversation(self.router, self.desk)
        self.labelling = Labelling(LabelDB(self.engine), self.log,
                                   overlap=self.settings.label_overlap)
        self.reports = ReportCache(self.settings.routes_data)

    @property
    def pending(self) -> list[str]:
        """What a ready gateway still waits for (`/readyz`): usually nothing."""
        return self.cascade.pending if self.cascade is not None else []

    def close(self) -> None:
        """Stop polling the policy and the experiment, commit queued log rows, stop the
        shadow thread, release connections."""
        if self.cascade is not None:
            self.cascade.stop()
        self.policies.stop()
        self.experiments.stop()
        self.router.close()
        self.desk.close()
        self.engine.dispose()

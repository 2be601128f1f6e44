"""The values each enumerated option of the CLI accepts, as `Literal`s Typer turns into
choices (a wrong value is a usage error that lists them).

They repeat the types of the modules that own them, because those modules import numpy
or pydantic and `--help` must not; `tests/router/cli/test_help.py` keeps each one equal
to its owner's.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Backend = Literal["local", "e5", "typesafe", "cascade"]
"""`router.contracts.Backend`: the decision-model backends."""

ScoreBackend = Literal["local", "e5", "typesafe"]
"""The backends `score` writes prediction files of: one model each (a cascade's
predictions come from `eval --backend cascade --predictions-out`)."""

TrainBackend = Literal["local", "e5"]
"""The backends `train` fits here (`router.app.training.MODEL_FILES`)."""

CalibratorKind = Literal["none", "temperature", "isotonic"]
"""`router.contracts.CalibratorKind`."""

Sample = Literal["random", "uncertainty", "disagreement", "stratified", "drifted"]
"""`calibration.label.Sample`: how `label` picks the requests to label."""

ReportPart = Literal["test", "all"]
"""`report --part`: the rows `calibrate` held out, or every row outside the model's
training split."""

ApprovalFilter = Literal["held", "approved", "rejected", "closed", "all"]
"""`handlers.services.refunds.ApprovalFilter`."""

SupervisorDecision = Literal["approve", "reject"]
"""`handlers.services.refunds.SupervisorDecision`."""

Sender = Literal["verified", "claimed"]
"""`router.app.tasks.SENDERS`: how the task runner's channel vouches for a sender."""

HANDOFF_PAGE_SIZE = 50
"""`handlers.fallback.handoffs.DEFAULT_PAGE_SIZE`."""
HANDOFF_MAX_PAGE_SIZE = 200
"""`handlers.fallback.handoffs.MAX_PAGE_SIZE`."""

class Role(StrEnum):
    """`router.access.Role`; an Enum because Typer takes a repeated option of Enum members,
    not of `Literal` values."""

    GATEWAY = "gateway"
    AGENT = "agent"
    SUPERVISOR = "supervisor"
    LABELLER = "labeller"
    ADMIN = "admin"

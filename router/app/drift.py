"""The drift monitor's I/O: a window of the decision log beside the active policy's reference.

`drift_report` reads the window (the newest model decisions of one policy version, never
their text) and hands it to `router.routing.drift.compare`; `support-router drift` prints
the result. `DriftGauges` keeps the `/metrics` gauges (`router.telemetry.metrics`) from
it: computed when `/metrics` is scraped, at most once every `drift_refresh_s`.

Why on scrape and not on a timer: nothing is read while nobody scrapes, a scrape never
sees figures older than the refresh interval, and with several workers only the worker
that answers the scrape queries the database (each computes the same figures from the
one shared log). The query is bounded (`drift_max_rows`, newest first) and runs on the
scrape's worker thread, never on a routing request's path.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from router.contracts import DriftReference, EmbeddingSummary, Policy
from router.routing.drift import (
    EMBEDDING_FEATURE,
    STATUS_VALUES,
    DriftReport,
    compare,
    reference_from_decisions,
)
from router.routing.embedding_drift import window_summary
from router.storage.decision_log import DecisionLog
from router.storage.message_features import LANGUAGE_GUESSER
from router.telemetry.metrics import DRIFT_FEATURES, export_drift

logger = logging.getLogger(__name__)


def summarise(rows: Sequence[dict[str, Any]], embedding: EmbeddingSummary | None = None
              ) -> DriftReference | None:
    """The decision-log rows of `DecisionLog.feature_rows` as counts (None: no rows);
    with the reference's `embedding` summary, the rows' projections (those that have
    them: e5-scored decisions) counted in its bins."""
    if not rows:
        return None
    projections = [json.loads(r["projections"]) for r in rows
                   if r.get("projections") is not None]
    return reference_from_decisions(
        confidences=[float(r["confidence"]) for r in rows],
        routed=[r["route"] != "clarify" for r in rows],
        choices=[str(r["choice"]) for r in rows],
        text_chars=[int(r["text_chars"]) for r in rows],
        languages=[str(r["lang"]) for r in rows],
        source="decision log",
        language_guesser=LANGUAGE_GUESSER,
        embedding=None if embedding is None else window_summary(embedding, projections),
    )


def drift_report(log: DecisionLog, policy: Policy, *, since: datetime,
                 max_rows: int) -> DriftReport:
    """The policy's model decisions since `since` (the newest `max_rows`) against the
    reference it was certified with."""
    if policy.reference is None:
        return compare(None, None)
    rows = log.feature_rows(policy_version=policy.version, since=since, limit=max_rows)
    return compare(policy.reference, summarise(rows, policy.reference.embedding))


def export_report(report: DriftReport) -> None:
    """Set the drift gauges from one report."""
    figures = {f.feature: (f.psi, STATUS_VALUES[f.status]) for f in report.features}
    if report.features:
        # A verdict was given: a feature it lacks was left out for the reason `absent`
        # gives (an embedding feature of a policy without an embedding summary, or the
        # language of a reference counted by another guesser: no_reference).
        embedding_why = report.absent.get(EMBEDDING_FEATURE, "no_reference")
        for name in DRIFT_FEATURES:
            why = report.absent.get(name, embedding_why)
            figures.setdefault(name, (float("nan"), STATUS_VALUES[why]))
    export_drift(STATUS_VALUES[report.verdict], figures, report.n_recent)


class DriftGauges:
    """The drift gauges of one gateway process, refreshed on scrape (see the module doc)."""

    def __init__(self, log: DecisionLog, policy: Callable[[], Policy], *, window_s: float,
                 refresh_s: float, max_rows: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._policy = policy
        self._window = timedelta(seconds=window_s)
        self._refresh_s = refresh_s
        self._max_rows = max_rows
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None

    def refresh_if_due(self) -> None:
        """Recompute the gauges unless they were computed less than `refresh_s` ago.

        A database that does not answer leaves the previous figures (and logs why):
        `/metrics` still answers with every other metric.
        """
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last < self._refresh_s:
                return
            self._last = now
            try:
                report = drift_report(self._log, self._policy(),
                                      since=datetime.now(UTC) - self._window,
                                      max_rows=self._max_rows)
            except SQLAlchemyError as exc:
                logger.warning("drift gauges not refreshed: the decision log did not answer "
                               "(%s)", type(exc).__name__)
                return
            export_report(report)

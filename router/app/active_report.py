"""The calibration report of the policy this worker serves, as the console shows it.

The same figures and plots as `support-router report --part test` (`calibration.report`)
on the configured labelled data (`routes_data`): the rows outside the model's training
split (by id or identical text) that fall in the test part, which `calibrate` never
fits or certifies on. They are scored by the running model, so the report is about the
model and policy that decide today's traffic. The plots are PNGs inlined as `data:`
URLs, so the page needs no other request and no asset outside the package.

A report is a pure function of (policy version, model, labelled data), so each worker
keeps the last one it rendered and renders again only when one of them changed. A render
takes a few seconds (scoring, 1,000 bootstrap resamples, four plots), so it runs on a
thread of its own while the page says so (`ReportCache.ready`).
matplotlib and SciPy are imported by the first render, not by a gateway that never
shows the page.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.data import data_sha, load_labelled
from calibration.splits import assign_parts, model_train_mask
from router.contracts import ROUTES, Policy
from router.errors import SupportRouterError
from router.models.base import DecisionModel

logger = logging.getLogger(__name__)

ROWS_NOTE = ("test part of the labelled data, outside the model's training split: never used "
             "to fit or certify")


@dataclass(frozen=True)
class ReportPage:
    """The rendered report and what it is about."""

    policy_version: str
    model: str
    labels_sha: str
    n_rows: int
    html: str
    """The report's sections, every value escaped, the plots inline."""


def _data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_policy_report(model: DecisionModel, policy: Policy, labelled: Path, *,
                         training_data: Path, n_boot: int = 1000) -> ReportPage:
    """Score the test part of `labelled` with `model` and render `policy`'s report.

    `training_data`: the routing data the model was trained from (`routes_data`), whose
    training rows are left out as `support-router report` leaves them out.
    """
    # Imported here: matplotlib and SciPy's statistics are no part of serving a message
    # (tests/router/models/test_serving_imports.py), only of this page.
    from calibration.report.policy_report import draw_plots, render_fragment, report_figures

    rows = load_labelled(labelled)
    ids = np.asarray([r.id for r in rows], dtype=object)
    texts = [r.text for r in rows]
    training = rows if training_data == labelled else load_labelled(training_data)
    excluded = model_train_mask(ids, texts, training)
    index = assign_parts(ids, excluded=excluded).test
    picked = [rows[i] for i in index]
    scores = model.score_batch([r.text for r in picked]) if picked else []
    probabilities = np.asarray([[s.probabilities[r] for r in ROUTES] for s in scores],
                               dtype=float).reshape(len(picked), len(ROUTES))
    labels = np.asarray([r.label for r in picked])
    figures = report_figures(labels, probabilities, policy,
                             languages=np.asarray([r.lang for r in picked]), n_boot=n_boot)
    with tempfile.TemporaryDirectory(prefix="support-router-report-") as folder:
        plots = draw_plots(figures, labels=labels, policy=policy, out_dir=Path(folder))
        sources = {name: _data_url(path) for name, path in plots.items()}
    html = render_fragment(figures, policy=policy, ids=ids[index], texts=[r.text for r in picked],
                           labels=labels, rows_note=ROWS_NOTE, plot_sources=sources)
    return ReportPage(policy_version=policy.version, model=model.name,
                      labels_sha=data_sha(rows), n_rows=len(picked), html=html)


class ReportCache:
    """The last report this worker rendered, again while its inputs are unchanged.

    `ready` never waits for a render: it starts one in the background and answers None
    (the page says it is being prepared and reloads), so no request holds a worker for
    the seconds a render takes and a gateway nobody asks for a report renders none.
    """

    def __init__(self, labelled: Path, *, n_boot: int = 1000) -> None:
        """`labelled`: the routing data the model was trained from (`routes_data`); its
        test part is what the report is about."""
        self.labelled = labelled
        self.n_boot = n_boot
        self._lock = threading.Lock()
        self._page: ReportPage | None = None
        self._key: _Key | None = None
        self._rendering: set[_Key] = set()
        self._failed: dict[_Key, Exception] = {}

    def ready(self, model: DecisionModel, policy: Policy) -> ReportPage | None:
        """The report of `policy` on `model` if rendered, else None (a render started).

        Raises
        ------
        Exception
            what the last render of these inputs raised (once; the next call renders
            again), e.g. `ModelUnavailable` from a remote model.
        """
        key = self._key_of(model, policy)
        with self._lock:
            if self._page is not None and self._key == key:
                return self._page
            failure = self._failed.pop(key, None)
            if failure is not None:
                raise failure
            if key not in self._rendering:
                self._rendering.add(key)
                threading.Thread(target=self._render, args=(key, model, policy),
                                 name="report-render", daemon=True).start()
            return None

    def page(self, model: DecisionModel, policy: Policy, *, timeout_s: float = 120.0
             ) -> ReportPage:
        """The report of `policy` on `model`, waiting for its render."""
        deadline = time.monotonic() + timeout_s
        while (page := self.ready(model, policy)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the report of {policy.version} took over {timeout_s} s")
            time.sleep(0.05)
        return page

    def _key_of(self, model: DecisionModel, policy: Policy) -> _Key:
        return (policy.version, model.name, _files_sha(self.labelled))

    def _render(self, key: _Key, model: DecisionModel, policy: Policy) -> None:
        try:
            page = render_policy_report(model, policy, self.labelled,
                                        training_data=self.labelled, n_boot=self.n_boot)
        except Exception as exc:  # noqa: BLE001 - shown to whoever asks next
            if not isinstance(exc, SupportRouterError):
                logger.exception("the calibration report of %s did not render",
                                 policy.version)
            with self._lock:
                self._failed[key] = exc
                self._rendering.discard(key)
            return
        with self._lock:
            self._page, self._key = page, key
            self._rendering.discard(key)


_Key = tuple[str, str, str]
"""(policy version, model name, what the labelled files are)."""


def _files_sha(path: Path) -> str:
    """What the labelled files are now (names, sizes, modification times): cheap enough
    to check on every request, unlike hashing their content."""
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()

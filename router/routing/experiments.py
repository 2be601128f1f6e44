"""Online experiments: sticky variant assignment and shadow scoring off the request path.

An experiment (an `ExperimentConfig`, started and stopped in the shared database and
followed by every worker: router/app/experiment_sync.py) names live variants, each a
backend + model + policy with a weight, and optional **shadow** variants that score the
same requests without ever answering them.

Assignment is sticky and stateless: ``bucket = sha256("salt:experiment:unit") mod 10000``
where the unit is the customer id, else the case id, else the request id (a request with
neither is assigned on its own and is not sticky). Weights cut [0, 10000) into
consecutive ranges in the order the variants are listed, so the same customer gets the
same variant in every process and after every restart while the configuration stays the
same; renaming the experiment or changing the salt reshuffles everyone.

Shadows: after the live decision is committed, a sampled request
(`SUPPORT_ROUTER_SHADOW_SAMPLE_RATE`) is scored with every shadow variant and their
decisions go into the live row's `shadow` column. With Redis configured that happens in
`support-router shadow-worker` processes fed by a durable stream (router/routing/shadows.py);
without it (development) a request is put on a bounded in-process queue (`put_nowait`:
the request never waits) for one background thread (`ShadowWorker`). When that queue is
full the shadow work is dropped and counted, never the response; a stopped process loses
what was queued.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Callable

from router.contracts import BUCKETS, ExperimentConfig, VariantConfig, bucket_bounds
from router.telemetry.metrics import SHADOW_DROPPED

logger = logging.getLogger(__name__)


def bucket(salt: str, experiment: str, unit: str) -> int:
    """A stable bucket in [0, 10000) (sha256, not Python's per-process `hash`)."""
    digest = hashlib.sha256(f"{salt}:{experiment}:{unit}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def assignment_unit(*, customer: str | None, case_id: str | None, request_id: str) -> str:
    """What assignment is sticky to: the customer, else the case, else the request."""
    if customer:
        return f"customer:{customer}"
    if case_id:
        return f"case:{case_id}"
    return f"request:{request_id}"


def assign(config: ExperimentConfig, unit: str) -> VariantConfig:
    """The live variant of one assignment unit."""
    b = bucket(config.salt, config.name, unit)
    for variant, upper in zip(config.variants, bucket_bounds([v.weight for v in config.variants]),
                              strict=True):
        if b < upper:
            return variant
    return config.variants[-1]  # unreachable: the last bound is BUCKETS


class ShadowWorker:
    """One daemon thread running queued shadow jobs; a full queue drops work, not requests."""

    def __init__(self, *, maxsize: int = 1000) -> None:
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=maxsize)
        self.dropped = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="shadow-worker", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> bool:
        """Enqueue without waiting; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(job)
            return True
        except queue.Full:
            self.dropped += 1
            SHADOW_DROPPED.inc()
            return False

    def drain(self) -> None:
        """Wait until every queued job has run (tests and shutdown)."""
        self._queue.join()

    def close(self) -> None:
        """Finish queued jobs, then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                job()
            except Exception:  # a shadow failure must never reach the live path
                self.failed += 1
                logger.exception("shadow scoring failed")
            finally:
                self._queue.task_done()

"""A background thread that calls one sync function every interval: how every worker
follows what the shared database says (the active policy, the running experiment).

Polling rather than PostgreSQL's LISTEN/NOTIFY: it works the same on SQLite, and one
indexed single-row read a second per worker costs nothing next to the requests. A sync
that raises (the database away for a while) is retried at the next tick, and logged once
an outage, not once a tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Poller:
    def __init__(self, sync: Callable[[], None], *, interval_s: float, name: str,
                 reading: str) -> None:
        """`reading`: what `sync` reads, for the log lines (`the active policy version`)."""
        self.sync = sync
        self.interval_s = interval_s
        self.name = name
        self.reading = reading
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.interval_s):
            try:
                self.sync()
            except Exception:  # the database away for a while: the next tick retries
                if not failing:  # once an outage, not once a tick
                    logger.warning("%s: cannot read %s from the database; retrying every "
                                   "%.3g s", self.name, self.reading, self.interval_s,
                                   exc_info=True)
                failing = True
                continue
            if failing:
                logger.info("%s: reading %s from the database again", self.name, self.reading)
            failing = False

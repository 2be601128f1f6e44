"""Every worker runs the experiment the database marks running, or none.

At start (`ExperimentFollower.start`): a database where no experiment was ever started
adopts `SUPPORT_ROUTER_EXPERIMENT` (the seed), if set and its variants load here;
otherwise the database wins and the seed is ignored, which the start log says. Then a
background thread (router/app/polling.py) reads the running experiment's id every
`policy_poll_s`; when it changed, it loads the variants on that thread, off the request
path, and swaps the loaded experiment into the router service in one assignment, so a
start or stop made through any worker, host or the CLI reaches every worker within the
poll interval plus the load.

An experiment whose variants do not load in this worker is logged once and skipped: the
worker then runs none (the one it ran before is no longer running). Starts and stops
made here and the poller are serialised by one lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from router.app.polling import Poller
from router.contracts import ExperimentConfig
from router.errors import Conflict, SupportRouterError
from router.routing.service import LiveExperiment, RouterService
from router.storage.experiment_db import ExperimentDB, ExperimentRun

logger = logging.getLogger(__name__)

SEED = "SUPPORT_ROUTER_EXPERIMENT"
"""Who an adopted experiment was started by."""


class ExperimentFollower:
    def __init__(self, db: ExperimentDB, router: RouterService, *,
                 load: Callable[[ExperimentConfig], LiveExperiment],
                 seed: ExperimentConfig | None, poll_s: float) -> None:
        """`load`: every variant of a config loaded, or `InvalidInput` naming the one
        that does not load (router.app.bootstrap.load_experiment)."""
        self.db = db
        self.router = router
        self.load = load
        self.seed = seed
        self._lock = threading.Lock()
        self._served: int | None = None
        self._skipped: int | None = None
        self._poller = Poller(self.sync, interval_s=poll_s, name="experiment-follower",
                              reading="the running experiment")

    def start(self) -> None:
        """Adopt the seed or follow the database, say which, then poll in the background."""
        if self.seed is not None:
            self._adopt(self.seed)
        self.sync()
        running = self.router.experiment
        if running is not None:
            logger.info("experiment: running %s, the database's running experiment",
                        running.config.name)
        elif self._skipped is None:
            logger.info("experiment: none running in the database")
        self._poller.start()

    def stop(self) -> None:
        self._poller.stop()

    def begin(self, config: ExperimentConfig, *, by: str) -> ExperimentRun:
        """Start `config` (every variant loaded first) and run it here at once.

        Raises
        ------
        Conflict
            `experiment_running`, `experiment_name_taken` (nothing written).
        InvalidInput
            `invalid_variant`: a variant does not load (nothing written).
        """
        with self._lock:
            running = self.db.running()
            if running is not None:  # before loading anything: the usual refusal is cheap
                raise Conflict(f"experiment {running.name!r} is running; stop it first",
                               code="experiment_running")
            live = self.load(config)
            run = self.db.start(config, by=by)
            self._serve(run.id, live)
            return run

    def end(self, name: str, *, by: str) -> ExperimentRun:
        """Stop the running experiment `name` and run none here at once."""
        with self._lock:
            run = self.db.stop(name, by=by)
            self._serve(None, None)
            return run

    def sync(self) -> None:
        """Run the database's running experiment if it is not the one run here."""
        with self._lock:
            run_id = self.db.running_id()
            if run_id == self._served or (run_id is not None and run_id == self._skipped):
                return
            if run_id is None:
                previous = self._serve(None, None)
                logger.info("experiment: %s stopped; no experiment running",
                            previous.config.name if previous else None)
                return
            try:
                run = self.db.load(run_id)
                live = self.load(run.config)
            except SupportRouterError as exc:
                previous = self._serve(None, None)
                self._skipped = run_id
                logger.error("experiment: the database's running experiment (run %d) is not "
                             "run by this worker, which runs none%s: %s: %s", run_id,
                             f" (stopped {previous.config.name})" if previous else "",
                             exc.code, exc.message)
                return
            previous = self._serve(run.id, live)
            logger.info("experiment: now running %s (was %s)", run.name,
                        previous.config.name if previous else None)

    def _adopt(self, seed: ExperimentConfig) -> None:
        if self.db.running_id() is None and self.db.latest() is None:
            try:
                live = self.load(seed)
            except SupportRouterError as exc:
                logger.error("experiment: %s (%s) is not adopted: %s: %s", SEED, seed.name,
                             exc.code, exc.message)
                return
            with self._lock:
                run = self.db.adopt(seed, by=SEED)
                if run is not None:
                    self._serve(run.id, live)
                    logger.info("experiment: the database had no experiments; adopted %s "
                                "from %s (the database is authoritative from now on)",
                                seed.name, SEED)
                    return
        logger.info("experiment: %s (%s) is ignored: the database has experiments, and "
                    "it wins", SEED, seed.name)

    def _serve(self, run_id: int | None,
               live: LiveExperiment | None) -> LiveExperiment | None:
        self._served, self._skipped = run_id, None
        return self.router.swap_experiment(live)

"""Every worker serves the policy version the database names active.

At start (`PolicyFollower.start`): a database with no active policy adopts the one this
worker loaded from its file; otherwise the database wins and its version is swapped in.
Then a background thread (router/app/polling.py) reads the active pointer (one row)
every `policy_poll_s` and swaps the policy in when the version changed, so a publish or
rollback made through any worker or host, or the CLI, is served everywhere within the
poll interval plus one read.

A version is swapped in only once it passes what a publish checks on this model: it
names the running model (`ensure_policy_fits`) and decides the probe messages
(`check_policy`). One that does not is logged once and skipped; the worker keeps what it
serves. Changes made here (publish, rollback, reload) and by the poller are serialised
by one lock, so a poll that read the old pointer cannot swap back over a fresh publish.
The policy file follows every swap, for the offline tools that read it.

A stage that joins later (`follow`: the cascade, once e5 is trained) brings its own
slot and file: the worker then serves that model and follows that slot, and the slot it
followed before is left as it was, for the model it belongs to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from router.app.polling import Poller
from router.contracts import Policy, RouteScores
from router.errors import ArtifactError, ModelUnavailable, SupportRouterError
from router.routing.policy import running_model
from router.routing.policy_check import check_policy, probe_scores
from router.routing.service import BoundModel, RouterService
from router.storage.policy_db import PolicyDB
from router.storage.policy_store import PolicySwitch, ensure_policy_fits, save_policy

logger = logging.getLogger(__name__)


class PolicyFollower:
    def __init__(self, db: PolicyDB, router: RouterService, *, policy_file: Path,
                 poll_s: float) -> None:
        self.db = db
        self.router = router
        self.policy_file = policy_file
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._poller = Poller(self.sync, interval_s=poll_s, name="policy-follower",
                              reading="the active policy version")
        self._running = running_model(router.primary.model, router.primary.policy)
        self._scores: list[RouteScores] | None = None
        self._skipped: str | None = None

    def start(self) -> None:
        """Adopt or follow the database's active policy, then poll it in the background."""
        with self._lock:
            self._adopt_or_follow()
        self._poller.start()

    def follow(self, primary: BoundModel, db: PolicyDB, *, policy_file: Path) -> None:
        """Serve `primary` from now on and follow its own slot `db` (and `policy_file`):
        adopted into the slot when it has no active version, else the slot's version.

        Done under the lock that publish, rollback and the poller take, so a change made
        meanwhile lands on the slot and model it was made for, and a version of the
        previous slot is never checked against (or applied to) the new model."""
        with self._lock:
            before = (self.db, self.policy_file, self._running, self._scores, self._skipped)
            served = self.router.swap_primary(primary)
            self.db, self.policy_file = db, policy_file
            self._running = running_model(primary.model, primary.policy)
            self._scores, self._skipped = None, None
            try:
                self._adopt_or_follow()
            except BaseException:
                # The database away: keep serving what was served, on the slot it follows.
                self.router.swap_primary(served)
                (self.db, self.policy_file, self._running, self._scores,
                 self._skipped) = before
                raise

    def _adopt_or_follow(self) -> None:
        served = self.router.primary.policy
        if self.db.active_version() is None and self.policy_file.exists():
            if self.db.adopt(served):
                logger.info("policy: the database had no active %s policy; adopted %s from "
                            "%s (the database is authoritative from now on)",
                            self.db.slot, served.version, self.policy_file)
        self._sync()
        now = self.router.primary.policy.version
        if self._skipped is not None:
            pass  # said why in `sync`
        elif now == served.version:
            logger.info("policy: serving %s, the database's active %s policy", now,
                        self.db.slot)
        else:
            logger.info("policy: serving %s from the database (the file %s had %s; it is "
                        "rewritten to follow the database)", now, self.policy_file,
                        served.version)

    def stop(self) -> None:
        self._poller.stop()

    def publish(self, policy: Policy, *, by: str,
                expect_active: str | None = None) -> PolicySwitch:
        """Publish `policy` (checked by `accept`) as `by` and serve it here at once.

        The policy served until now is adopted first when the database has none, so the
        first rollback can return to it. Every entry point that publishes (the admin API,
        the console) calls this, so each publish is checked and recorded the same way.

        Raises
        ------
        Conflict
            `policy_model_mismatch`, `policy_version_exists`, `policy_changed` (the active
            version is not `expect_active`); nothing is written then.
        InvalidPolicy
            it does not decide the probe messages (nothing is written).
        """
        # Read under the lock: the slot and the served policy are those of one model.
        return self._change(lambda: self.db.publish(
            policy, accept=self.accept, adopt=self.router.primary.policy, by=by,
            expect_active=expect_active))

    def rollback(self, *, by: str, expect_active: str | None = None) -> PolicySwitch:
        """Return to the version active before the current one (checked by `accept`) as
        `by`, and serve it here at once.

        Raises
        ------
        Conflict
            `no_previous_policy`, `policy_model_mismatch`, `policy_changed`.
        InvalidPolicy
            the previous version does not load or decide.
        """
        return self._change(lambda: self.db.rollback(accept=self.accept, by=by,
                                                     expect_active=expect_active))

    def _change(self, make: Callable[[], PolicySwitch]) -> PolicySwitch:
        with self._lock:
            switch = make()
            self._serve(switch.policy)
            return switch

    def accept(self, candidate: Policy) -> None:
        """What a policy must pass to become active on the running model: it decides the
        probe messages on it (422 `invalid_policy`) and names that model (409
        `policy_model_mismatch`). Raises whatever the model raises while scoring the
        probes (`ModelUnavailable`: 503), which happens once per worker."""
        scores = self._probe()
        ensure_policy_fits(candidate, self._running)
        check_policy(candidate, scores)

    def reload(self) -> tuple[Policy, Policy]:
        """Serve the database's active policy now (checked by `accept`): (new, previous).

        Raises
        ------
        ArtifactError
            nothing is active in the database.
        InvalidPolicy
            the active version does not load.
        """
        with self._lock:
            policy = self.db.active()
            if policy is None:
                raise _nothing_active(self.db.slot)
            self.accept(policy)
            return policy, self._serve(policy)

    def sync(self) -> None:
        """Swap in the database's active version if it is not the one served here."""
        with self._lock:
            self._sync()

    def _sync(self) -> None:
        version = self.db.active_version()
        if version in (None, self.router.primary.policy.version, self._skipped):
            return
        assert version is not None
        try:
            self._probe()
        except ModelUnavailable as exc:  # a remote model away: the next poll retries
            logger.warning("policy: cannot check version %s on the model yet: %s",
                           version, exc.message)
            return
        try:
            policy = self.db.load_version(version)
            self.accept(policy)
        except SupportRouterError as exc:
            self._skipped = version
            logger.error("policy: the database's active version %s is not served by this "
                         "worker, which keeps %s: %s: %s", version,
                         self.router.primary.policy.version, exc.code, exc.message)
            return
        previous = self._serve(policy)
        logger.info("policy: now serving %s (was %s), the database's active version",
                    policy.version, previous.version)

    def _probe(self) -> list[RouteScores]:
        """The running model's answers to the probe messages, scored once per worker."""
        if self._scores is None:
            self._scores = probe_scores(self.router.primary.model)
        return self._scores

    def _serve(self, policy: Policy) -> Policy:
        previous = self.router.swap_policy(policy)
        self._skipped = None
        try:
            save_policy(policy, self.policy_file)
        except OSError as exc:
            logger.warning("policy: could not rewrite %s to follow the database: %s",
                           self.policy_file, exc)
        return previous


def _nothing_active(slot: str) -> SupportRouterError:
    return ArtifactError(f"the database has no active {slot} policy; publish one")

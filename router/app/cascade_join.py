"""The cascade's strong stage joins a gateway that already serves the fast model.

With `backend=cascade` on a fresh model folder, a gateway starts as `backend=local`
does (the local model, trained in minutes if missing, under its own policy), and this
thread then does the rest in the serving process: train e5, certify the cascade, load it
and hand it to `join`, which swaps the worker's primary model and the policy slot it
follows (router/app/bootstrap.py). Training e5 takes 20 to 40 minutes on two
cores; the gateway answers throughout.

The steps are given as functions, each with what `/readyz` says while it runs
(`pending`). The steps that write (training, certification) take the model folder's
training lock, so with several workers one trains and the others wait for its files.
A cascade without a guarantee never joins: the worker keeps the local model and logs
why. Nothing here reads or logs customer text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from router.errors import SupportRouterError
from router.routing.service import BoundModel
from router.telemetry.metrics import export_cascade_joined

logger = logging.getLogger(__name__)

LOADING = "cascade: loading the e5 stage"


@dataclass(frozen=True)
class JoinStep:
    pending: str
    """What `/readyz` lists under `pending` while the step runs."""
    run: Callable[[], None]


def not_joinable(bound: BoundModel) -> str | None:
    """Why a loaded cascade may not replace the model being served (None: it may)."""
    if bound.policy.stages is None:
        return f"policy {bound.policy.version} is not a cascade policy"
    if bound.policy.guarantee is None:
        return (f"policy {bound.policy.version} carries no guarantee (no pair of stage "
                "thresholds was certified on the labelled data)")
    return None


class CascadeJoin:
    """Runs `steps`, then `load`, then `join` on what it loaded, once, in a daemon thread."""

    def __init__(self, steps: Sequence[JoinStep], *, load: Callable[[], BoundModel],
                 join: Callable[[BoundModel], None]) -> None:
        self.steps = tuple(steps)
        self._load = load
        self._join = join
        self._pending: str | None = self.steps[0].pending if self.steps else LOADING
        self.joined = False
        self.outcome: str | None = None
        """Once it ended: `joined`, or why the local model keeps serving."""
        self._stopped = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> list[str]:
        """What the gateway still waits for, as `/readyz` lists it (empty once ended)."""
        pending = self._pending
        return [] if pending is None else [pending]

    def start(self) -> None:
        export_cascade_joined(False)
        self._thread = threading.Thread(target=self.run, name="cascade-join", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """No switch after this (the services are closing); a training in progress ends
        with the process."""
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it ended within `timeout` seconds."""
        return self._done.wait(timeout)

    def run(self) -> None:
        try:
            self.outcome = self._run()
        except SupportRouterError as exc:
            self.outcome = f"{exc.code}: {exc.message}"
        except Exception as exc:  # noqa: BLE001 - the local model keeps serving whatever failed
            self.outcome = type(exc).__name__
            logger.error("cascade: the e5 stage could not join", exc_info=True)
        finally:
            self._pending = None
            self._done.set()
        if not self.joined:
            logger.warning("cascade: the gateway keeps serving the local model alone (%s)",
                           self.outcome)

    def _run(self) -> str:
        for step in self.steps:
            self._pending = step.pending
            step.run()
            if self._stopped.is_set():
                return "stopped"
        self._pending = LOADING
        bound = self._load()
        why = not_joinable(bound)
        if why is not None:
            return why
        if self._stopped.is_set():
            return "stopped"
        self._join(bound)
        self.joined = True
        export_cascade_joined(True)
        logger.warning("cascade: joined; serving %s under policy %s", bound.model.name,
                       bound.policy.version)
        return "joined"

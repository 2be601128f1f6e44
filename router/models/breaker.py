"""A circuit breaker, and a decision model guarded by it.

Why: when the TypeSafe server is down, every message would otherwise wait through its
timeouts and retries before falling back. After `failure_threshold` consecutive failures
the breaker opens and messages go straight to the fallback (the local model); after
`reset_s` one probe is let through to find out whether the server is back.

    closed    ──(N consecutive failures)──▶ open ──(reset_s elapsed)──▶ half_open
    half_open ──(the probe succeeds)───────▶ closed
    half_open ──(the probe fails)──────────▶ open (for another reset_s)

While the probe is in flight every other call is refused, so a recovering server gets one
request, not a stampede. A call admitted while closed that finishes after the breaker
opened does not count towards the probe: only the probe's own result moves half_open.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from router.contracts import RouteScores
from router.errors import ModelUnavailable
from router.models.base import DecisionModel

logger = logging.getLogger(__name__)

BreakerState = Literal["closed", "open", "half_open"]
T = TypeVar("T")


class CircuitBreaker:
    """Thread-safe closed / open / half-open breaker with an injected clock."""

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        reset_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold={failure_threshold}; need at least 1")
        if reset_s <= 0:
            raise ValueError(f"reset_s={reset_s}; must be positive")
        self.failure_threshold = failure_threshold
        self.reset_s = reset_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False
        self.on_state_change: Callable[[BreakerState], None] | None = None
        """Called (under the lock, so keep it tiny) on every transition; metrics use it."""

    @property
    def state(self) -> BreakerState:
        """For metrics: `half_open` as soon as the next call would be let through as a probe."""
        with self._lock:
            if self._state == "open" and self._clock() - self._opened_at >= self.reset_s:
                return "half_open"
            return self._state

    @property
    def consecutive_failures(self) -> int:
        with self._lock:
            return self._failures

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` if the breaker admits it; any exception from `fn` counts as a failure.

        Raises `ModelUnavailable` (with `retry_after_s` = time until the next probe) without
        calling `fn` when the breaker is open or a probe is already in flight.
        """
        probe = self._admit()
        try:
            result = fn()
        except BaseException:  # a cancelled probe must not leave half_open stuck
            self._record(probe, success=False)
            raise
        self._record(probe, success=True)
        return result

    def _admit(self) -> bool:
        """Let the call through (returning whether it is the probe) or raise."""
        with self._lock:
            if self._state == "closed":
                return False
            if self._state == "open":
                wait = self.reset_s - (self._clock() - self._opened_at)
                if wait > 0:
                    raise ModelUnavailable(
                        f"circuit open; next probe in {wait:.1f}s", retry_after_s=wait
                    )
                self._state = "half_open"
            if self._probe_in_flight:
                raise ModelUnavailable("circuit half-open; a probe is in flight", retry_after_s=0.0)
            self._probe_in_flight = True
            return True

    def _record(self, probe: bool, *, success: bool) -> None:
        with self._lock:
            if probe:
                self._probe_in_flight = False
                self._failures = 0 if success else self._failures + 1
                self._set("closed" if success else "open")
            elif self._state == "closed":  # results of calls admitted before opening are stale
                self._failures = 0 if success else self._failures + 1
                if self._failures >= self.failure_threshold:
                    self._set("open")

    def _set(self, state: BreakerState) -> None:
        if state == "open":
            self._opened_at = self._clock()
        if state != self._state:
            logger.warning(
                "circuit breaker %s -> %s after %d consecutive failures",
                self._state,
                state,
                self._failures,
            )
        self._state = state
        if self.on_state_change is not None:
            self.on_state_change(state)


class GuardedRouteModel:
    """A `DecisionModel` that calls `primary` through `breaker` and raises when it is open.

    This is the piece for callers that pick the fallback themselves, together with the
    fallback's own policy (e.g. `RouterService` with a fallback `BoundModel`): an open
    breaker turns seconds of timeouts into an immediate `ModelUnavailable`.
    """

    def __init__(self, primary: DecisionModel, breaker: CircuitBreaker) -> None:
        self.primary = primary
        self.breaker = breaker

    @property
    def name(self) -> str:
        return self.primary.name

    @property
    def state(self) -> BreakerState:
        return self.breaker.state

    def score(self, text: str) -> RouteScores:
        return self.breaker.call(lambda: self.primary.score(text))

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        """One breaker call for the whole batch, so a batch never mixes two models."""
        return self.breaker.call(lambda: self.primary.score_batch(texts))

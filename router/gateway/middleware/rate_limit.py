"""Token-bucket rate limiting, per caller, with an injectable clock.

A bucket holds at most `burst` tokens and refills at `rate` tokens a second; a request
takes one token or is refused with the time until the next token. Buckets live in the
process, so with N gateway workers (or N processes behind a balancer) a caller can get up
to N× the configured rate: enough to stop a runaway client, not a global quota. With
`SUPPORT_ROUTER_REDIS_URL` set the buckets are shared instead
(router/gateway/middleware/shared_rate_limit.py), with these as the fallback.

The clock is a parameter so tests move time by hand instead of sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

Clock = Callable[[], float]


class TokenBucket:
    """One caller's bucket. Starts full, so a new caller may send `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        # max(): a clock that steps back (it should not: monotonic) never removes tokens.
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._updated = now

    def take(self) -> float:
        """Take one token: 0.0 when allowed, else the seconds until one is available."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate

    @property
    def tokens(self) -> float:
        self._refill()
        return self._tokens

    @property
    def full(self) -> bool:
        return self.tokens >= self.burst


def retry_after_seconds(wait: float) -> int:
    """`Retry-After` is whole seconds; round up so a client that obeys it is let in, ≥ 1."""
    return max(1, math.ceil(wait))


class RateLimiter:
    """A bucket per caller key (an API key's name, or a client address without keys).

    At most `max_callers` buckets are kept, least recently used dropped first, so a flood
    of distinct addresses cannot grow memory without bound (a dropped caller comes back
    with a full bucket, which only matters for callers idle long enough to be dropped).
    """

    def __init__(
        self, rate: float, burst: int, clock: Clock = time.monotonic, max_callers: int = 10_000
    ) -> None:
        TokenBucket(rate, burst, clock)  # validate once, up front
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._max = max_callers
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        # The gateway calls this from the event loop, but the class is usable from threads.
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0.0 when `caller` may go ahead, else the seconds until it may."""
        with self._lock:
            bucket = self._buckets.get(caller)
            if bucket is None:
                bucket = TokenBucket(self.rate, self.burst, self._clock)
                self._buckets[caller] = bucket
                while len(self._buckets) > self._max:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(caller)
            return bucket.take()

    async def acquire(self, caller: str) -> float:
        """`take`, with the shared limiter's signature (the gateway awaits either)."""
        return self.take(caller)

    async def aclose(self) -> None:
        """Nothing to release: the buckets are this process's memory."""

    def __len__(self) -> int:
        return len(self._buckets)

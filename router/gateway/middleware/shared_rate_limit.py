"""Token buckets shared by every worker and host, in Redis (`SUPPORT_ROUTER_REDIS_URL`).

The in-process buckets (router/gateway/middleware/rate_limit.py) give a caller N× its
rate behind N workers or N hosts. Here one bucket per caller lives in Redis and one Lua
script refills and takes from it atomically, on Redis's own clock (`TIME`), so every
process sees the same bucket and hosts need no synchronised clocks. The bucket's
arithmetic is the in-process one: starts full at `burst`, refills at `rate` a second, a
request takes one token or learns how long until the next.

**When Redis cannot answer** (down, unreachable, slower than `timeout_s`), the check falls
back to this worker's in-process bucket for that caller, and Redis is not asked again
for `retry_s`, so an outage costs one timeout a second rather than one per request. A
limit then still holds per process, as without Redis; each fallback counts in
`support_router_rate_limit_store_errors_total` and a warning is logged at most once per
`retry_s`. Failing closed would turn a Redis outage into a gateway outage; failing open
would remove the limit exactly when something is already wrong.
"""

from __future__ import annotations

import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from router.gateway.middleware.rate_limit import RateLimiter
from router.telemetry.metrics import RATE_LIMIT_STORE_ERRORS

logger = logging.getLogger(__name__)


# KEYS[1]: the caller's bucket; ARGV: rate (tokens/s), burst. Returns the wait in seconds
# as a string (a Lua number would come back truncated to an integer). `%.17g` stores the
# floats so they read back exactly. The key expires once the bucket would be full again,
# so idle callers cost Redis nothing.
TAKE_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens = tonumber(state[1]) or burst
local updated = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - updated) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'updated', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return string.format('%.17g', wait)
"""


class SharedRateLimiter:
    """A bucket per caller in Redis, with the process's own buckets as the fallback."""

    def __init__(self, url: str, rate: float, burst: int, *, prefix: str,
                 timeout_s: float = 0.25, retry_s: float = 1.0) -> None:
        self.fallback = RateLimiter(rate, burst)  # also validates rate and burst
        self.rate = rate
        self.burst = burst
        self._prefix = f"{prefix}rate:"
        self._retry_s = retry_s
        self._redis = Redis.from_url(url, socket_timeout=timeout_s,
                                     socket_connect_timeout=timeout_s, retry=None)
        self._take = self._redis.register_script(TAKE_SCRIPT)
        self._skip_until = 0.0

    async def acquire(self, caller: str) -> float:
        """0.0 when `caller` may go ahead, else the seconds until it may."""
        if time.monotonic() >= self._skip_until:
            try:
                wait = await self._take(keys=[self._prefix + caller],
                                        args=[repr(self.rate), str(self.burst)])
                return float(wait)
            except (RedisError, OSError) as exc:
                self._skip_until = time.monotonic() + self._retry_s
                # The exception's type only: its text can carry the URL, with a password.
                logger.warning("the shared rate-limit store did not answer (%s); using "
                               "this worker's own buckets for %g s", type(exc).__name__,
                               self._retry_s)
        RATE_LIMIT_STORE_ERRORS.inc()
        return self.fallback.take(caller)

    async def aclose(self) -> None:
        await self._redis.aclose()

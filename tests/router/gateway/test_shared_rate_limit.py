"""Rate-limit buckets in a real Redis: shared by every limiter, and a fallback without it.

Two `SharedRateLimiter`s on one Redis stand for two workers (or hosts): together they let
a caller through exactly `burst` times, where two in-process limiters would let it
through twice as often. A Redis that does not answer falls back to the process's own
buckets, counts it, and says so once without the URL (which may carry a password).
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis

from router.gateway.middleware.rate_limit import RateLimiter
from router.gateway.middleware.shared_rate_limit import SharedRateLimiter
from router.telemetry.metrics import RATE_LIMIT_STORE_ERRORS
from tests.servers import free_port

SLOW = 0.001  # tokens a second: no refill within a test


def _acquire_all(limiters: list[SharedRateLimiter] | list[RateLimiter], caller: str,
                 times: int) -> list[float]:
    async def run() -> list[float]:
        waits = [await limiters[n % len(limiters)].acquire(caller) for n in range(times)]
        for limiter in limiters:
            await limiter.aclose()
        return waits

    return asyncio.run(run())


def test_two_limiters_on_one_redis_share_one_bucket(redis_url: str, redis_prefix: str) -> None:
    shared = [SharedRateLimiter(redis_url, SLOW, 5, prefix=redis_prefix) for _ in range(2)]
    waits = _acquire_all(shared, "key:shop-frontend", 12)
    assert sum(wait == 0 for wait in waits) == 5, waits
    assert waits[:5] == [0.0] * 5 and all(wait > 900 for wait in waits[5:]), waits


def test_per_process_limiters_each_have_their_own_bucket() -> None:
    """What the shared bucket fixes: the same traffic over two processes' own buckets."""
    waits = _acquire_all([RateLimiter(SLOW, 5), RateLimiter(SLOW, 5)], "key:shop-frontend", 12)
    assert sum(wait == 0 for wait in waits) == 10, waits


def test_callers_have_separate_buckets(redis_url: str, redis_prefix: str) -> None:
    limiter = SharedRateLimiter(redis_url, SLOW, 1, prefix=redis_prefix)

    async def run() -> list[float]:
        waits = [await limiter.acquire(caller) for caller in ("key:a", "key:b", "key:a")]
        await limiter.aclose()
        return waits

    first_a, first_b, second_a = asyncio.run(run())
    assert (first_a, first_b) == (0.0, 0.0) and second_a > 0


def test_the_bucket_refills_on_redis_time_and_expires_when_full(
    redis_url: str, redis_prefix: str,
) -> None:
    rate = 20.0
    limiter = SharedRateLimiter(redis_url, rate, 1, prefix=redis_prefix)

    async def run() -> tuple[float, float, float]:
        allowed = await limiter.acquire("ip:198.51.100.7")
        refused = await limiter.acquire("ip:198.51.100.7")
        await asyncio.sleep(refused + 0.02)
        again = await limiter.acquire("ip:198.51.100.7")
        await limiter.aclose()
        return allowed, refused, again

    allowed, refused, again = asyncio.run(run())
    assert allowed == 0.0 and 0 < refused <= 1 / rate and again == 0.0
    client = redis.Redis.from_url(redis_url)
    try:
        ttl_ms = client.pttl(f"{redis_prefix}rate:ip:198.51.100.7")
    finally:
        client.close()
    # Empty after the last take: full again in 1/rate s, plus the one-second margin.
    assert 0 < ttl_ms <= 1000 / rate + 1000, ttl_ms


def test_without_redis_it_falls_back_to_its_own_buckets_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://:s3cret-password@127.0.0.1:{free_port()}/0"  # nothing listens there
    limiter = SharedRateLimiter(url, SLOW, 2, prefix="support-router:", retry_s=60)
    before = RATE_LIMIT_STORE_ERRORS._value.get()
    caplog.set_level(logging.WARNING, logger="router.gateway.middleware.shared_rate_limit")
    started = time.monotonic()
    waits = _acquire_all([limiter], "key:shop-frontend", 20)
    elapsed = time.monotonic() - started
    assert waits[:2] == [0.0, 0.0] and all(wait > 0 for wait in waits[2:]), waits
    assert RATE_LIMIT_STORE_ERRORS._value.get() - before == 20
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "s3cret" not in caplog.text and "did not answer" in caplog.text
    # Asked once, then left alone for retry_s: 20 checks cost one refused connection.
    assert elapsed < 5, elapsed

"""Token buckets on a hand-moved clock, and the 429 the gateway answers with."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from router.access import ApiKey, hash_key, new_key
from router.gateway.app import create_app
from router.gateway.middleware.access import DEFAULT_KEYED_RATE_PER_S, effective_rate
from router.gateway.middleware.rate_limit import RateLimiter, TokenBucket, retry_after_seconds
from router.settings import Settings


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_a_new_bucket_allows_a_burst_then_refuses_with_the_wait() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take() == pytest.approx(0.5)  # one token at 2/s
    clock.advance(0.25)
    assert bucket.take() == pytest.approx(0.25)  # half a token so far; a refusal costs none
    clock.advance(0.25)
    assert bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.5)


def test_a_bucket_refills_at_the_rate_and_never_above_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=10.0, burst=5, clock=clock)
    for _ in range(5):
        bucket.take()
    clock.advance(0.3)
    assert bucket.tokens == pytest.approx(3.0)
    clock.advance(3600)
    assert bucket.tokens == 5.0 and bucket.full
    assert sum(bucket.take() == 0.0 for _ in range(10)) == 5


def test_a_clock_that_steps_back_removes_no_tokens() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=1.0, burst=2, clock=clock)
    bucket.take()
    clock.advance(-50)
    assert bucket.tokens == pytest.approx(1.0)


def test_sustained_traffic_gets_exactly_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=4.0, burst=5, clock=clock)
    allowed = 0
    for _ in range(640):  # 64 requests a second for 10 s (1/64 s is exact in binary)
        allowed += bucket.take() == 0.0
        clock.advance(1 / 64)
    # The burst, then 4/s over the 9.98 s between the first and the last request.
    assert allowed == 5 + 39


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_nonsense_limits_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)


@pytest.mark.parametrize(("wait", "header"), [(0.001, 1), (0.5, 1), (1.0, 1), (1.01, 2),
                                              (59.2, 60)])
def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one(wait: float,
                                                                  header: int) -> None:
    assert retry_after_seconds(wait) == header


def test_callers_have_separate_buckets() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock)
    assert limiter.take("key:a") == 0.0
    assert limiter.take("key:a") > 0
    assert limiter.take("key:b") == 0.0


def test_the_limiter_forgets_the_least_recently_seen_caller_first() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock, max_callers=2)
    limiter.take("a")
    limiter.take("b")
    limiter.take("a")  # a is now the most recent
    limiter.take("c")  # drops b
    assert len(limiter) == 2
    assert limiter.take("a") > 0  # still remembered, still empty
    assert limiter.take("b") == 0.0  # forgotten: a full bucket again


# ---------------------------------------------------------------- over HTTP


def test_a_key_over_its_limit_gets_429_with_retry_after(settings: Settings) -> None:
    fast, other = new_key(), new_key()
    keys = [ApiKey(name="fast", sha256=hash_key(fast), roles=("gateway",)),
            ApiKey(name="other", sha256=hash_key(other), roles=("gateway",))]
    limited = settings.model_copy(
        update={"api_keys": keys, "rate_limit_per_s": 0.5, "rate_limit_burst": 2})
    with TestClient(create_app(limited)) as client:
        body = {"text": "where is my order?"}
        for _ in range(2):
            ok = client.post("/v1/route", json=body, headers={"X-API-Key": fast})
            assert ok.status_code == 200
        refused = client.post("/v1/route", json=body, headers={"X-API-Key": fast})
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.headers["Retry-After"] == "2"  # one token at 0.5/s
        # Per key: another key is not slowed down, and health checks are never limited.
        assert client.post("/v1/route", json=body,
                           headers={"X-API-Key": other}).status_code == 200
        assert client.get("/healthz").status_code == 200
        # An unknown key is a 401, not a 429 charged to anyone.
        assert client.post("/v1/route", json=body,
                           headers={"X-API-Key": new_key()}).status_code == 401


def test_without_keys_the_limit_is_per_client_address(settings: Settings) -> None:
    limited = settings.model_copy(update={"rate_limit_per_s": 0.5, "rate_limit_burst": 1})
    with TestClient(create_app(limited)) as client:
        assert client.get("/v1/handoffs").status_code == 200
        refused = client.get("/v1/handoffs")
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1


def test_unset_keys_get_the_default_rate_and_keyless_mode_none(settings: Settings) -> None:
    """Keyless mode serves loopback only: its tests and benchmarks are not throttled."""
    assert settings.rate_limit_per_s is None
    assert effective_rate(settings) == 0
    keyed = settings.model_copy(update={"api_keys": [
        ApiKey(name="a", sha256=hash_key(new_key()), roles=("gateway",))]})
    assert effective_rate(keyed) == DEFAULT_KEYED_RATE_PER_S == 50
    assert effective_rate(keyed.model_copy(update={"rate_limit_per_s": 0})) == 0
    with TestClient(create_app(settings)) as client:
        assert all(client.get("/v1/handoffs").status_code == 200 for _ in range(150))


def test_a_zero_rate_turns_the_limit_off(settings: Settings) -> None:
    unlimited = settings.model_copy(update={"rate_limit_per_s": 0, "rate_limit_burst": 1})
    with TestClient(create_app(unlimited)) as client:
        assert all(client.get("/v1/handoffs").status_code == 200 for _ in range(20))

"""The circuit breaker (fake clock) and the router's fallback against real servers on loopback.

The failing primary is the real TypeSafe backend pointed at `jevcompat proxy` whose upstream
is not running: every request gets a real 502. Recovery is the upstream `jevcompat mock`
starting on that port, behind the same proxy URL. The fallback is a tiny fake
`DecisionModel` (a double of the interface, not of our code).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from router.contracts import Decision, Policy, PolicyModel, RouteScores
from router.errors import ModelUnavailable
from router.models.base import DecisionModel
from router.models.breaker import CircuitBreaker, GuardedRouteModel
from router.routing.rules import RouteRequest
from router.routing.service import BoundModel, RouterService
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from tests.e2e.test_typesafe import (
    REFUND_TEXT,
    Sleeps,
    jevcompat_mock,
    jevcompat_proxy,
    make_model,
)
from tests.servers import free_port


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FixedModel:
    """A stand-in local model: always the same distribution, counts its calls."""

    name = "fake-local"

    def __init__(self) -> None:
        self.calls = 0

    def score(self, text: str) -> RouteScores:
        self.calls += 1
        return RouteScores.from_probabilities(
            self.name, {"refund": 0.1, "account": 0.1, "other": 0.7, "unclear": 0.1}
        )

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        return [self.score(text) for text in texts]


def _fail() -> None:
    raise ModelUnavailable("down")


def _trip(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        with pytest.raises(ModelUnavailable, match="down"):
            breaker.call(_fail)


# ---------------------------------------------------------------- the breaker alone


def test_opens_after_consecutive_failures_and_then_refuses_without_calling() -> None:
    breaker = CircuitBreaker(failure_threshold=3, reset_s=10, clock=FakeClock())
    _trip(breaker, 2)
    assert breaker.call(lambda: "ok") == "ok"  # a success resets the count
    _trip(breaker, 2)
    assert breaker.state == "closed"
    _trip(breaker, 1)
    assert breaker.state == "open"
    calls: list[int] = []
    with pytest.raises(ModelUnavailable, match="circuit open") as info:
        breaker.call(lambda: calls.append(1))
    assert calls == []
    assert info.value.retry_after_s == pytest.approx(10)


def test_half_open_probe_closes_on_success_and_reopens_on_failure() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_s=10, clock=clock)
    _trip(breaker, 1)
    clock.advance(9.9)
    assert breaker.state == "open"
    clock.advance(0.1)
    assert breaker.state == "half_open"
    _trip(breaker, 1)  # the probe fails: open for another reset_s
    assert breaker.state == "open"
    clock.advance(10)
    assert breaker.call(lambda: "probe") == "probe"
    assert breaker.state == "closed"
    assert breaker.consecutive_failures == 0


def test_half_open_lets_exactly_one_probe_through() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_s=10, clock=clock)
    _trip(breaker, 1)
    clock.advance(10)
    entered, release = threading.Event(), threading.Event()

    def slow_probe() -> str:
        entered.set()
        release.wait(5)
        return "probe"

    results: list[str] = []
    probe = threading.Thread(target=lambda: results.append(breaker.call(slow_probe)))
    probe.start()
    assert entered.wait(5)
    with pytest.raises(ModelUnavailable, match="probe is in flight"):
        breaker.call(lambda: "second")
    release.set()
    probe.join(5)
    assert results == ["probe"]
    assert breaker.state == "closed"


def test_a_stale_success_does_not_close_an_open_breaker() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_s=10, clock=clock)
    entered, release = threading.Event(), threading.Event()

    def slow_success() -> str:
        entered.set()
        release.wait(5)
        return "late"

    straggler = threading.Thread(target=lambda: breaker.call(slow_success))
    straggler.start()
    assert entered.wait(5)  # admitted while closed
    _trip(breaker, 1)
    release.set()
    straggler.join(5)
    assert breaker.state == "open"


# ------------------------------------------------- fallback through RouterService, real servers

POLICY_LOCAL = Policy(
    version="local-v", model=PolicyModel(backend="local", name="fake-local"), threshold=0.3
)
POLICY_REMOTE = Policy(
    version="remote-v", model=PolicyModel(backend="typesafe", name="ts"), threshold=0.3
)


def _router(primary: DecisionModel, local: FixedModel) -> RouterService:
    log = DecisionLog(make_engine("sqlite://"))
    log.create_schema()
    return RouterService(
        BoundModel(primary, POLICY_REMOTE), log, fallback=BoundModel(local, POLICY_LOCAL)
    )


def _decide(router: RouterService) -> Decision:
    return router.route(RouteRequest(text=REFUND_TEXT))


def test_repeated_5xx_opens_the_breaker_and_recovery_closes_it() -> None:
    clock, sleeps, local = FakeClock(), Sleeps(), FixedModel()
    upstream_port = free_port()
    with jevcompat_proxy(f"http://127.0.0.1:{upstream_port}") as url:
        remote = make_model(url, sleeps=sleeps, max_attempts=2)
        guarded = GuardedRouteModel(
            remote, CircuitBreaker(failure_threshold=2, reset_s=30, clock=clock)
        )
        router = _router(guarded, local)

        for expected_state in ("closed", "open"):  # two real 502s, each after 2 attempts
            decision = _decide(router)
            assert (decision.reason, decision.model) == ("model_unavailable", "fake-local")
            assert decision.policy_version == "local-v"  # the fallback's own policy
            assert guarded.state == expected_state
        assert len(sleeps) == 2

        decision = _decide(router)  # open: no request at all
        assert decision.reason == "model_unavailable"
        assert len(sleeps) == 2

        clock.advance(30)
        assert guarded.state == "half_open"
        assert _decide(router).reason == "model_unavailable"  # the probe fails
        assert guarded.state == "open"

        with jevcompat_mock(port=upstream_port):  # the server recovers
            clock.advance(30)
            decision = _decide(router)
            assert decision.reason != "model_unavailable"
            assert decision.model == remote.name
            assert decision.policy_version == "remote-v"
            assert guarded.state == "closed"
    assert local.calls == 4


def test_open_breaker_refuses_at_once() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_s=30, clock=FakeClock())
    _trip(breaker, 1)
    primary = make_model(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ModelUnavailable, match="circuit open"):
        GuardedRouteModel(primary, breaker).score("a")
    with pytest.raises(ModelUnavailable, match="circuit open"):
        GuardedRouteModel(primary, breaker).score_batch(["a", "b"])


def test_wrong_key_falls_back_at_once_and_other_errors_propagate() -> None:
    local, sleeps = FixedModel(), Sleeps()
    with jevcompat_mock("--key", "right-key") as url:
        remote = make_model(url, sleeps=sleeps, api_key="wrong-key")
        router = _router(GuardedRouteModel(remote, CircuitBreaker(failure_threshold=5)), local)
        assert _decide(router).reason == "model_unavailable"
    assert sleeps == []

    class Broken(FixedModel):
        name = "broken"

        def score(self, text: str) -> RouteScores:
            raise ValueError("bug")

    breaker = CircuitBreaker(failure_threshold=5)
    with pytest.raises(ValueError, match="bug"):
        _decide(_router(GuardedRouteModel(Broken(), breaker), local))
    assert breaker.consecutive_failures == 1

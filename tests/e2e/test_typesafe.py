"""The TypeSafe backend against real Jev-compatible servers on loopback.

Servers are `jevcompat mock` (the spec-exact reference server, with `--fault` switches)
and `jevcompat proxy` in subprocesses. The CLI has no 429 switch, so the rate-limit tests
run jevcompat's mock with its own `busy_every` knob (every Nth request gets 429 with
`Retry-After: 0`) in a subprocess. A 5xx comes from `jevcompat proxy` in front of an
upstream that is not running (502 `upstream_error`). Only sleep and clock are faked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx
import pytest
from langchain_typesafe import Choice

from router.contracts import ROUTES, RouteScores, choice_confidence
from router.errors import ModelUnavailable
from router.models.base import DecisionModel
from router.models.typesafe import (
    MAX_RETRY_DELAY_S,
    ROUTE_QUESTION,
    TypeSafeRouteModel,
    backoff_delay,
    build_typesafe_model,
    question_sha,
)
from router.settings import Settings
from tests.servers import free_port

KEY = "test-key"
REFUND_TEXT = "the saucepan handle snapped off, refund me"
_BUSY_MOCK = (
    "import sys\n"
    "from jevcompat.mock import MockConfig, make_server\n"
    "cfg = MockConfig(busy_every=int(sys.argv[2]))\n"
    "make_server(cfg, host='127.0.0.1', port=int(sys.argv[1])).serve_forever()\n"
)


# ---------------------------------------------------------------- real servers (shared helpers)

@contextmanager
def serve(argv: list[str], port: int) -> Iterator[str]:
    """Run a server subprocess, wait until it answers HTTP, stop it at exit."""
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{argv} exited: {proc.communicate()[1].decode()}")
            try:
                httpx.get(f"{url}/v1/models", timeout=0.5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{argv} did not answer within 15s")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def jevcompat_mock(*args: str, port: int | None = None) -> AbstractContextManager[str]:
    port = port or free_port()
    argv = [sys.executable, "-m", "jevcompat.cli", "mock", "--host", "127.0.0.1",
            "--port", str(port), *args]
    return serve(argv, port)


def busy_mock(every: int) -> AbstractContextManager[str]:
    port = free_port()
    return serve([sys.executable, "-c", _BUSY_MOCK, str(port), str(every)], port)


def jevcompat_proxy(upstream_url: str) -> AbstractContextManager[str]:
    port = free_port()
    argv = [sys.executable, "-m", "jevcompat.cli", "proxy", upstream_url, "--host", "127.0.0.1",
            "--port", str(port), "--timeout", "5"]
    return serve(argv, port)



class Sleeps(list[float]):
    """Records the waits instead of waiting: the retry policy is what is under test."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_model(url: str, *, sleeps: Sleeps | None = None, **kwargs: object) -> TypeSafeRouteModel:
    options: dict = {"model": "jev-latest", "base_url": url, "api_key": KEY, "timeout_s": 5.0,
                     "max_attempts": 3, "sleep": sleeps if sleeps is not None else Sleeps(),
                     "rng": random.Random(0)}
    options.update(kwargs)
    return TypeSafeRouteModel(**options)


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with jevcompat_mock() as url:
        yield url


# ---------------------------------------------------------------- answers

def test_real_answer_becomes_route_scores(mock_url: str) -> None:
    model = make_model(mock_url)
    assert isinstance(model, DecisionModel)
    scores = model.score(REFUND_TEXT)
    assert isinstance(scores, RouteScores)
    assert scores.model == model.name
    assert set(scores.probabilities) == set(ROUTES)
    assert sum(scores.probabilities.values()) == pytest.approx(1.0)
    assert scores.choice == max(ROUTES, key=lambda r: scores.probabilities[r])
    assert scores.confidence == pytest.approx(
        choice_confidence(scores.probabilities[scores.choice], len(ROUTES))
    )


def test_scores_match_the_server_answer_for_text_sent_as_state(mock_url: str) -> None:
    # The mock hashes (state, instructions, option): equal probabilities prove the text went
    # as {"customer_message": text} in state and the instructions are the constant question.
    payload = {"model": "jev-latest", "state": {"customer_message": REFUND_TEXT},
               "questions": {"route": ROUTE_QUESTION.model_dump(mode="json", exclude_none=True)}}
    raw = httpx.post(f"{mock_url}/v1/systemone", json=payload, timeout=5).json()
    answer = raw["answers"]["route"]
    scores = make_model(mock_url).score(REFUND_TEXT)
    assert scores.probabilities == pytest.approx(answer["probabilities"])
    assert scores.choice == answer["choice"]
    assert scores.confidence == pytest.approx(answer["confidence"])


def test_score_batch_keeps_order(mock_url: str) -> None:
    model = make_model(mock_url)
    texts = [REFUND_TEXT, "no more newsletters please", "do you ship to Malta?", "sort it out"]
    assert model.score_batch(texts) == [model.score(text) for text in texts]
    assert model.score_batch([]) == []


def test_question_sha_is_the_canonical_json_hash() -> None:
    canonical = json.dumps(ROUTE_QUESTION.model_dump(mode="json", exclude_none=True),
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert question_sha() == hashlib.sha256(canonical.encode()).hexdigest()
    assert isinstance(ROUTE_QUESTION, Choice)
    assert list(ROUTE_QUESTION.criteria) == list(ROUTES)
    reworded = ROUTE_QUESTION.model_copy(update={"instructions": "Which team?"})
    assert question_sha(reworded) != question_sha()
    assert question_sha()[:8] in make_model("http://127.0.0.1:9").name


def test_choice_is_recomputed_when_the_server_reports_the_wrong_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with jevcompat_mock("--fault", "choice-second") as url, caplog.at_level(logging.WARNING):
        scores = make_model(url).score(REFUND_TEXT)
    assert scores.choice == max(ROUTES, key=lambda r: scores.probabilities[r])
    assert "using the argmax" in caplog.text


# ---------------------------------------------------------------- failures

@pytest.mark.parametrize("fault", ["xssi-200", "choice-no-confidence", "confidence-over",
                                   "choice-sum"])
def test_malformed_answer_is_model_unavailable_without_retry(fault: str) -> None:
    sleeps = Sleeps()
    with jevcompat_mock("--fault", fault) as url:
        with pytest.raises(ModelUnavailable, match="malformed"):
            make_model(url, sleeps=sleeps).score(REFUND_TEXT)
    assert sleeps == []


def test_429_is_retried_honouring_retry_after_then_succeeds() -> None:
    sleeps = Sleeps()
    with busy_mock(every=2) as url:
        model = make_model(url, sleeps=sleeps)
        first = model.score(REFUND_TEXT)  # request 1: answered
        second = model.score(REFUND_TEXT)  # request 2: 429 Retry-After 0; request 3: answered
    assert first == second
    assert sleeps == [0.0]  # the server's 0 s, not the >= 0.125 s back-off


def test_429_every_time_fails_clearly_after_max_attempts() -> None:
    sleeps = Sleeps()
    with busy_mock(every=1) as url:
        with pytest.raises(ModelUnavailable, match=r"429.*after 3 attempts") as info:
            make_model(url, sleeps=sleeps, max_attempts=3).score(REFUND_TEXT)
    assert info.value.retry_after_s == 0.0
    assert sleeps == [0.0, 0.0]


def test_5xx_is_retried_with_backoff() -> None:
    sleeps = Sleeps()
    with jevcompat_proxy(f"http://127.0.0.1:{free_port()}") as url:
        with pytest.raises(ModelUnavailable, match=r"502.*after 3 attempts"):
            make_model(url, sleeps=sleeps, max_attempts=3).score(REFUND_TEXT)
    assert len(sleeps) == 2
    assert 0.125 <= sleeps[0] <= 0.25 and 0.25 <= sleeps[1] <= 0.5


def test_wrong_api_key_fails_at_once() -> None:
    sleeps = Sleeps()
    with jevcompat_mock("--key", KEY) as url:
        assert make_model(url).score(REFUND_TEXT).choice in ROUTES
        with pytest.raises(ModelUnavailable, match=r"rejected the API key.*401.*after 1 attempt"):
            make_model(url, sleeps=sleeps, api_key="wrong-key").score(REFUND_TEXT)
    assert sleeps == []


def test_refused_connection_is_retried() -> None:
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ModelUnavailable, match="cannot reach.*after 3 attempts"):
        make_model(url, sleeps=sleeps).score(REFUND_TEXT)
    assert len(sleeps) == 2


def test_timeout_is_retried() -> None:
    sleeps = Sleeps()
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ModelUnavailable, match="timed out.*after 2 attempts"):
            make_model(url, sleeps=sleeps, timeout_s=0.2, max_attempts=2).score(REFUND_TEXT)
    assert len(sleeps) == 1


def test_retries_stop_when_the_time_budget_would_be_exceeded() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    url = f"http://127.0.0.1:{free_port()}"
    model = make_model(url, sleeps=None, sleep=sleep, clock=lambda: now[0],
                       max_attempts=10, max_total_s=0.5)
    with pytest.raises(ModelUnavailable, match="budget"):
        model.score(REFUND_TEXT)
    assert now[0] <= 0.5


def test_backoff_delay_honours_retry_after_capped_and_grows_with_jitter() -> None:
    rng = random.Random(1)
    assert backoff_delay(1, retry_after_s=1.5, rng=rng) == 1.5
    assert backoff_delay(1, retry_after_s=120.0, rng=rng) == MAX_RETRY_DELAY_S
    delays = [backoff_delay(n, retry_after_s=None, rng=rng) for n in range(1, 8)]
    for n, delay in enumerate(delays, start=1):
        ceiling = min(MAX_RETRY_DELAY_S, 0.25 * 2 ** (n - 1))
        assert ceiling / 2 <= delay <= ceiling


# ---------------------------------------------------------------- settings and factory

def test_build_from_settings_reads_plain_typesafe_api_key(
    mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SUPPORT_ROUTER_TYPESAFE_API_KEY", raising=False)
    monkeypatch.setenv("TYPESAFE_API_KEY", "plain-key")
    settings = Settings(typesafe_base_url=mock_url, typesafe_model="mock", typesafe_timeout_s=5)
    assert settings.typesafe_api_key is not None
    assert settings.typesafe_api_key.get_secret_value() == "plain-key"
    model = build_typesafe_model(settings)
    assert model.name.startswith("typesafe:mock@")
    assert model.score(REFUND_TEXT).model == model.name
    monkeypatch.setenv("SUPPORT_ROUTER_TYPESAFE_API_KEY", "prefixed-key")
    assert Settings().typesafe_api_key.get_secret_value() == "prefixed-key"  # type: ignore[union-attr]


def test_missing_api_key_is_model_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPPORT_ROUTER_TYPESAFE_API_KEY", raising=False)
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    with pytest.raises(ModelUnavailable, match="TYPESAFE_API_KEY"):
        build_typesafe_model(Settings())


"""Two real gateway processes on two ports over one database: a publish or a rollback
made on one is served by both within the poll interval plus slack.

Each process has its own copy of the policy file, as two hosts would: only the database
is shared. Every request opens a new connection, so nothing in the client can pin it to
a process that already switched. Run over one PostgreSQL schema and over one SQLite file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from router.app.training import TrainResult
from tests.servers import DATABASES, GatewayProcess, gateways_on, shared_database

START_TIMEOUT_S = 180.0
POLL_S = 0.5
BOUND_S = POLL_S + 1.5
"""A change must be served everywhere this long after the publish returned."""
MESSAGE = {"text": "my kettle arrived broken, please refund order O-1001"}
AFTER_BOUND_REQUESTS = 40


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with shared_database(request, tmp_path) as url:
        yield url


@pytest.fixture
def two_gateways(database_url: str, trained: TrainResult,
                 tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    with gateways_on(database_url, trained, tmp_path, start_timeout_s=START_TIMEOUT_S,
                     policy_poll_s=str(POLL_S), rate_limit_per_s="0") as gateways:
        yield gateways


def _version(gateway: GatewayProcess) -> str:
    answer = httpx.post(f"{gateway.url}/v1/route", json=MESSAGE, timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["policy_version"])


def _reaches_both(gateways: list[GatewayProcess], version: str, since: float) -> None:
    """Each gateway decides under `version` within BOUND_S of `since`, and every request
    after the bound, on either, does."""
    for gateway in gateways:
        while (seen := _version(gateway)) != version:
            assert time.monotonic() - since < BOUND_S, \
                f"{gateway.url} still decides under {seen}, {BOUND_S} s after the change"
            time.sleep(0.02)
    time.sleep(max(0.0, since + BOUND_S - time.monotonic()))
    decided = [_version(gateways[i % 2]) for i in range(AFTER_BOUND_REQUESTS)]
    assert decided == [version] * AFTER_BOUND_REQUESTS


def _policy(path: Path, **changes: Any) -> dict[str, Any]:
    return {**json.loads(path.read_text()), **changes}


def test_a_publish_and_a_rollback_reach_both_gateways(two_gateways: list[GatewayProcess],
                                                      tmp_path: Path) -> None:
    a, b = two_gateways
    original = _version(a)
    assert _version(b) == original
    starts = [gateway.output() for gateway in two_gateways]
    assert sum("adopted" in log for log in starts) == 1, starts  # one adopts, one follows

    published = httpx.post(f"{a.url}/v1/admin/policy", timeout=60,
                           json=_policy(tmp_path / "models-a" / "policy.json",
                                        version="propagated-1"))
    assert published.status_code == 200, published.text
    _reaches_both(two_gateways, "propagated-1", time.monotonic())
    # b's own file follows the database, for the offline tools on its host
    assert json.loads((tmp_path / "models-b" / "policy.json").read_text())["version"] == \
        "propagated-1"

    rolled_back = httpx.post(f"{b.url}/v1/admin/policy/rollback", timeout=60)
    assert rolled_back.status_code == 200, rolled_back.text
    assert rolled_back.json()["version"] == original
    _reaches_both(two_gateways, original, time.monotonic())

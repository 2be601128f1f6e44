"""Two gateway processes on two ports, one Redis: a caller gets its rate once, not twice.

Keyless mode, so the caller is the client address (127.0.0.1 for every request here),
with a burst of 5 and a refill slow enough that no token comes back during the test.
24 requests alternate between the two gateways. With `SUPPORT_ROUTER_REDIS_URL` set,
exactly 5 pass in all; without it each process has its own bucket and 10 pass: the N×
rate behind N processes that the shared store removes. The start log says which it is.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from router.app.training import TrainResult
from tests.servers import GatewayProcess, gateway_env

START_TIMEOUT_S = 180.0
BURST = 5
REQUESTS = 24


def _statuses_over_two_gateways(trained: TrainResult, tmp_path: Path,
                                **settings: str) -> tuple[list[int], str]:
    with ExitStack() as stack:
        servers = [stack.enter_context(GatewayProcess()) for _ in range(2)]
        for n, server in enumerate(servers):
            env = gateway_env(trained.model_path.parent, trained.policy_path,
                              tmp_path / f"var-{n}", rate_limit_per_s="0.001",
                              rate_limit_burst=str(BURST), **settings)
            server.start(env, [], tmp_path / f"serve-{n}.log")
        for server in servers:
            server.wait_ready(START_TIMEOUT_S)
        with httpx.Client(timeout=30) as client:
            statuses = [client.post(f"{servers[n % 2].url}/v1/route",
                                    json={"text": "where is my parcel?"}).status_code
                        for n in range(REQUESTS)]
        return statuses, servers[0].output()


def test_two_gateways_share_one_bucket_in_redis(
    trained: TrainResult, tmp_path: Path, redis_url: str, redis_prefix: str,
) -> None:
    statuses, log = _statuses_over_two_gateways(trained, tmp_path, redis_url=redis_url,
                                                redis_prefix=redis_prefix)
    assert statuses.count(200) == BURST and set(statuses) == {200, 429}, statuses
    assert "shared in Redis" in log and "did not answer" not in log, log[-3000:]


@pytest.mark.usefixtures("redis_url")  # the same Redis is there; it is just not configured
def test_without_redis_each_gateway_has_its_own_bucket(
    trained: TrainResult, tmp_path: Path,
) -> None:
    statuses, log = _statuses_over_two_gateways(trained, tmp_path)
    assert statuses.count(200) == 2 * BURST and set(statuses) == {200, 429}, statuses
    assert "per worker process" in log, log[-3000:]

"""`X-Forwarded-For` decides who the caller is only when it comes from a configured proxy.

Keyless mode, with a rate limit per caller address (3 requests of burst, then one every
5 s). 60 requests over loopback, each claiming another client address: with no trusted
proxies (the default) they are all the socket peer 127.0.0.1, so all but a few are
refused with 429; with 127.0.0.1 configured as a proxy, each claimed address is its own
caller and every request passes. The rate is slow on purpose, so that a slow machine
cannot refill the bucket while the 60 requests are sent.
"""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest

from router.app.training import TrainResult
from tests.servers import GatewayProcess, gateway_env

START_TIMEOUT_S = 180.0
REQUESTS = 60


@pytest.mark.parametrize("trusted_proxies", ["", '["127.0.0.1"]'], ids=["none", "loopback"])
def test_forwarded_for_counts_only_from_a_trusted_proxy(
    trained: TrainResult, tmp_path: Path, trusted_proxies: str,
) -> None:
    settings = {"rate_limit_per_s": "0.2", "rate_limit_burst": "3"}
    if trusted_proxies:
        settings["trusted_proxies"] = trusted_proxies
    env = gateway_env(trained.model_path.parent, trained.policy_path, tmp_path / "var",
                      **settings)
    claimed = random.Random(7)
    with GatewayProcess() as server, httpx.Client(timeout=30) as client:
        server.start(env, [], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        statuses = [
            client.post(f"{server.url}/v1/route", json={"text": "where is my parcel?"},
                        headers={"X-Forwarded-For": f"198.51.100.{claimed.randrange(1, 255)}, "
                                                    f"203.0.113.{n + 1}"}).status_code
            for n in range(REQUESTS)
        ]
    if trusted_proxies:
        assert statuses == [200] * REQUESTS
    else:
        assert set(statuses) == {200, 429}
        assert statuses.count(429) >= REQUESTS - 10, statuses

"""Two real gateway processes on two ports over one database: a publish or a rollback
made on one is served by both within the poll interval plus slack.

Each process has its own copy of the policy file, as two hosts would: only the database
is shared. Every request opens a new connection, so nothing in the client can pin it to
a process that already switched. Run over one PostgreSQL schema and over one SQLite file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.servers import (
    AFTER_BOUND_REQUESTS,
    GatewayProcess,
    decisions_after_the_bound,
    route,
)

MESSAGE = {"text": "my kettle arrived broken, please refund order O-1001"}


def _version(gateway: GatewayProcess) -> str:
    return str(route(gateway, MESSAGE)["policy_version"])


def _reaches_both(gateways: list[GatewayProcess], version: str, since: float) -> None:
    """Each gateway decides under `version` within the bound, and every request after
    the bound, on either, does."""
    decided = decisions_after_the_bound(gateways, "policy_version", version, since,
                                        lambda _unit: MESSAGE)
    assert [d["policy_version"] for d in decided] == [version] * AFTER_BOUND_REQUESTS


def _policy(path: Path, **changes: Any) -> dict[str, Any]:
    return {**json.loads(path.read_text()), **changes}


def test_a_publish_and_a_rollback_reach_both_gateways(
        following_gateways: list[GatewayProcess], tmp_path: Path) -> None:
    a, b = following_gateways
    original = _version(a)
    assert _version(b) == original
    starts = [gateway.output() for gateway in following_gateways]
    assert sum("adopted" in log for log in starts) == 1, starts  # one adopts, one follows

    published = httpx.post(f"{a.url}/v1/admin/policy", timeout=60,
                           json=_policy(tmp_path / "models-a" / "policy.json",
                                        version="propagated-1"))
    assert published.status_code == 200, published.text
    _reaches_both(following_gateways, "propagated-1", time.monotonic())
    # b's own file follows the database, for the offline tools on its host
    assert json.loads((tmp_path / "models-b" / "policy.json").read_text())["version"] == \
        "propagated-1"

    rolled_back = httpx.post(f"{b.url}/v1/admin/policy/rollback", timeout=60)
    assert rolled_back.status_code == 200, rolled_back.text
    assert rolled_back.json()["version"] == original
    _reaches_both(following_gateways, original, time.monotonic())

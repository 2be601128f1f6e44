"""Two gateway processes following one shared database (PostgreSQL, or one SQLite file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from router.app.training import TrainResult
from tests.servers import (
    DATABASES,
    FOLLOW_POLL_S,
    GatewayProcess,
    gateways_on,
    shared_database,
)


@pytest.fixture(params=DATABASES)
def shared_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with shared_database(request, tmp_path) as url:
        yield url


@pytest.fixture
def following_gateways(shared_database_url: str, trained: TrainResult,
                       tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    """Gateways `a` and `b` on the shared database, polling it every FOLLOW_POLL_S."""
    with gateways_on(shared_database_url, trained, tmp_path,
                     policy_poll_s=str(FOLLOW_POLL_S), rate_limit_per_s="0") as gateways:
        yield gateways

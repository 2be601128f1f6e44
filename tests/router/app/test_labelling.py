"""The labelling use cases on SQLite and PostgreSQL, without HTTP: the queue fed from the
decision log, labels, undo, agreement per pair, adjudication, and the export that
`load_labelled` and the real `support-router calibrate` read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from calibration.data import load_labelled
from router.app.labelling import Labelling, export_jsonl, labels_needed
from router.cli.main import app
from router.contracts import ROUTES
from router.errors import Conflict, InvalidInput, NotFound
from router.models.typesafe import question_sha
from router.settings import Settings
from router.storage.db import make_engine, migrate
from router.storage.decision_log import DecisionLog
from router.storage.label_db import LabelDB
from tests.calibration.test_calibrate import synthetic
from tests.labelling import log_decisions, probabilities

MODEL = f"typesafe:jev-test@{question_sha()[:8]}"


@pytest.fixture
def log(engine: Engine) -> Iterator[DecisionLog]:
    log = DecisionLog(engine)
    yield log
    log.close()


def _labelling(engine: Engine, log: DecisionLog, overlap: float) -> Labelling:
    return Labelling(LabelDB(engine), log, overlap=overlap)


def _few(log: DecisionLog) -> list[str]:
    """Four scored requests (confidences 0.9, 0.3, 0.6, 0.45), a rule decision, a repeat."""
    return log_decisions(log, [
        ("sure", "refund my kettle order", probabilities("refund", 0.9)),
        ("unsure", "hmm the thing", probabilities("other", 0.3)),
        ("middle", "change my e-mail", probabilities("account", 0.6)),
        ("rule", "form says refund", None),
        ("low", "where is it", probabilities("other", 0.45)),
        ("again", "hmm the thing", probabilities("other", 0.3)),
    ])


def test_the_queue_is_least_confident_first_and_hides_the_model_until_labelled(
    engine: Engine, log: DecisionLog
) -> None:
    _few(log)
    labelling = _labelling(engine, log, overlap=0.0)
    queue = labelling.queue("ana", sample="uncertainty", n=10)
    # the rule decision has no model answer; the repeated text is one item
    assert [item.id for item in queue.items] == ["unsure", "low", "middle", "sure"]
    assert (queue.remaining, queue.labelled) == (4, 0)
    assert set(queue.items[0].model_dump()) == {"id", "text", "lang"}
    reveal = labelling.record("unsure", labeller="ana", label="unclear")
    assert (reveal.label, reveal.model_choice) == ("unclear", "other")
    assert reveal.model_confidence == pytest.approx(0.0667, abs=1e-3)
    assert labelling.reveal("unsure", labeller="ana") == reveal
    assert labelling.reveal("unsure", labeller="bo") is None  # bo has not labelled it
    assert labelling.reveal("sure", labeller="ana") is None
    labelling.record("low", labeller="ana", label="skip")
    after = labelling.queue("ana", n=10)
    assert [item.id for item in after.items] == ["middle", "sure"]
    assert (after.remaining, after.labelled) == (2, 1)
    random_order = labelling.queue("bo", sample="random", n=10)
    assert {i.id for i in random_order.items} == {"low", "middle", "sure", "rule"}


def test_a_skip_reveals_nothing_so_skip_then_undo_cannot_peek(
    engine: Engine, log: DecisionLog
) -> None:
    """A skip gives no label, so it shows no model answer, as in the terminal tool:
    otherwise skip, read the answer, undo and label would anchor the label on it."""
    _few(log)
    labelling = _labelling(engine, log, overlap=0.0)
    skipped = labelling.record("unsure", labeller="ana", label="skip")
    assert (skipped.model_choice, skipped.model_confidence) == (None, None)
    assert labelling.reveal("unsure", labeller="ana") is None
    assert labelling.undo("ana") == "unsure"
    assert labelling.reveal("unsure", labeller="ana") is None


def test_undo_withdraws_the_latest_standing_label_and_requeues_it(
    engine: Engine, log: DecisionLog
) -> None:
    _few(log)
    labelling = _labelling(engine, log, overlap=0.0)
    assert labelling.undo("ana") is None
    labelling.record("unsure", labeller="ana", label="other")
    labelling.record("low", labeller="ana", label="skip")
    assert labelling.undo("ana") == "low"
    assert labelling.undo("ana") == "unsure"
    assert labelling.undo("ana") is None
    assert [i.id for i in labelling.queue("ana", n=2).items] == ["unsure", "low"]
    assert labelling.export().rows == []


def test_overlap_items_wait_for_two_labellers_the_others_for_one(
    engine: Engine, log: DecisionLog
) -> None:
    ids = log_decisions(log, [(f"r{i}", f"text {i}", probabilities("refund", 0.5 + i / 100))
                              for i in range(40)])
    labelling = _labelling(engine, log, overlap=0.5)
    overlap = {i for i in ids if labels_needed(i, overlap=0.5) == 2}
    assert 0 < len(overlap) < 40  # the hash splits these ids both ways
    for item in labelling.queue("ana", n=40).items:
        labelling.record(item.id, labeller="ana", label="refund")
    assert {i.id for i in labelling.queue("bo", n=40).items} == overlap
    assert labelling.queue("ana", n=40).items == []
    everyone = _labelling(engine, log, overlap=1.0)
    assert len(everyone.queue("bo", n=40).items) == 40
    with pytest.raises(InvalidInput, match="overlap 1.5"):
        _labelling(engine, log, overlap=1.5)


def test_two_labellers_on_the_same_item_at_once_are_both_kept(
    engine: Engine, log: DecisionLog
) -> None:
    _few(log)
    labelling = _labelling(engine, log, overlap=0.0)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def label(who: str, route: str) -> None:
        item = labelling.queue(who, n=1).items[0]
        barrier.wait()
        try:
            labelling.record(item.id, labeller=who, label=route)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=label, args=args)
               for args in (("ana", "other"), ("bo", "unclear"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [pair] = labelling.agreements()
    assert (pair.labeller_a, pair.labeller_b, pair.n, pair.observed) == ("ana", "bo", 1, 0.0)
    [split] = labelling.disagreements()
    assert (split.item_id, split.labels) == ("unsure", {"ana": "other", "bo": "unclear"})
    assert labelling.queue("cy", n=1).items[0].id == "low"  # labelled enough already


def test_agreement_per_pair_with_kappa_by_hand(engine: Engine, log: DecisionLog) -> None:
    ids = log_decisions(log, [(f"r{i}", f"text {i}", probabilities("refund", 0.6))
                              for i in range(4)])
    labelling = _labelling(engine, log, overlap=1.0)
    for who, routes in (("ana", ["refund", "refund", "account", "other"]),
                        ("bo", ["refund", "account", "account", "other"]),
                        ("cy", ["refund", "refund", "account", "other"])):
        for item_id, route in zip(ids, routes, strict=True):
            labelling.record(item_id, labeller=who, label=route)
    labelling.record("r3", labeller="di", label="skip")
    pairs = {(p.labeller_a, p.labeller_b): p for p in labelling.agreements()}
    assert set(pairs) == {("ana", "bo"), ("ana", "cy"), ("bo", "cy")}  # a skip is no label
    ab = pairs[("ana", "bo")]
    # p_o = 3/4; p_e = .5·.25 + .25·.5 + .25·.25 = .3125; κ = (.75 − .3125) / .6875
    assert (ab.n, ab.observed) == (4, 0.75)
    assert ab.kappa == pytest.approx(0.4375 / 0.6875)
    refund, account = ROUTES.index("refund"), ROUTES.index("account")
    assert ab.confusion[refund][account] == 1 and ab.confusion[refund][refund] == 1
    assert pairs[("ana", "cy")].kappa == pytest.approx(1.0)


def test_export_takes_adjudicated_then_agreed_then_single_and_leaves_splits_out(
    engine: Engine, log: DecisionLog, tmp_path: Path
) -> None:
    log_decisions(log, [(f"r{i}", f"text <b>{i}</b>", probabilities("refund", 0.6))
                        for i in range(5)])
    labelling = _labelling(engine, log, overlap=1.0)
    for item_id, ana, bo in (("r0", "refund", "account"), ("r1", "other", "other"),
                             ("r2", "account", None), ("r3", "refund", "unclear")):
        labelling.record(item_id, labeller="ana", label=ana)
        if bo:
            labelling.record(item_id, labeller="bo", label=bo)
    labelling.record("r4", labeller="bo", label="skip")
    assert [d.item_id for d in labelling.disagreements()] == ["r0", "r3"]
    labelling.adjudicate("r0", route="unclear", adjudicator="cy", note="first try")
    labelling.adjudicate("r0", route="account", adjudicator="di", note="guide: account")
    assert [d.item_id for d in labelling.disagreements(include_adjudicated=False)] == ["r3"]
    assert labelling.disagreements()[0].adjudication.adjudicator == "di"

    export = labelling.export()
    assert (export.counts, export.unresolved) == (
        {"adjudicated": 1, "agreed": 1, "single": 1}, 1)
    path = tmp_path / "labels.jsonl"
    path.write_text(export_jsonl(export), encoding="utf-8")
    rows = load_labelled(path)
    assert [(r.id, r.text, r.label) for r in rows] == [
        ("r0", "text <b>0</b>", "account"), ("r1", "text <b>1</b>", "other"),
        ("r2", "text <b>2</b>", "account")]
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["resolution"], r["annotators"], r["adjudicator"]) for r in raw] == [
        ("adjudicated", ["ana", "bo"], "di"), ("agreed", ["ana", "bo"], None),
        ("single", ["ana"], None)]


def test_only_a_disagreement_can_be_adjudicated(engine: Engine, log: DecisionLog) -> None:
    """An adjudication replaces what the labellers said, so it is taken only where they
    disagree: one labeller posting the adjudication form for an item two others agreed on,
    or that nobody labelled, would otherwise decide its exported label alone."""
    log_decisions(log, [(f"r{i}", f"text {i}", probabilities("refund", 0.6))
                        for i in range(3)])
    labelling = _labelling(engine, log, overlap=1.0)
    for labeller in ("ana", "bo"):
        labelling.record("r0", labeller=labeller, label="refund")
    labelling.record("r1", labeller="ana", label="refund")
    labelling.record("r1", labeller="bo", label="other")
    for item_id in ("r0", "r2"):
        with pytest.raises(Conflict) as refused:
            labelling.adjudicate(item_id, route="account", adjudicator="cy")
        assert refused.value.code == "not_disputed"
    assert labelling.labels.adjudications() == []
    labelling.adjudicate("r1", route="other", adjudicator="cy")
    assert {(r["id"], r["label"], r["resolution"]) for r in labelling.export().rows} == {
        ("r0", "refund", "agreed"), ("r1", "other", "adjudicated")}


def test_a_labeller_of_an_item_cannot_adjudicate_it(engine: Engine, log: DecisionLog) -> None:
    """Otherwise one person could overrule two who agreed in two steps: label the item
    differently (now a disagreement), then adjudicate it their way."""
    log_decisions(log, [("r0", "text 0", probabilities("refund", 0.6))])
    labelling = _labelling(engine, log, overlap=1.0)
    for labeller in ("ana", "bo"):
        labelling.record("r0", labeller=labeller, label="refund")
    labelling.record("r0", labeller="eve", label="account")
    with pytest.raises(Conflict) as refused:
        labelling.adjudicate("r0", route="account", adjudicator="eve")
    assert refused.value.code == "adjudicator_labelled"
    assert labelling.labels.adjudications() == []
    labelling.adjudicate("r0", route="refund", adjudicator="cy")
    assert [(r["label"], r["adjudicator"]) for r in labelling.export().rows] == [
        ("refund", "cy")]


def test_a_repeat_of_a_text_is_labelled_only_under_its_items_id(
    engine: Engine, log: DecisionLog
) -> None:
    """The queue has one item per distinct text, under its first request's id. A label
    posted under a later repeat's id (no queue shows it) would make a second export row
    of the same text, with a label of its own that may contradict the item's."""
    _few(log)
    labelling = _labelling(engine, log, overlap=1.0)
    with pytest.raises(NotFound) as refused:
        labelling.record("again", labeller="ana", label="refund")
    assert refused.value.code == "unknown_item"
    assert labelling.labels.events() == []
    labelling.record("unsure", labeller="ana", label="other")
    assert [row["id"] for row in labelling.export().rows] == ["unsure"]


@pytest.mark.parametrize(("call", "error", "code"), [
    (lambda lab: lab.record("r0", labeller="ana", label="refnd"), InvalidInput, "bad_label"),
    (lambda lab: lab.record("nope", labeller="ana", label="refund"), NotFound, "unknown_item"),
    (lambda lab: lab.adjudicate("r0", route="skip", adjudicator="cy"), InvalidInput,
     "bad_route"),
    (lambda lab: lab.adjudicate("nope", route="refund", adjudicator="cy"), NotFound,
     "unknown_item"),
    (lambda lab: lab.adjudicate("r0", route="refund", adjudicator="cy", note="x" * 2001),
     InvalidInput, "note_too_long"),
    (lambda lab: lab.queue("ana", sample="drifted"), InvalidInput, "bad_sample"),
    (lambda lab: lab.queue("ana", sample="disagreement"), InvalidInput, "sample_needs_shadow"),
], ids=["label", "item", "route", "adjudicated-item", "note", "sample", "no-shadow"])
def test_bad_input_is_refused_and_writes_nothing(
    engine: Engine, log: DecisionLog, call, error: type[Exception], code: str
) -> None:
    log_decisions(log, [("r0", "text", probabilities("refund", 0.6))])
    labelling = _labelling(engine, log, overlap=0.0)
    with pytest.raises(error) as refused:
        call(labelling)
    assert refused.value.code == code
    assert labelling.labels.events() == [] and labelling.labels.adjudications() == []


def test_the_export_feeds_the_real_calibrate_command(cli_env: Settings, tmp_path: Path) -> None:
    """2,000 logged requests, one labeller on all, a second on the overlap share; their
    disagreements adjudicated but three; `support-router calibrate` on the export."""
    engine = make_engine(cli_env.resolved_database_url)
    migrate(engine)
    log = DecisionLog(engine)
    ids, truth, probs = synthetic(2000)
    texts = {i: f"synthetic request {i}" for i in ids}
    log_decisions(log, [(i, texts[i], dict(zip(ROUTES, p.tolist(), strict=True)))
                        for i, p in zip(ids, probs, strict=True)])
    labelling = Labelling(LabelDB(engine), log, overlap=0.1)
    second = [i for i in ids if labels_needed(i, overlap=0.1) == 2]
    for item_id, route in zip(ids, truth, strict=True):
        labelling.record(item_id, labeller="ana", label=route)
    for k, item_id in enumerate(second):
        ana = truth[list(ids).index(item_id)]
        labelling.record(item_id, labeller="bo", label="unclear" if k % 10 == 0 else ana)
    splits = labelling.disagreements()
    for split in splits[3:]:
        labelling.adjudicate(split.item_id, route=split.labels["ana"], adjudicator="cy")
    export = labelling.export()
    assert export.unresolved == 3 == len(labelling.disagreements(include_adjudicated=False))
    assert sum(export.counts.values()) == 2000 - 3
    labels_path, preds_path = tmp_path / "labels.jsonl", tmp_path / "pred.jsonl"
    labels_path.write_text(export_jsonl(export), encoding="utf-8")
    by_id = dict(zip(ids, probs, strict=True))
    preds_path.write_text("".join(json.dumps({
        "id": row.id, "probabilities": dict(zip(ROUTES, by_id[row.id].tolist(), strict=True)),
        "model": MODEL, "question_sha": question_sha()}) + "\n"
        for row in load_labelled(labels_path)))
    log.close()
    engine.dispose()

    policy = tmp_path / "policy.json"
    result = CliRunner().invoke(app, [
        "calibrate", "--predictions", str(preds_path), "--labels", str(labels_path),
        "--alpha", "0.1", "--n-boot", "100", "--out", str(policy)])
    assert result.exit_code == 0, result.output
    written = json.loads(policy.read_text())
    assert written["data"]["n_fit"] + written["data"]["n_certify"] + written["data"]["n_test"] \
        == 2000 - 3

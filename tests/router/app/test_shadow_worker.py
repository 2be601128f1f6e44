"""The shadow queue on a real Redis and a real decision log (SQLite file and PostgreSQL).

The gateway's side (`RouterService` with a `ShadowEnqueuer`) appends one entry per
sampled request after its row is committed; the worker's side (`ShadowConsumer`) scores
each entry into that row and acknowledges it. Redelivery writes nothing twice, an entry
whose row is not there yet waits (pending) and is claimed again, a dead consumer's
entries are claimed by another, and a Redis that does not answer drops shadow work only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from router.app.bootstrap import load_variant
from router.app.shadow_worker import ShadowConsumer, VariantCache
from router.app.training import TrainResult
from router.contracts import ExperimentConfig
from router.models.local.model import LocalRouteModel
from router.routing.rules import RouteRequest
from router.routing.service import BoundModel, LiveExperiment, RouterService, score_shadows
from router.routing.shadows import ShadowEnqueuer, ShadowJob, sampled
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.policy_store import load_policy
from router.storage.shadow_stream import ShadowStreamReader, ShadowStreamWriter, stream_key
from router.telemetry.metrics import SHADOW_ENQUEUE_ERRORS
from tests.servers import free_port
from tests.shadows import strict_shadow_experiment

TEXTS = ["Please refund my broken kettle, O-1001", "how do I change my email address",
         "where is my parcel", "hmm", "I want my money back for the scooter",
         "delete my account please", "asdf", "The lamp arrived cracked, refund please"]


@pytest.fixture
def log(any_db_url: str) -> Iterator[DecisionLog]:
    engine = make_engine(any_db_url)
    log = DecisionLog(engine)
    log.create_schema()
    yield log
    log.close()
    engine.dispose()


@pytest.fixture
def experiment(trained: TrainResult, tmp_path: Path) -> ExperimentConfig:
    return strict_shadow_experiment(trained, tmp_path)


def _service(settings: Settings, log: DecisionLog, config: ExperimentConfig,
             queue: ShadowEnqueuer | None, rate: float = 1.0) -> RouterService:
    bound = BoundModel(LocalRouteModel.load(settings.local_model_path),
                       load_policy(settings.policy_path))
    return RouterService(bound, log, experiment=LiveExperiment(config, {"live": bound}),
                         shadow_queue=queue, shadow_sample_rate=rate)


def _enqueuer(redis_url: str, prefix: str) -> ShadowEnqueuer:
    return ShadowEnqueuer(ShadowStreamWriter(redis_url, prefix=prefix, maxlen=10_000,
                                             timeout_s=0.5))


def _consumer(settings: Settings, log: DecisionLog, redis_url: str, prefix: str, name: str,
              *, claim_idle_s: float = 30.0, max_deliveries: int = 20) -> ShadowConsumer:
    return ShadowConsumer(ShadowStreamReader(redis_url, prefix=prefix), log,
                          VariantCache(lambda config: load_variant(settings, config)),
                          consumer=name, claim_idle_s=claim_idle_s,
                          max_deliveries=max_deliveries, block_ms=100)


def _drain(consumer: ShadowConsumer, *, rounds: int = 20) -> None:
    for _ in range(rounds):
        if consumer.step() == 0 and consumer.reader.status().pending == 0:
            return


def test_sampling_is_a_function_of_the_request_id() -> None:
    ids = [f"req-{n}" for n in range(20_000)]
    half = [sampled(i, 0.5) for i in ids]
    assert half == [sampled(i, 0.5) for i in ids]  # the same answer every time
    assert abs(sum(half) / len(ids) - 0.5) < 4 * (0.25 / len(ids)) ** 0.5
    assert all(sampled(i, 1.0) for i in ids[:100]) and not any(sampled(i, 0.0) for i in ids)
    # A lower rate samples a subset of a higher one: raising the rate only adds requests.
    assert all(sampled(i, 0.5) for i in ids if sampled(i, 0.1))


def test_a_job_survives_its_stream_fields_and_a_malformed_one_is_refused(
        experiment: ExperimentConfig) -> None:
    job = ShadowJob(request_id="r1", experiment="shadowed",
                    request=RouteRequest(text="hi", customer="c1", earlier_texts=("a",)),
                    shadows=experiment.shadows)
    assert ShadowJob.from_fields(job.to_fields()) == job
    for broken in ({**job.to_fields(), "v": "9"}, {"v": "1", "request_id": "r1"},
                   {**job.to_fields(), "request": "{not json"}):
        with pytest.raises(ValueError):
            ShadowJob.from_fields(broken)


def test_each_sampled_request_is_enqueued_after_commit_and_scored_once(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, _enqueuer(redis_url, redis_prefix))
    decisions = [service.route(RouteRequest(text=t, customer=f"c{i}"))
                 for i, t in enumerate(TEXTS)]

    async def on_the_loop() -> list[str]:
        ids = [(await service.route_async(RouteRequest(text=t))).request_id for t in TEXTS]
        await service.drain_shadows()  # the app's shutdown does this
        return ids

    async_ids = asyncio.run(on_the_loop())
    assert service.shadow_worker is None  # no thread in this process: Redis holds the work
    client = redis.Redis.from_url(redis_url)
    assert client.xlen(stream_key(redis_prefix)) == 2 * len(TEXTS)
    assert all(log.has_shadow(d.request_id) is False for d in decisions)

    consumer = _consumer(settings, log, redis_url, redis_prefix, "w1")
    _drain(consumer)
    assert consumer.counts == {"scored": 2 * len(TEXTS)}
    strict = {"strict": load_variant(settings, experiment.shadows[0])}
    rows = {r["request_id"]: r for r in log.rows(experiment="shadowed")}
    for i, (decision, text) in enumerate(zip(decisions, TEXTS, strict=True)):
        expected = score_shadows(strict, RouteRequest(text=text, customer=f"c{i}"),
                                 decision.request_id)
        assert json.loads(rows[decision.request_id]["shadow"]) == expected
    assert all(rows[i]["shadow"] is not None for i in async_ids)
    assert consumer.reader.status().pending == 0
    service.close()


def test_a_second_delivery_writes_nothing(settings: Settings, log: DecisionLog,
                                          experiment: ExperimentConfig, redis_url: str,
                                          redis_prefix: str) -> None:
    service = _service(settings, log, experiment, _enqueuer(redis_url, redis_prefix))
    decision = service.route(RouteRequest(text=TEXTS[0]))
    consumer = _consumer(settings, log, redis_url, redis_prefix, "w1")
    consumer.reader.ensure_group()
    (entry_id, fields), = consumer.reader.read("w1", count=10, block_ms=100)
    assert consumer.handle(entry_id, fields, redelivered=False) == "scored"
    (first,) = log.rows()
    log.set_shadow_once(decision.request_id, {"choice": "other", "variants": {}})
    assert consumer.handle(entry_id, fields, redelivered=False) == "duplicate"
    assert consumer.handle(entry_id, fields, redelivered=True) == "duplicate"
    assert log.rows()[0]["shadow"] == first["shadow"]
    service.close()


def _job_fields(experiment: ExperimentConfig, request_id: str) -> dict[str, str]:
    return ShadowJob(request_id=request_id, experiment=experiment.name,
                     request=RouteRequest(text=TEXTS[0]), shadows=experiment.shadows
                     ).to_fields()


def test_an_entry_whose_row_is_not_there_yet_waits_and_is_scored_later(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, queue=None)
    decision = service.decide(RouteRequest(text=TEXTS[0]))
    writer = ShadowStreamWriter(redis_url, prefix=redis_prefix, maxlen=1000, timeout_s=1)
    writer.add(_job_fields(experiment, decision.request_id))  # before its row: not visible
    consumer = _consumer(settings, log, redis_url, redis_prefix, "w1", claim_idle_s=0.2)
    consumer.step()
    assert consumer.counts == {"not_visible": 1}
    assert consumer.reader.status().pending == 1

    log.append(decision, text=TEXTS[0], experiment=experiment.name)
    time.sleep(0.3)
    consumer.step()  # claims its own idle entry
    assert consumer.counts["scored"] == 1 and consumer.reader.status().pending == 0
    assert log.has_shadow(decision.request_id) is True
    service.close()
    writer.close()


def test_an_entry_whose_row_never_comes_is_given_up_on(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    writer = ShadowStreamWriter(redis_url, prefix=redis_prefix, maxlen=1000, timeout_s=1)
    writer.add(_job_fields(experiment, "no-such-request"))
    consumer = _consumer(settings, log, redis_url, redis_prefix, "w1", claim_idle_s=0.1,
                         max_deliveries=3)
    deadline = time.monotonic() + 10
    while consumer.counts["abandoned"] == 0 and time.monotonic() < deadline:
        consumer.step()
        time.sleep(0.06)
    assert consumer.counts["not_visible"] == 2 and consumer.counts["abandoned"] == 1
    assert consumer.reader.status().pending == 0
    assert "given up after 3 deliveries" in caplog.text
    writer.close()


def test_a_dead_consumers_entries_are_claimed_by_another(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, _enqueuer(redis_url, redis_prefix))
    for text in TEXTS:
        service.route(RouteRequest(text=text))
    dead = _consumer(settings, log, redis_url, redis_prefix, "dead")
    dead.reader.ensure_group()
    assert len(dead.reader.read("dead", count=100, block_ms=100)) == len(TEXTS)
    # "dead" read them and never acknowledged: they are its pending entries.
    assert dead.reader.status().consumers == {"dead": len(TEXTS)}

    alive = _consumer(settings, log, redis_url, redis_prefix, "alive", claim_idle_s=0.2)
    assert alive.step() == 0  # nothing new to read, nothing idle long enough yet
    time.sleep(0.3)
    _drain(alive)
    assert alive.counts == {"scored": len(TEXTS)}
    assert all(r["shadow"] is not None for r in log.rows())
    assert alive.reader.status().pending == 0
    service.close()


def test_sampling_decides_which_requests_are_enqueued(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, _enqueuer(redis_url, redis_prefix),
                       rate=0.5)
    ids = [service.route(RouteRequest(text=TEXTS[n % len(TEXTS)])).request_id
           for n in range(60)]
    entries = redis.Redis.from_url(redis_url).xrange(stream_key(redis_prefix))
    enqueued = [fields[b"request_id"].decode() for _id, fields in entries]
    assert enqueued == [i for i in ids if sampled(i, 0.5)]
    assert 0 < len(enqueued) < len(ids)
    service.close()


def test_a_redis_that_does_not_answer_drops_shadow_work_only(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig,
        caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"  # nothing listens there
    queue = ShadowEnqueuer(ShadowStreamWriter(url, prefix="x:", maxlen=1000, timeout_s=0.1))
    service = _service(settings, log, experiment, queue)
    before = SHADOW_ENQUEUE_ERRORS._value.get()
    caplog.set_level(logging.WARNING, logger="router.routing.shadows")
    started = time.monotonic()
    decisions = [service.route(RouteRequest(text=t)) for t in TEXTS]

    async def on_the_loop() -> None:
        for text in TEXTS:
            await service.route_async(RouteRequest(text=text))
        await service.drain_shadows()

    asyncio.run(on_the_loop())
    assert time.monotonic() - started < 1.0  # one failed connect, then no more attempts
    assert len(log.rows()) == 2 * len(TEXTS) and all(d.route for d in decisions)
    assert SHADOW_ENQUEUE_ERRORS._value.get() - before == 2 * len(TEXTS)
    warnings = [r for r in caplog.records if r.name == "router.routing.shadows"]
    assert len(warnings) == 1 and "did not take a job" in warnings[0].getMessage()
    assert "s3cret" not in caplog.text
    service.close()


def test_status_shows_what_waits_and_who_holds_it(
        cli_env: Settings, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from router.cli.main import app
    from router.settings import get_settings

    writer = ShadowStreamWriter(redis_url, prefix=redis_prefix, maxlen=1000, timeout_s=1)
    for n in range(5):
        writer.add(_job_fields(experiment, f"r{n}"))
    reader = ShadowStreamReader(redis_url, prefix=redis_prefix)
    reader.ensure_group()
    reader.read("host-a:1", count=2, block_ms=100)  # two read, not acknowledged
    monkeypatch.setenv("SUPPORT_ROUTER_REDIS_URL", redis_url)
    monkeypatch.setenv("SUPPORT_ROUTER_REDIS_PREFIX", redis_prefix)
    get_settings.cache_clear()
    result = CliRunner().invoke(app, ["shadow-worker", "--status", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"length": 5, "unread": 3, "pending": 2,
                                         "consumers": {"host-a:1": 2}}
    text = CliRunner().invoke(app, ["shadow-worker", "--status"]).output
    assert "unread 3" in text and "host-a:1: 2 pending" in text
    monkeypatch.setenv("SUPPORT_ROUTER_REDIS_URL", f"redis://:s3cret@127.0.0.1:{free_port()}/0")
    get_settings.cache_clear()
    down = CliRunner().invoke(app, ["shadow-worker", "--status"])
    assert down.exit_code == 1 and "store_error" in down.output
    assert "s3cret" not in down.output
    monkeypatch.delenv("SUPPORT_ROUTER_REDIS_URL")
    get_settings.cache_clear()
    refused = CliRunner().invoke(app, ["shadow-worker"])
    assert refused.exit_code == 1 and "not_configured" in refused.output
    writer.close()
    reader.close()


def test_one_batch_one_transaction_first_result_wins(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, queue=None)
    fresh, done = (service.decide(RouteRequest(text=t)) for t in TEXTS[:2])
    for decision in (fresh, done):
        log.append(decision, text=TEXTS[0], experiment=experiment.name)
    log.set_shadow_once(done.request_id, {"choice": "other", "variants": {}})
    assert log.set_shadows_once({fresh.request_id: {"choice": "refund", "variants": {}},
                                 done.request_id: {"choice": "refund", "variants": {}},
                                 "nobody": {"choice": "refund", "variants": {}}}) == {
        fresh.request_id: "written", done.request_id: "already", "nobody": "missing"}
    assert log.has_shadow(fresh.request_id) and log.has_shadow("nobody") is None
    rows = {r["request_id"]: json.loads(r["shadow"]) for r in log.rows()}
    assert rows[done.request_id]["choice"] == "other"  # the first result stays

    consumer = _consumer(settings, log, redis_url, redis_prefix, "w1")
    third = service.decide(RouteRequest(text=TEXTS[2]))
    log.append(third, text=TEXTS[2], experiment=experiment.name)
    twice = [("1-1", _job_fields(experiment, third.request_id)),
             ("1-2", _job_fields(experiment, third.request_id))]
    assert consumer.handle_batch(twice, redelivered=False) == {"1-1": "scored",
                                                               "1-2": "duplicate"}
    service.close()


def test_only_the_experiment_that_decided_a_request_scores_its_shadows(
        settings: Settings, log: DecisionLog, experiment: ExperimentConfig, redis_url: str,
        redis_prefix: str) -> None:
    service = _service(settings, log, experiment, _enqueuer(redis_url, redis_prefix))
    live = service.experiment
    assert live is not None
    decided = service.decide(RouteRequest(text=TEXTS[0]))
    assert decided.experiment == "shadowed"
    # Stopped between the decision and its log row: nothing is scored under the old
    # experiment's name, and a newly started one does not score a request it never decided.
    service.swap_experiment(None)
    service.record(RouteRequest(text=TEXTS[0]), decided)
    renamed = LiveExperiment(experiment.model_copy(update={"name": "next"}), live.variants)
    service.swap_experiment(renamed)
    service.record(RouteRequest(text=TEXTS[1]), service.decide(RouteRequest(text=TEXTS[1])))
    service.record(RouteRequest(text=TEXTS[2]), decided.model_copy(update={"request_id": "r2"}))
    client = redis.Redis.from_url(redis_url)
    entries = client.xrange(stream_key(redis_prefix))
    assert [fields[b"experiment"] for _, fields in entries] == [b"next"]
    service.close()

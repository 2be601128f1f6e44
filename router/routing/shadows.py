"""Shadow jobs on the durable queue: what one carries, which requests get one, the enqueue.

A job is self-contained: the request id, the `RouteRequest` and the shadow variants'
configurations, so a worker needs no experiment definition of its own (wherever the
definition lives, and whichever version of it the gateway ran) and loads each variant
once per configuration (`config_key`).

Sampling is a pure function of the request id (`sampled`): a retried delivery, a second
worker and a report computed later all agree on which requests were in the sample.

`ShadowEnqueuer` appends a job after the live decision is committed. It never fails the
request and never holds it up for long. On the event loop (`/v1/route`) the request does
not wait for Redis at all: the jobs of one loop turn go out together, one pipelined
round trip, while the responses are sent; the app's shutdown waits for what is in flight
(`drain`), so only a killed process loses its last few milliseconds of jobs. From a
thread (`/v1/messages`) the append is made before the call returns, with a short timeout.

An error drops the job(s) at hand, and Redis is not asked again for `retry_s`, so an
outage costs one timeout a second rather than one per request. Every dropped job counts
in `support_router_shadow_enqueue_errors_total`; a warning is logged at most once per
`retry_s`, naming the exception's type only (its text can carry the URL and a password).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence

from pydantic import BaseModel, Field, ValidationError
from redis.exceptions import RedisError

from router.contracts import VariantConfig
from router.routing.rules import RouteRequest
from router.storage.shadow_stream import ShadowStreamWriter
from router.telemetry.metrics import SHADOW_ENQUEUE_ERRORS, SHADOW_ENQUEUED

logger = logging.getLogger(__name__)

JOB_FORMAT = "1"
"""The `v` field of every entry: a worker skips (and counts) entries of another format."""
_SAMPLE_SPACE = 1 << 64


def sampled(request_id: str, rate: float) -> bool:
    """Whether a request is in the shadow sample: sha256 of its id against `rate`."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.sha256(f"shadow:{request_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * _SAMPLE_SPACE


def config_key(shadow: VariantConfig) -> str:
    """One variant configuration's identity (sha256 of its canonical JSON): the worker's
    cache key for the loaded model."""
    canonical = json.dumps(shadow.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ShadowJob(BaseModel):
    """One request to score with every shadow variant, as a stream entry carries it."""

    request_id: str = Field(min_length=1, max_length=64)
    experiment: str
    request: RouteRequest
    shadows: list[VariantConfig] = Field(min_length=1)

    def to_fields(self) -> dict[str, str]:
        return {"v": JOB_FORMAT, "request_id": self.request_id,
                "experiment": self.experiment, "request": self.request.model_dump_json(),
                "shadows": json.dumps([s.model_dump(mode="json") for s in self.shadows])}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> ShadowJob:
        """The job an entry carries; `ValueError` for an entry this code cannot read."""
        if fields.get("v") != JOB_FORMAT:
            raise ValueError(f"unknown shadow job format {fields.get('v')!r}")
        try:
            return cls(request_id=fields["request_id"], experiment=fields["experiment"],
                       request=RouteRequest.model_validate_json(fields["request"]),
                       shadows=json.loads(fields["shadows"]))
        except (KeyError, json.JSONDecodeError, ValidationError) as exc:
            raise ValueError(f"malformed shadow job ({type(exc).__name__})") from None


MAX_IN_FLIGHT = 64
"""Pipelines a loop may have waiting on Redis at once; beyond that (Redis is slower than
the requests come) new jobs are dropped and counted instead of piling up in memory."""


class ShadowEnqueuer:
    """Appends shadow jobs to the stream; a Redis error drops the job, never the request."""

    def __init__(self, writer: ShadowStreamWriter, *, retry_s: float = 1.0) -> None:
        self.writer = writer
        self._retry_s = retry_s
        self._skip_until = float("-inf")
        self._ticks: dict[asyncio.AbstractEventLoop, list[dict[str, str]]] = {}
        self._in_flight: set[asyncio.Task[None]] = set()

    def _skipping(self) -> bool:
        if time.monotonic() < self._skip_until:
            SHADOW_ENQUEUE_ERRORS.inc()
            return True
        return False

    def submit(self, request: RouteRequest, request_id: str, experiment: str,
               shadows: Sequence[VariantConfig]) -> bool:
        """Append from a thread; False (counted) when Redis did not take it."""
        if self._skipping():
            return False
        fields = ShadowJob(request_id=request_id, experiment=experiment, request=request,
                           shadows=list(shadows)).to_fields()
        try:
            self.writer.add(fields)
        except (RedisError, OSError) as exc:
            self._failed(exc, 1)
            return False
        SHADOW_ENQUEUED.inc()
        return True

    def submit_nowait(self, request: RouteRequest, request_id: str, experiment: str,
                      shadows: Sequence[VariantConfig]) -> None:
        """From the event loop: queue the job for this loop turn's pipeline; never waits."""
        if self._skipping():
            return
        loop = asyncio.get_running_loop()
        tick = self._ticks.get(loop)
        if tick is None:
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                SHADOW_ENQUEUE_ERRORS.inc()
                return
            tick = self._ticks[loop] = []
            loop.call_soon(self._flush, loop)
        tick.append(ShadowJob(request_id=request_id, experiment=experiment, request=request,
                              shadows=list(shadows)).to_fields())

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._ticks.pop(loop, None)
        if batch:
            task = loop.create_task(self._send(batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _send(self, batch: list[dict[str, str]]) -> None:
        try:
            await self.writer.add_many_async(batch)
        except (RedisError, OSError) as exc:
            self._failed(exc, len(batch))
            return
        SHADOW_ENQUEUED.inc(len(batch))

    async def drain(self) -> None:
        """Wait for the jobs already handed to Redis from this loop (the app's shutdown)."""
        await asyncio.sleep(0)  # this turn's jobs are handed over at the start of the next
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        await self.writer.aclose_async()

    def _failed(self, exc: BaseException, jobs: int) -> None:
        SHADOW_ENQUEUE_ERRORS.inc(jobs)
        now = time.monotonic()
        # Requests already waiting on Redis when it failed fail too: one warning for all.
        first = now >= self._skip_until
        self._skip_until = now + self._retry_s
        if first:
            logger.warning("the shadow queue (Redis) did not take a job (%s); shadow scoring "
                           "is dropped for %g s, live decisions are unaffected",
                           type(exc).__name__, self._retry_s)

    def close(self) -> None:
        self.writer.close()

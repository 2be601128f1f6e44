"""The shadow queue in Redis: one stream (`<prefix>shadow`) and one consumer group.

The gateway appends (`XADD … MAXLEN ~ n`), shadow workers read through the group
(`XREADGROUP`), acknowledge what they finished (`XACK`) and claim what another consumer
read but never acknowledged (`XAUTOCLAIM` after an idle time). An entry is a flat map of
strings; what the fields mean is `router.routing.shadows`' business, not this module's.

Every call raises `redis.exceptions.RedisError` (or `OSError`) when Redis does not
answer: the caller decides whether that drops work (the gateway) or waits (a worker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import ResponseError

STREAM = "shadow"
GROUP = "shadow-workers"

Entry = tuple[str, dict[str, str]]
"""A stream entry: its id and its fields."""


def stream_key(prefix: str) -> str:
    return f"{prefix}{STREAM}"


def _entries(raw: Any) -> list[Entry]:
    """redis-py's [(id, {field: value})], decoded; entries trimmed away (None) left out."""
    out: list[Entry] = []
    for entry_id, fields in raw or []:
        if fields is None:
            continue
        out.append((_text(entry_id),
                    {_text(k): _text(v) for k, v in fields.items()}))
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class ShadowStreamWriter:
    """The gateway's side: append one entry, from a thread or from the event loop.

    The asyncio client belongs to the loop it first ran on; a process that starts a new
    loop (tests run several app lifespans in one process) gets a new client for it.
    """

    def __init__(self, url: str, *, prefix: str, maxlen: int, timeout_s: float) -> None:
        self._url, self._timeout_s = url, timeout_s
        self.key = stream_key(prefix)
        self._maxlen = maxlen
        # redis-py types its sync client's replies as "maybe awaitable": Any, read as documented.
        self._sync: Any = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                          socket_connect_timeout=timeout_s, retry=None)
        self._async: tuple[object, redis.asyncio.Redis] | None = None

    def add(self, fields: Mapping[str, str]) -> None:
        self._sync.xadd(self.key, dict[Any, Any](fields), maxlen=self._maxlen, approximate=True)

    async def add_many_async(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append every entry in one round trip (a pipeline, not a transaction)."""
        pipe = self._async_client().pipeline(transaction=False)
        for fields in entries:
            pipe.xadd(self.key, dict[Any, Any](fields), maxlen=self._maxlen, approximate=True)
        await pipe.execute()

    def _async_client(self) -> redis.asyncio.Redis:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            client = redis.asyncio.Redis.from_url(
                self._url, socket_timeout=self._timeout_s,
                socket_connect_timeout=self._timeout_s, retry=None)
            self._async = (loop, client)
        return self._async[1]

    async def aclose_async(self) -> None:
        """Close this loop's asyncio client (the app's shutdown, on its loop)."""
        if self._async is not None:
            _loop, client = self._async
            self._async = None
            await client.aclose()

    def close(self) -> None:
        self._sync.close()


@dataclass(frozen=True)
class StreamStatus:
    """What an operator checks: entries in the stream, read by no one yet, read but not
    acknowledged, and the group's consumers."""

    length: int
    lag: int | None
    pending: int
    consumers: dict[str, int]
    """Consumer name → entries it holds unacknowledged."""


class ShadowStreamReader:
    """A worker's side: the consumer group's reads, claims and acknowledgements."""

    def __init__(self, url: str, *, prefix: str, timeout_s: float = 5.0) -> None:
        self.key = stream_key(prefix)
        # Blocking reads wait up to their own `block` on top of this socket timeout.
        self._redis: Any = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                                socket_connect_timeout=timeout_s)

    def ensure_group(self) -> None:
        """Create the group (and the stream) if missing; new groups start at the first entry."""
        try:
            self._redis.xgroup_create(self.key, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def read(self, consumer: str, *, count: int, block_ms: int) -> list[Entry]:
        """Entries no consumer of the group has read yet, waiting up to `block_ms`."""
        raw = self._redis.xreadgroup(GROUP, consumer, {self.key: ">"}, count=count,
                                     block=block_ms)
        return [entry for _stream, entries in raw or [] for entry in _entries(entries)]

    def claim_idle(self, consumer: str, *, min_idle_ms: int, count: int) -> list[Entry]:
        """Entries read (by anyone) and unacknowledged for at least `min_idle_ms`, now
        this consumer's; each claim counts as one more delivery."""
        claimed: list[Entry] = []
        start = "0-0"
        while len(claimed) < count:
            start_raw, raw, *_deleted = self._redis.xautoclaim(
                self.key, GROUP, consumer, min_idle_time=min_idle_ms, start_id=start,
                count=count - len(claimed))
            claimed.extend(_entries(raw))
            start = _text(start_raw)
            if start == "0-0":  # the whole pending list was scanned
                break
        return claimed

    def deliveries(self, entry_id: str) -> int:
        """How many times the entry was handed to a consumer (0 if it is not pending)."""
        rows = self._redis.xpending_range(self.key, GROUP, min=entry_id, max=entry_id,
                                          count=1)
        return int(rows[0]["times_delivered"]) if rows else 0

    def ack(self, *entry_ids: str) -> None:
        if entry_ids:
            self._redis.xack(self.key, GROUP, *entry_ids)

    def status(self) -> StreamStatus:
        self.ensure_group()
        length = int(self._redis.xlen(self.key))
        groups = {_text(g["name"]): g for g in self._redis.xinfo_groups(self.key)}
        group = groups[GROUP]
        lag = group.get("lag")
        consumers = {_text(c["name"]): int(c["pending"])
                     for c in self._redis.xinfo_consumers(self.key, GROUP)}
        return StreamStatus(length=length, lag=None if lag is None else int(lag),
                            pending=int(group["pending"]), consumers=consumers)

    def close(self) -> None:
        self._redis.close()

"""`support-router shadow-worker [--status]`: score the shadow stream, or show its state.

Registered on the main app by `register(app)`. The worker runs until SIGTERM or SIGINT,
finishes the job in hand and exits 0 (`router.app.shadow_worker`); `--status` prints
the stream's length, the entries no worker has read yet, those read but not
acknowledged, and each consumer's share of them.
"""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from router.storage.shadow_stream import StreamStatus


def format_status(status: StreamStatus) -> str:
    lag = "unknown" if status.lag is None else str(status.lag)
    lines = [f"stream length {status.length}  unread {lag}  pending {status.pending}"]
    lines += [f"  consumer {name}: {pending} pending"
              for name, pending in sorted(status.consumers.items())]
    return "\n".join(lines)


def shadow_worker(
    status: Annotated[bool, typer.Option(
        "--status", help="Print the queue's state and exit instead of working.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --status: print JSON.")] = False,
    batch: Annotated[int, typer.Option(min=1, max=1000,
                                       help="Entries read from Redis at a time.")] = 16,
    claim_idle: Annotated[float | None, typer.Option(
        min=0.1, help="Seconds an entry stays unacknowledged before another worker claims "
                      "it (default: shadow_claim_idle_s).")] = None,
) -> None:
    """Score the shadow variants' decisions from the Redis shadow stream into the decision
    log (at least once, deduplicated by request id); run as many as needed, anywhere."""
    import logging

    from router.app.shadow_worker import build_consumer
    from router.settings import get_settings
    from router.telemetry.logs import configure_logging

    settings = get_settings()
    consumer = build_consumer(settings, batch=batch, claim_idle_s=claim_idle)
    if status:
        from redis.exceptions import RedisError

        from router.errors import StoreError

        try:
            state = consumer.reader.status()
        except (RedisError, OSError) as exc:
            # The type only: the error's text can carry the URL.
            raise StoreError(f"the shadow stream (Redis) did not answer "
                             f"({type(exc).__name__})") from None
        if as_json:
            typer.echo(json.dumps({"length": state.length, "unread": state.lag,
                                   "pending": state.pending, "consumers": state.consumers}))
        else:
            typer.echo(format_status(state))
        return
    configure_logging(settings)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: consumer.stop())
    logger = logging.getLogger("router.app.shadow_worker")
    logger.info("shadow worker %s reading %s", consumer.consumer, consumer.reader.key)
    consumer.run()
    logger.info("shadow worker %s stopped: %s", consumer.consumer,
                dict(consumer.counts) or "nothing handled")


def register(app: typer.Typer) -> None:
    """Add `shadow-worker` to the main `support-router` app."""
    app.command("shadow-worker")(shadow_worker)

"""`support-router serve`: the loopback rule, worker processes and graceful shutdown.

Workers are uvicorn's (`router.gateway.asgi:app` by import string); each worker builds
its own app from the environment, so settings reach them the same way they reached this
process. On SIGTERM uvicorn stops accepting connections, lets requests in flight finish
for up to `shutdown_grace_s`, runs the app's shutdown (closes the database), and the
command exits 0.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from router.access import KeyRing
from router.errors import SupportRouterError
from router.gateway.access import is_loopback_host
from router.settings import Settings

logger = logging.getLogger(__name__)

ASGI_APP = "router.gateway.asgi:app"

WORKER_HEALTHCHECK_S = 30
"""How long uvicorn's supervisor waits for a worker to answer its ping before killing it.

uvicorn's default (5 s) is too short here: the ping is answered by a thread of the worker,
and under a burst on a 2-core machine that thread can wait longer than 5 s for the GIL
behind the request threads; the supervisor then SIGKILLs a healthy, busy worker and
every request in it is lost (seen in `tests/router/test_serve.py`). A worker silent for
30 s is really stuck.
"""


class LoopbackOnly(SupportRouterError):
    """Refusing to bind a public interface while every endpoint is open."""

    status_code = 400
    code = "loopback_only"


def check_bind(settings: Settings, host: str) -> None:
    """Without API keys every endpoint is open, so only loopback may be bound.

    Refusing (rather than quietly binding 127.0.0.1 instead) means an operator who asked
    for 0.0.0.0 learns at once that the gateway would have been unreachable, or open.
    """
    if settings.api_keys or is_loopback_host(host):
        return
    raise LoopbackOnly(
        f"refusing to bind {host}: no API keys are configured, so every endpoint would be "
        f"open to anyone who can reach it. Bind 127.0.0.1 (the default), or create keys "
        f"with `support-router keys new --name NAME --role gateway` and set "
        f"SUPPORT_ROUTER_API_KEYS."
    )


def _ensure_models(settings: Settings) -> None:
    """Train missing models once here, not in every worker at the same time."""
    from router.training import train_local

    if not settings.local_model_path.exists() or not settings.policy_path.exists():
        logger.warning("no local model at %s; training it now", settings.local_model_path)
        train_local(settings.routes_data, settings.model_dir, policy_path=settings.policy_path)
    if settings.backend == "e5" and (
        not settings.e5_model_path.exists() or not settings.e5_policy_path.exists()
    ):
        train_local(settings.routes_data, settings.model_dir,
                    policy_path=settings.e5_policy_path, backend="e5")


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    """SIGTERM is how process managers ask for an orderly stop: exit 0, not -15.

    uvicorn handles the signal itself while it serves (graceful shutdown) and afterwards
    re-raises it to the handler that was installed before it started: this one.
    """
    raise SystemExit(0)


def serve_gateway(
    settings: Settings, *, host: str, port: int, workers: int = 1, **uvicorn_options: Any
) -> None:
    """Check the bind address, then serve until SIGTERM/SIGINT (blocks).

    `uvicorn_options` pass through to `uvicorn.run` (log config, access log).
    """
    import uvicorn

    check_bind(settings, host)
    KeyRing(settings.api_keys)  # duplicate names/digests fail here, before any worker starts
    if workers > 1:
        _ensure_models(settings)
    # The app says how requests are let in when it starts (router.gateway.access).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.run(
        ASGI_APP,
        host=host,
        port=port,
        workers=workers,
        timeout_graceful_shutdown=settings.shutdown_grace_s,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        **uvicorn_options,
    )

"""`support-router serve`: the loopback rule, worker processes and graceful shutdown.

Each worker runs `router.gateway.asgi:app` (by import string) and builds its own app from
the environment, so settings reach it the same way they reached this process. On SIGTERM
uvicorn stops accepting connections, lets requests in flight finish for up to
`shutdown_grace_s`, runs the app's shutdown (closes the database), and the command exits 0.

With several workers each one binds its own socket with `SO_REUSEPORT` and the kernel
spreads new connections over them. uvicorn's own `--workers` shares one socket, and
asyncio accepts every pending connection in one wake-up, so a client that opens its
keep-alive connections at once (a load balancer's pool, `wrk`) could land them all on one
worker and leave the other idle (seen in `bench/load.py`: 1,500 instead of 2,650 req/s).
This supervisor does not restart a worker that dies: it stops the others and exits 1,
and the process manager (systemd, Kubernetes) restarts the whole gateway.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import time
from types import FrameType
from typing import Any

from router.access import KeyRing
from router.errors import SupportRouterError
from router.gateway.middleware.access import is_loopback_host
from router.settings import Settings

logger = logging.getLogger(__name__)

ASGI_APP = "router.gateway.asgi:app"

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
    from router.app.bootstrap import ensure_trained

    ensure_trained(settings)
    if settings.backend == "e5":
        ensure_trained(settings, "e5")


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
    # The app says how requests are let in when it starts (router.gateway.middleware.access).
    options = {"timeout_graceful_shutdown": settings.shutdown_grace_s, **uvicorn_options}
    if workers > 1:
        raise SystemExit(_supervise(host, port, workers, options))
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.run(ASGI_APP, host=host, port=port, **options)


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _worker(host: str, port: int, options: dict[str, Any]) -> None:
    """One worker process: its own listening socket on the shared port, one uvicorn."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(ASGI_APP, host=host, port=port, **options))
    signal.signal(signal.SIGTERM, _exit_cleanly)
    server.run(sockets=[_reuse_port_socket(host, port)])


def _supervise(host: str, port: int, workers: int, options: dict[str, Any]) -> int:
    """Start the workers, pass SIGTERM on to them, and wait; the exit code for the command.

    SIGINT is not passed on: Ctrl-C reaches every process of the terminal's group already,
    and a second one would make uvicorn skip its graceful shutdown.
    """
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_worker, args=(host, port, options),
                                 name=f"gateway-worker-{n}") for n in range(workers)]
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for process in processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    for process in processes:
        process.start()
    while any(process.is_alive() for process in processes):
        failed = [p for p in processes if p.exitcode not in (None, 0)]
        if failed and not stopping:
            logger.error("%s exited with %s; stopping the gateway", failed[0].name,
                         failed[0].exitcode)
            stop(signal.SIGTERM, None)
        time.sleep(0.2)
    return 0 if all(process.exitcode == 0 for process in processes) else 1

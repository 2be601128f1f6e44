"""`support-router serve`: checks that need nothing loaded, then granian with its limits.

**Before anything loads** (`preflight`): the loopback rule (no keys → loopback only), a
consistent key list, a free port, and policy files that load (`invalid_policy`, naming
the field and how to replace the file). A port in use is refused at once with a hint,
rather than after the model has loaded (or, worse, shared: granian's workers bind with
`SO_REUSEPORT`, so a second gateway of the same user could otherwise join the first).

**The server** is granian (Rust, hyper), because it enforces per connection what a
gateway exposed to clients needs before the app sees a byte:

- the request line and headers together fit in `max_request_head_bytes` (more: 431 and
  the connection is closed, so a 100 MB header block costs 16 KiB, not 100 MB), and
  there are at most 100 header fields;
- a request head must be complete within `header_timeout_s` of the connection opening or
  of the previous response: slowloris heads, idle new connections and idle keep-alive
  connections are all closed by that one timer, so idle sockets cannot pile up until the
  process runs out of file descriptors;
- each worker binds its own `SO_REUSEPORT` socket, so the kernel spreads connections over
  the workers (one shared socket let one asyncio worker take a whole burst of keep-alive
  connections); a worker that dies is replaced while the others go on serving, and a
  replacement binds its socket only once its app has started, so it takes no connection
  it cannot answer. A worker that dies again within seconds of being replaced is a crash
  loop: the gateway then exits 1, for the process manager. A worker whose start fails in
  the background (training, loading) stops the gateway at once, which exits 3
  (`report_start_failure`).

The app adds what the server cannot know (router/gateway/middleware/body_limits.py): the
request target within `max_request_line_bytes` (414), at most `max_header_count` header
fields (431), the body within `body_timeout_s` (408, closed) and `max_body_bytes` (413).

Not uvicorn: its httptools parser takes headers of any size and it has no head or body
timeout. Not gunicorn with `uvicorn_worker.UvicornWorker`: gunicorn's `limit_request_*`
settings apply to gunicorn's own parser, which that worker does not use; gunicorn's own
`asgi` worker has those limits but no timeout on an unfinished head.

On SIGTERM granian stops accepting, lets requests in flight finish, runs the app's
shutdown (closes the database) and exits 0; a worker still busy after `shutdown_grace_s`
is killed.
"""

from __future__ import annotations

import errno
import math
import os
import signal
import socket
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

from router.access import KeyRing
from router.errors import SupportRouterError
from router.gateway.middleware.access import is_loopback_host
from router.settings import Settings
from router.storage.policy_store import check_serving_policies

ASGI_APP = "router.gateway.asgi:app"
START_FAILED_EXIT_CODE = 3
# Set by `serve_gateway` for its workers (they inherit the environment): whom to tell, and
# where, that a worker could not start.
SERVER_PID_ENV = "SUPPORT_ROUTER_SERVER_PID"
START_FAILED_FILE_ENV = "SUPPORT_ROUTER_START_FAILED_FILE"


class StartFailed(SupportRouterError):
    """A worker could not start (its log says why); the gateway stopped."""

    status_code = 500
    code = "start_failed"


def report_start_failure(reason: str) -> None:
    """From a worker that cannot start: stop the whole `serve`, which then exits 3.

    granian respawns a worker that exits, and its crash-loop check misses workers that
    fail in turn (each respawn clears the other workers' timestamps), so N workers that
    all fail to start were respawned for minutes. Nothing to do outside `serve` (a
    worker run by hand under another server has neither variable).
    """
    path, pid = os.environ.get(START_FAILED_FILE_ENV), os.environ.get(SERVER_PID_ENV)
    if not path or not pid:
        return
    with suppress(OSError):
        Path(path).write_text(reason, encoding="utf-8")
    with suppress(OSError, ValueError):
        os.kill(int(pid), signal.SIGTERM)


class LoopbackOnly(SupportRouterError):
    """Refusing to bind a public interface while every endpoint is open."""

    status_code = 400
    code = "loopback_only"


class CannotBind(SupportRouterError):
    """The address cannot be bound: the port is taken, or the interface is not ours."""

    status_code = 400
    code = "port_in_use"


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


def check_port(host: str, port: int) -> None:
    """Bind the address once, without `SO_REUSEPORT`, to learn whether anything holds it.

    `SO_REUSEADDR` is set so that connections of a gateway that just stopped (TIME_WAIT)
    do not count; a listening socket does, whoever owns it.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise CannotBind(f"cannot bind {host}: {exc.strerror}", code="cannot_bind") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CannotBind(
                    f"port {port} on {host} is already in use (another gateway, or another "
                    f"program). Stop it, or choose a free port with `--port {port + 1}` "
                    f"(or SUPPORT_ROUTER_PORT)."
                ) from None
            raise CannotBind(f"cannot bind {host}:{port}: {exc.strerror}",
                             code="cannot_bind") from None


def preflight(settings: Settings, host: str, port: int) -> None:
    """Everything `serve` can refuse before a model or a worker is loaded."""
    check_bind(settings, host)
    KeyRing(settings.api_keys)  # duplicate names/digests fail here, before any worker starts
    check_port(host, port)
    # A policy file that does not load would fail every worker's start, one after another.
    check_serving_policies(settings)


def server_options(settings: Settings, *, host: str, port: int, workers: int) -> dict[str, Any]:
    """The granian `Server` arguments for these settings (every limit in one place)."""
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.log import LogLevels

    return {
        "target": ASGI_APP,
        "address": host,
        "port": port,
        "interface": Interfaces.ASGI,
        "workers": workers,
        # HTTP/1 only: the head limits and timeouts above are HTTP/1 settings, and no
        # client of the gateway needs HTTP/2 (a TLS-terminating proxy speaks HTTP/1 on).
        "http": HTTPModes.http1,
        "websockets": False,
        "http1_settings": HTTP1Settings(
            header_read_timeout=max(1, round(settings.header_timeout_s * 1000)),
            keep_alive=True,
            max_buffer_size=settings.max_request_head_bytes,
        ),
        "respawn_failed_workers": True,
        # Also bounds a worker that hangs while stopping (granian asks for one: a worker can
        # stall at its very last step, after everything was answered).
        "workers_kill_timeout": max(1, math.ceil(settings.shutdown_grace_s)),
        "log_level": LogLevels(settings.log_level.lower()),
        "log_dictconfig": log_config(settings),
        "log_access": False,  # the app writes one access line per request (router.requests)
    }


def log_config(settings: Settings) -> dict[str, Any]:
    """JSON lines (router/telemetry/logs.py) for granian's own loggers too."""
    from router.telemetry.logs import uvicorn_log_config

    config = uvicorn_log_config(settings)
    config["loggers"] |= {
        "_granian": {"handlers": [], "propagate": True},
        "granian.access": {"handlers": [], "propagate": False, "level": "CRITICAL"},
    }
    return config


def serve_gateway(settings: Settings, *, host: str, port: int, workers: int = 1) -> None:
    """Check what can be checked before loading, then serve until SIGTERM/SIGINT (blocks).

    Each worker imports `router.gateway.asgi:app` and builds its app from the environment,
    so settings reach it the same way they reached this process.

    Raises
    ------
    StartFailed
        a worker could not start (`report_start_failure`) and the gateway stopped.
    """
    from granian.server import Server

    preflight(settings, host, port)
    with tempfile.TemporaryDirectory(prefix="support-router-serve-") as folder:
        failed = Path(folder) / "start-failed"
        os.environ[SERVER_PID_ENV] = str(os.getpid())
        os.environ[START_FAILED_FILE_ENV] = str(failed)
        Server(**server_options(settings, host=host, port=port, workers=workers)).serve()
        if failed.exists():
            raise StartFailed(f"the gateway could not start ({failed.read_text()}); "
                              "it stopped rather than restart workers that cannot start")

"""The served gateway under hostile connections: each limit holds and fails safe.

One `support-router serve` process on loopback with 2-second head and body timeouts,
talked to through raw sockets as an attacker would: a header block of a megabyte, more
header fields than allowed, a request target of 10 kB, a head sent a line at a time
(slowloris), connections that never send anything or go quiet after a response, a body
that never arrives. Every one is answered with a 4xx (or nothing) and closed, and the
gateway keeps serving. A second process with only 256 file descriptors is given more
idle connections than it can hold: it closes them and answers `/healthz` again.

Waits are bounded (`GIVE_UP_S`): a connection still open then is the failure.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from router.app.training import TrainResult
from tests.servers import SERVE, GatewayProcess, gateway_env

HEADER_TIMEOUT_S = 2
BODY_TIMEOUT_S = 2
GIVE_UP_S = 20.0
START_TIMEOUT_S = 180.0
IDLE_SOCKETS = 300
FD_LIMIT = 256


def _env(trained: TrainResult, var_dir: Path) -> dict[str, str]:
    return gateway_env(trained.model_path.parent, trained.policy_path, var_dir,
                       header_timeout_s=str(HEADER_TIMEOUT_S),
                       body_timeout_s=str(BODY_TIMEOUT_S), rate_limit_per_s="0")


@pytest.fixture(scope="module")
def gateway(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[GatewayProcess]:
    tmp_path = tmp_path_factory.mktemp("limits")
    with GatewayProcess() as server:
        server.start(_env(trained, tmp_path / "var"), [], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        yield server


def _connect(server: GatewayProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_until_closed(sock: socket.socket, give_up_s: float = GIVE_UP_S) -> tuple[bytes, bool]:
    """Everything the server sends, and whether it closed the connection in time."""
    received = b""
    deadline = time.monotonic() + give_up_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:  # closed with our bytes unread: closed all the same
            return received, True
        if not chunk:
            return received, True
        received += chunk
    return received, False


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def _json_body(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def _still_serves(server: GatewayProcess) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def _send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    """Send while the caller reads: the server answers (and closes) before taking it all."""

    def send() -> None:
        try:
            sock.sendall(data)
        except OSError:  # the server closed the connection mid-send, as it should
            pass

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_a_megabyte_of_headers_is_refused_and_the_connection_closed(
    gateway: GatewayProcess,
) -> None:
    sock = _connect(gateway)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 1_000_000 + b"\r\n\r\n"
    sender = _send_in_background(sock, head)
    response, closed = _read_until_closed(sock)
    sender.join(GIVE_UP_S)
    sock.close()
    assert _status(response) in (400, 431), response[:200]
    assert closed
    _still_serves(gateway)


def test_more_header_fields_than_the_server_parses_are_refused(gateway: GatewayProcess) -> None:
    sock = _connect(gateway)
    fields = b"".join(b"X-Field-%d: v\r\n" % n for n in range(150))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
    response, closed = _read_until_closed(sock)
    sock.close()
    assert _status(response) in (400, 431), response[:200]
    assert closed
    _still_serves(gateway)


def test_more_header_fields_than_configured_get_431_with_a_code(gateway: GatewayProcess) -> None:
    headers = {f"X-Field-{n}": "v" for n in range(80)}  # default max_header_count: 64
    response = httpx.get(f"{gateway.url}/healthz", headers=headers, timeout=10)
    assert response.status_code == 431
    assert response.json()["error"]["code"] == "too_many_headers"


def test_a_long_request_target_gets_414_with_a_code(gateway: GatewayProcess) -> None:
    response = httpx.get(f"{gateway.url}/v1/cases/{'c' * 10_000}", timeout=10)
    assert response.status_code == 414
    assert response.json()["error"]["code"] == "uri_too_long"


def test_a_head_sent_a_line_at_a_time_is_closed_after_the_header_timeout(
    gateway: GatewayProcess,
) -> None:
    """Slowloris: every line arrives well within any per-read timeout, the head never ends."""
    sock = _connect(gateway)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    closed, received = False, b""
    deadline = time.monotonic() + GIVE_UP_S
    line = 0
    while not closed and time.monotonic() < deadline:
        try:
            sock.sendall(b"X-Slow-%d: y\r\n" % line)
        except OSError:
            closed = True
            break
        line += 1
        chunk, closed = _read_until_closed(sock, give_up_s=0.5)
        received += chunk
    sock.close()
    assert closed, f"still open after {GIVE_UP_S} s and {line} header lines"
    assert _status(received) != 200


def test_a_connection_that_sends_nothing_is_closed(gateway: GatewayProcess) -> None:
    sock = _connect(gateway)
    response, closed = _read_until_closed(sock)
    sock.close()
    assert closed and _status(response) != 200


def test_an_idle_keep_alive_connection_is_closed_after_its_response(
    gateway: GatewayProcess,
) -> None:
    sock = _connect(gateway)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    response = b""
    while b"\r\n\r\n" not in response or not response.endswith(b"}"):
        response += sock.recv(65536)
    assert _status(response) == 200  # answered, and the connection kept open for more
    rest, closed = _read_until_closed(sock)
    sock.close()
    assert closed and rest == b""


def test_a_body_that_never_arrives_gets_408_and_the_connection_closed(
    gateway: GatewayProcess,
) -> None:
    sock = _connect(gateway)
    sock.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"text\": \"hel")
    response, closed = _read_until_closed(sock)
    sock.close()
    assert _status(response) == 408, response[:200]
    assert _json_body(response)["error"]["code"] == "body_timeout"
    assert closed
    _still_serves(gateway)


def test_idle_connections_beyond_the_descriptor_limit_are_shed_and_it_serves_again(
    trained: TrainResult, tmp_path: Path,
) -> None:
    """More idle connections than the process has file descriptors: while they are open
    new connections may wait, but each is closed after the header timeout, so the
    gateway cannot be held down by sockets that only sit there."""
    limited = ["bash", "-c", f'ulimit -n {FD_LIMIT} && exec "$@"', "serve", *SERVE]
    with GatewayProcess(limited) as server:
        server.start(_env(trained, tmp_path / "var"), [], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_S)
                for _ in range(IDLE_SOCKETS)]
        deadline = time.monotonic() + 2 * GIVE_UP_S  # for all of them together
        try:
            closed = [_read_until_closed(sock, max(0.01, deadline - time.monotonic()))[1]
                      for sock in idle]
        finally:
            for sock in idle:
                sock.close()
        assert all(closed), f"{closed.count(False)} idle connections still open"
        _still_serves(server)
        assert server.process is not None and server.process.poll() is None

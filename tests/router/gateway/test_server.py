"""What `serve` checks before anything loads, the server settings, and who the caller is.

The server itself is tested as a process in tests/e2e/ (test_connection_limits.py,
test_workers.py, test_first_start.py); here are the pure parts.
"""

from __future__ import annotations

import socket

import pytest

from router.gateway.middleware.forwarded import TrustedProxies
from router.gateway.server import CannotBind, check_port, server_options
from router.settings import Settings


def test_a_port_someone_listens_on_is_refused_with_a_hint() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CannotBind, match=f"port {port} on 127.0.0.1 is already in use") as e:
            check_port("127.0.0.1", port)
    assert e.value.code == "port_in_use" and "--port" in e.value.message
    check_port("127.0.0.1", port)  # free again


def test_an_address_that_is_not_ours_cannot_be_bound() -> None:
    with pytest.raises(CannotBind) as e:
        check_port("192.0.2.1", 8000)  # TEST-NET-1: on no interface of this machine
    assert e.value.code == "cannot_bind"


def test_the_limits_reach_the_server() -> None:
    settings = Settings(max_request_head_bytes=20_000, header_timeout_s=2.5,
                        shutdown_grace_s=7.2, log_level="WARNING")
    options = server_options(settings, host="127.0.0.1", port=8123, workers=3)
    http1 = options["http1_settings"]
    assert (http1.max_buffer_size, http1.header_read_timeout) == (20_000, 2500)
    assert options["workers"] == 3 and options["respawn_failed_workers"] is True
    assert options["workers_kill_timeout"] == 8
    assert str(options["http"]) == "1" and str(options["interface"]) == "asgi"
    assert options["log_dictconfig"]["loggers"]["_granian"]["propagate"] is True


@pytest.mark.parametrize(
    ("trusted", "forwarded_for", "client"),
    [
        (["127.0.0.1"], "203.0.113.7", "203.0.113.7"),
        # The right-most address a trusted proxy did not add is the caller: what is left
        # of it is the client's own claim.
        (["127.0.0.1"], "198.51.100.1, 203.0.113.7", "203.0.113.7"),
        (["127.0.0.1", "10.0.0.0/8"], "203.0.113.7, 10.1.2.3", "203.0.113.7"),
        (["10.0.0.0/8"], "10.0.0.1, 10.0.0.2", "10.0.0.1"),
        (["127.0.0.1"], "203.0.113.7, not-an-address", None),
        (["::1"], "2001:db8::5", "2001:db8::5"),
    ],
)
def test_the_caller_behind_trusted_proxies(trusted: list[str], forwarded_for: str,
                                           client: str | None) -> None:
    assert TrustedProxies(trusted).client(forwarded_for) == client


def test_only_configured_peers_are_proxies() -> None:
    proxies = TrustedProxies(["10.0.0.0/8", "127.0.0.1"])
    assert "10.9.8.7" in proxies and "127.0.0.1" in proxies and "::ffff:127.0.0.1" in proxies
    assert "127.0.0.2" not in proxies and "testclient" not in proxies and None not in proxies
    assert not TrustedProxies([])

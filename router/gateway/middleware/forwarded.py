"""Who the caller is: the socket peer, unless the peer is a proxy we were told to trust.

`X-Forwarded-For` is only a claim, and anyone can make it: believed from every peer, a
client could pick a new address per request and so a new keyless rate-limit bucket each
time. It is believed only from the addresses in `Settings.trusted_proxies` (IPs or CIDR
networks; none by default). From such a peer the caller is the right-most address of the
header that is not itself a trusted proxy (proxies append the address they saw, so
everything left of that is the client's own claim), and `X-Forwarded-Proto` sets the
scheme. From any other peer both headers are ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """A set of proxy addresses and networks, parsed once."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.networks: list[Network] = [ipaddress.ip_network(entry.strip(), strict=False)
                                        for entry in entries]

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, host: str | None) -> bool:
        address = _address(host)
        return address is not None and any(address in network for network in self.networks)

    def client(self, forwarded_for: str) -> str | None:
        """The right-most hop of an `X-Forwarded-For` value that is not a trusted proxy."""
        hops = [hop.strip() for hop in forwarded_for.split(",")]
        for hop in reversed(hops):
            if _address(hop) is None:
                return None  # a hop that is no address: the header is not believable
            if hop not in self:
                return hop
        return hops[0] or None


def _address(host: str | None) -> Address | None:
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


NOBODY = TrustedProxies(())


class ForwardedHeaders:
    """ASGI middleware applying `X-Forwarded-For`/`-Proto` from trusted proxies only.

    The list is the running app's `trusted_proxies` setting, read once its services are
    built (they carry the settings); with none configured a request costs one check.
    """

    def __init__(self, app: ASGIApp, *, trusted: TrustedProxies | None = None) -> None:
        self.app = app
        self._trusted = trusted

    def _resolve(self, scope: Scope) -> TrustedProxies:
        services = getattr(scope["app"].state, "services", None)
        if services is None:
            return NOBODY  # starting: nothing forwarded is believed yet
        self._trusted = TrustedProxies(services.settings.trusted_proxies)
        return self._trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            trusted = self._trusted if self._trusted is not None else self._resolve(scope)
            client = scope.get("client")
            if trusted and client and client[0] in trusted:
                _apply(scope, trusted)
        await self.app(scope, receive, send)


def _apply(scope: Scope, trusted: TrustedProxies) -> None:
    forwarded_for: list[str] = []
    proto = None
    for key, value in scope["headers"]:
        if key == b"x-forwarded-for":
            forwarded_for.append(value.decode("latin-1"))
        elif key == b"x-forwarded-proto" and proto is None:
            proto = value.decode("latin-1").strip().lower()
    if forwarded_for:
        host = trusted.client(",".join(forwarded_for))
        if host is not None:
            scope["client"] = (host, 0)
    if proto in ("http", "https"):
        scope["scheme"] = proto

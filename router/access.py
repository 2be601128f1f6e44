"""API keys and roles, with no HTTP in sight (the gateway glue: `router.gateway.middleware.access`).

Settings hold only the sha256 digest of each key, never the key: a leaked settings file or
environment dump does not let anyone call the API. A plain (unsalted, fast) sha256 is
enough because keys are 256 random bits made by `new_key()`, so there is nothing to
guess by brute force; a slow password hash would only add latency to every request.

Lookup compares the presented key's digest with *every* configured digest through
`hmac.compare_digest` and never stops at the first match, so the time taken does not
depend on which key matched or how many leading bytes of a digest agreed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from router.errors import SupportRouterError

Role = Literal["gateway", "agent", "supervisor", "labeller", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
"""`gateway`: route, messages, cases. `agent`: the hand-off queue and replies.
`supervisor`: refund approvals. `labeller`: the data team's labelling in the console
(queue, agreement, adjudication, export); labels are recorded under the key's name.
`admin`: policy publish/rollback/reload, experiments start/stop/list."""

KEY_PREFIX = "sr_"
"""Makes a leaked key recognisable to secret scanners and to people reading a log."""

_HEX64 = re.compile(r"[0-9a-f]{64}")


def hash_key(key: str) -> str:
    """The hex sha256 digest stored in settings for `key`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh key with 256 bits from the OS's CSPRNG."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class ApiKey(BaseModel):
    """One configured key: who it is (a name for logs), its digest, and what it may do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    sha256: str
    roles: tuple[Role, ...] = Field(min_length=1)

    @field_validator("sha256")
    @classmethod
    def _digest(cls, value: str) -> str:
        # A plaintext key pasted here by mistake must fail loudly, not silently never match.
        digest = value.strip().lower()
        if not _HEX64.fullmatch(digest):
            raise ValueError(
                "sha256 must be the 64-character hex digest of the key "
                "(`support-router keys new` prints it), never the key itself"
            )
        return digest


class InvalidApiKeys(SupportRouterError):
    """The configured key list contradicts itself; the gateway must not start with it."""

    code = "invalid_api_keys"
    status_code = 400


class KeyRing:
    """The configured keys, looked up by the key a client presents."""

    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self._keys = tuple(keys)
        names = [k.name for k in self._keys]
        if len(set(names)) != len(names):
            raise InvalidApiKeys(
                "SUPPORT_ROUTER_API_KEYS: key names must be unique (they name the caller in logs)")
        digests = [k.sha256 for k in self._keys]
        if len(set(digests)) != len(digests):
            raise InvalidApiKeys(
                "SUPPORT_ROUTER_API_KEYS: two entries have the same sha256 (one key, two names)")
        self._digests = [bytes.fromhex(d) for d in digests]

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> tuple[ApiKey, ...]:
        return self._keys

    def authenticate(self, presented: str | None) -> ApiKey | None:
        """The key entry matching `presented`, or None; constant time in the key's content."""
        if not presented:
            return None
        digest = hashlib.sha256(presented.encode("utf-8")).digest()
        found: ApiKey | None = None
        for entry, expected in zip(self._keys, self._digests, strict=True):
            # No early exit: every digest is compared whatever matched before.
            if hmac.compare_digest(digest, expected) and found is None:
                found = entry
        return found


def allows(key: ApiKey, role: str) -> bool:
    """Roles are independent: an `admin` key that should also route lists `gateway` too."""
    return role in key.roles

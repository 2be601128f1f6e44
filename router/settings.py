"""Runtime configuration, read from `SUPPORT_ROUTER_*` environment variables.

State lives where the operator puts it: under `data_dir` (`SUPPORT_ROUTER_DATA_DIR`;
default: the working directory when the settings are built) are `models/` (the trained
model and its policies) and `var/` (the SQLite database, agent checkpoints, the score
cache, numba's compiled kernels). Every other relative path setting is resolved against
`data_dir` too, never against the package, so an installed wheel writes nothing into
site-packages and two gateways started in two folders share nothing by accident. The
policy files default to `model_dir`, so pointing `SUPPORT_ROUTER_MODEL_DIR` at a trained
model is enough.

The labelled data, steering segments and store fixture default to the copies shipped with
the code (router/packaged.py); an operator may point these settings at their own files.

Settings are built by `get_settings()` (cached) and passed in; nothing reads them at
import time.
"""

from __future__ import annotations

import os
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from router.access import ApiKey
from router.contracts import ExperimentConfig
from router.packaged import data_path

# The policy files that default to `model_dir` when not set (file names inside it).
POLICY_FILES = {
    "policy_path": "policy.json",
    "e5_policy_path": "policy-e5.json",
    "typesafe_policy_path": "policy-typesafe.json",
    "cascade_policy_path": "policy-cascade.json",
}


def resolve_path(path: Path, base: Path) -> Path:
    """`path` itself if absolute, else `base / path`."""
    return path if path.is_absolute() else base / path


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SUPPORT_ROUTER_", extra="ignore")

    # Where state lives (see the module docstring); relative paths below resolve against it.
    data_dir: Path = Field(default_factory=Path.cwd)
    var_dir: Path = Path("var")
    # A SQLite file in var_dir by default; `postgresql+psycopg://…` in deployments.
    database_url: str = ""

    # Decision model and policy. The labelled data defaults to the shipped copy.
    # `cascade`: the local model, then e5, under one certified policy
    # (`support-router certify-cascade` writes it; router/routing/cascade.py).
    backend: Literal["local", "e5", "typesafe", "cascade"] = "local"
    routes_data: Path = Field(default_factory=lambda: data_path("routes"))
    steering_data: Path = Field(default_factory=lambda: data_path("steering"))
    model_dir: Path = Path("models")
    # Unset: `<model_dir>/policy.json` (and policy-e5.json, policy-typesafe.json,
    # policy-cascade.json).
    policy_path: Path = Path("models/policy.json")
    e5_policy_path: Path = Path("models/policy-e5.json")
    cascade_policy_path: Path = Path("models/policy-cascade.json")
    # The largest misroute rate among routed requests a cascade is certified for when the
    # gateway certifies it itself (backend=cascade with no cascade policy yet).
    cascade_alpha: float = Field(default=0.02, gt=0.0, lt=1.0)

    # TypeSafe / Jev-compatible server.
    typesafe_model: str = "jev-latest"
    typesafe_base_url: str = "https://api.typesafe.ai"
    typesafe_api_key: SecretStr | None = Field(
        default=None,
        # The prefixed variable wins; the SDK's own TYPESAFE_API_KEY works too.
        validation_alias=AliasChoices(
            "SUPPORT_ROUTER_TYPESAFE_API_KEY", "TYPESAFE_API_KEY", "typesafe_api_key"
        ),
    )
    typesafe_timeout_s: float = Field(default=10.0, gt=0)
    typesafe_max_attempts: int = Field(default=3, ge=1, le=10)
    typesafe_policy_path: Path = Path("models/policy-typesafe.json")
    typesafe_default_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    breaker_failure_threshold: int = Field(default=5, ge=1)
    breaker_reset_s: float = Field(default=30.0, gt=0)

    # The shop: the store fixture (default: the shipped one) and its clock (its "today").
    store_fixture: Path = Field(default_factory=lambda: data_path("store", "fixture.json"))
    today: date = date(2026, 3, 15)

    # HTTP.
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    # Bad input (router/gateway/middleware/body_limits.py): a body above max_body_bytes is
    # refused with 413 while it streams in (never buffered past the limit); JSON nested
    # deeper than max_json_depth objects/arrays is refused with 400 before it is parsed.
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    max_json_depth: int = Field(default=16, ge=2, le=256)

    # Access (router/access.py, docs/security.md). API keys as JSON in
    # SUPPORT_ROUTER_API_KEYS: [{"name", "sha256", "roles"}], digests only, never keys.
    # None configured: every endpoint is open and `serve` binds loopback only.
    api_keys: list[ApiKey] = Field(default_factory=list)
    # Token bucket per key (per client address without keys); 0 turns it off. Unset: 50/s
    # with keys, off without keys (loopback: tests, benchmarks, one developer). Per worker
    # process unless redis_url is set: then one bucket per caller for every worker and
    # host (router/gateway/middleware/shared_rate_limit.py), e.g. redis://127.0.0.1:6379/0.
    rate_limit_per_s: float | None = Field(default=None, ge=0)
    rate_limit_burst: int = Field(default=100, ge=1)
    redis_url: str | None = None
    # Every key this gateway writes in Redis starts with this: gateways of different
    # deployments (or test runs) can share one Redis without sharing buckets.
    redis_prefix: str = Field(default="support-router:", pattern=r"^[A-Za-z0-9:._-]{1,64}$")
    # Shadow scoring (router/routing/shadows.py, docs/operations.md). With redis_url set,
    # the gateway only appends each sampled request to the stream `<redis_prefix>shadow`
    # (trimmed to about shadow_stream_maxlen entries) and `support-router shadow-worker`
    # processes score it; without Redis one thread per gateway process does. The sample
    # is decided from the request id, so the same request is always in or out.
    shadow_sample_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    shadow_stream_maxlen: int = Field(default=100_000, ge=100)
    # Entries a worker read but did not acknowledge for this long (it died, or the live
    # row was not visible yet) are claimed by another worker; after this many deliveries
    # an entry is given up on (logged and counted).
    shadow_claim_idle_s: float = Field(default=30.0, ge=0.1)
    shadow_max_deliveries: int = Field(default=20, ge=1)
    # On SIGTERM, requests in flight get this long to finish before they are cancelled.
    shutdown_grace_s: float = Field(default=30.0, gt=0)
    # How often each worker reads the active policy pointer in the database (one row);
    # a publish or rollback reaches every worker and host within this plus one read.
    policy_poll_s: float = Field(default=1.0, ge=0.05, le=300.0)
    # The drift gauges in /metrics (router/app/drift.py): the active policy's model
    # decisions of the last drift_window_s seconds (the newest drift_max_rows of them),
    # computed when /metrics is scraped and at most once every drift_refresh_s.
    drift_window_s: float = Field(default=3600.0, ge=60.0)
    drift_refresh_s: float = Field(default=30.0, ge=0.0)
    drift_max_rows: int = Field(default=5000, ge=100)
    # The console's labelling queue (router/app/labelling.py): the share of items, chosen
    # by a hash of the id, that two labellers label, so their agreement can be measured.
    label_overlap: float = Field(default=0.25, ge=0.0, le=1.0)

    # What a connection may cost before the app sees a request (router/gateway/server.py).
    # The server (granian) holds at most max_request_head_bytes of request line and
    # headers per connection (more: 431, closed) and never more than 100 header fields;
    # the app then refuses a longer request target (414) or more header fields (431).
    max_request_head_bytes: int = Field(default=16 * 1024, ge=8192, le=1024 * 1024)
    max_request_line_bytes: int = Field(default=8 * 1024, ge=256)
    max_header_count: int = Field(default=64, ge=8, le=100)
    # A request's line and headers must arrive within header_timeout_s of the connection
    # opening or of the previous response: the same timer closes idle keep-alive
    # connections and slowloris heads. The body then has body_timeout_s (408, closed).
    header_timeout_s: float = Field(default=10.0, ge=0.001, le=60.0)
    body_timeout_s: float = Field(default=15.0, gt=0)
    # Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (IPs or CIDR
    # networks, JSON list). None by default: the caller is the socket peer, whatever a
    # request's headers claim (the keyless rate limit is per caller address).
    trusted_proxies: list[str] = Field(default_factory=list)

    # The `other` route's fallback: `provider:model` for LangChain's `init_chat_model`
    # (the agent, checkpointed in var_dir); unset → the embedded FAQ responder.
    fallback_model: str | None = None
    fallback_max_tokens: int = Field(default=512, ge=16, le=8192)

    # Identity (handlers/identity.py, handlers/services/verification.py): an e-mail only
    # claimed in a message is verified with a one-time code, sent to the address on file,
    # before any write; a code expires after this long and a case locks after this many
    # wrong ones. A `customer` the calling system sends is verified by definition.
    verification_code_ttl_s: float = Field(default=600.0, ge=60, le=3600)
    verification_max_attempts: int = Field(default=5, ge=1, le=10)

    # An online experiment (JSON in SUPPORT_ROUTER_EXPERIMENT; see router/routing/experiments.py):
    # {"name", "salt", "variants": [{name, backend, model, policy, weight}], "shadows": [...],
    #  "planned_requests"}. A seed only: adopted by a database where no experiment was ever
    # started (router/app/experiment_sync.py); the database's experiments win otherwise.
    experiment: ExperimentConfig | None = None

    # The web console (router/gateway/console/): how long a sign-in lasts, in seconds,
    # before the key must be typed again. Sessions live in the database, so every worker
    # and host honours one sign-out.
    console_session_ttl_s: float = Field(default=8 * 3600.0, ge=60.0, le=30 * 86400.0)

    # Logs (router/telemetry/logs.py): one JSON object per line on stderr. E-mail addresses and
    # order/account ids are masked in every line unless the retention policy allows
    # customer data in logs (log_customer_data=true).
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_customer_data: bool = False

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        return resolve_path(value.expanduser(), Path.cwd())

    @model_validator(mode="after")
    def _resolve_paths(self) -> Settings:
        """Relative paths against `data_dir`; unset policy files inside `model_dir`."""
        given = set(self.model_fields_set)
        for name in ("var_dir", "model_dir", "routes_data", "steering_data", "store_fixture"):
            setattr(self, name, resolve_path(getattr(self, name).expanduser(), self.data_dir))
        for name, file_name in POLICY_FILES.items():
            if name in given:
                setattr(self, name, resolve_path(getattr(self, name).expanduser(), self.data_dir))
            else:
                setattr(self, name, self.model_dir / file_name)
        return self

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.var_dir / 'support-router.storage.db'}"

    @property
    def local_model_path(self) -> Path:
        return self.model_dir / "local-route-model.json"

    @property
    def e5_model_path(self) -> Path:
        return self.model_dir / "e5-route-model.json"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def keep_caches_in_var_dir(settings: Settings) -> None:
    """Point numba's on-disk cache of compiled kernels at `<var_dir>/numba-cache`.

    Kernels compiled with `cache=True` otherwise write their cache next to their source
    file, inside the installed package. An operator's own `NUMBA_CACHE_DIR` wins. numba
    chooses the folder when a kernel's module is imported, so a process calls this first
    (the console script does: `router.cli.main.main`).
    """
    os.environ.setdefault("NUMBA_CACHE_DIR", str(settings.var_dir / "numba-cache"))

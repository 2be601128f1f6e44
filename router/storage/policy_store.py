"""Published policy versions, kept in a folder next to the active policy file.

    models/policy.json               the active policy: what the gateway loads at start
    models/policy.versions/
        <version>.json               every version ever published, never rewritten
        history.jsonl                append-only: adopt | publish | rollback events

Publishing writes the version file, then atomically replaces the active file (readers
see the old policy or the new one, never half of either), then records the event.
Rollback re-activates the version that was active before the current one; the stack of
active versions is replayed from the history (adopt/publish push, rollback pops). A
policy that was already active before the store existed (the one `train` writes) is
adopted into the store on first use, so the first rollback can return to it.

A policy binds a model: `ensure_policy_fits` refuses one certified for another backend,
artifact or question (409 `policy_model_mismatch`), whether published or rolled back to.

Every policy read here, from the active file or a version, is validated by its contract
(`router.contracts.Policy`): a file that fails raises `InvalidPolicy` naming the field.
An active file that fails does not block the way out: publish and rollback replace it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from router.contracts import Policy, PolicyModel
from router.errors import ArtifactError, Conflict, InvalidPolicy
from router.settings import Settings

logger = logging.getLogger(__name__)


def describe_policy_errors(exc: ValidationError) -> str:
    """The first thing wrong with a policy, named by its field (`calibrator.params`, …)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the policy"
    more = exc.error_count() - 1
    also = f" (and {more} more)" if more else ""
    return f"field '{where}': {first['msg']}{also}"


def parse_policy(data: str | bytes) -> Policy:
    """A policy from its JSON, validated by its contract.

    Raises
    ------
    InvalidPolicy
        naming the first field at fault.
    """
    try:
        return Policy.model_validate_json(data)
    except ValidationError as exc:
        raise InvalidPolicy(f"not a valid policy: {describe_policy_errors(exc)}") from None


def load_policy(path: Path) -> Policy:
    """The policy in a file, validated as one published through the API would be.

    Raises
    ------
    ArtifactError
        no file at `path`.
    InvalidPolicy
        the file is not a valid policy; the message names the path and the field.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ArtifactError(f"no policy at {path}; run `support-router train`") from exc
    try:
        return parse_policy(data)
    except InvalidPolicy as exc:
        raise InvalidPolicy(f"policy {path} is {exc.message}") from None


def save_policy(policy: Policy, path: Path) -> None:
    """Write atomically so a gateway reloading the file never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(policy.model_dump(mode="json"), indent=2, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(payload + "\n")
    os.replace(tmp, path)


def serving_policy_paths(settings: Settings) -> list[Path]:
    """The policy files a gateway with these settings loads at start."""
    paths = [settings.policy_path]
    if settings.backend == "e5":
        paths.append(settings.e5_policy_path)
    elif settings.backend == "typesafe":
        paths.append(settings.typesafe_policy_path)
    return paths


def load_serving_policy(path: Path) -> Policy:
    """A policy the gateway is to serve with; one that does not load stops the start
    with what to do about it, rather than a gateway answering 500 on every request.

    Raises
    ------
    InvalidPolicy
        the file is not a valid policy (naming the field), and how to replace it.
    """
    try:
        return load_policy(path)
    except InvalidPolicy as exc:
        raise InvalidPolicy(
            f"{exc.message}. The gateway does not start with it: publish a valid policy "
            f"(`support-router policy publish FILE --policy-path {path}`) or return to the "
            f"previous version (`support-router policy rollback --policy-path {path}`)"
        ) from None


def check_serving_policies(settings: Settings) -> None:
    """Load every policy file the gateway will serve with that exists (a missing one is
    written by training at start), so a bad one is refused before any worker starts."""
    for path in serving_policy_paths(settings):
        if path.exists():
            load_serving_policy(path)


@dataclass(frozen=True)
class PolicySwitch:
    """The result of a publish or rollback."""

    action: str
    policy: Policy
    previous_version: str | None


def active_policy_path(settings: Settings) -> Path:
    """The policy file of the configured primary backend."""
    return settings.typesafe_policy_path if settings.backend == "typesafe" else settings.policy_path


def ensure_policy_fits(policy: Policy, running: PolicyModel) -> None:
    """Refuse a policy certified for another model than the running one.

    Raises
    ------
    Conflict
        code `policy_model_mismatch`, naming both models.
    """
    mine, theirs = policy.model, running
    if (mine.backend, mine.artifact_sha, mine.name) != (theirs.backend, theirs.artifact_sha,
                                                        theirs.name):
        raise Conflict(
            f"policy {policy.version} is for {mine.backend} model {mine.name} "
            f"(artifact {str(mine.artifact_sha)[:12]}) but the gateway runs {theirs.backend} model "
            f"{theirs.name} (artifact {str(theirs.artifact_sha)[:12]})",
            code="policy_model_mismatch",
        )


def _file_name(version: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", version) + ".json"


@dataclass(frozen=True)
class _ActiveFile:
    adopt: Policy | None
    """The active policy, when the store has not seen it yet."""
    loads: bool
    """Whether the active file is a valid policy (true when there is none)."""


class PolicyStore:
    def __init__(self, active_path: Path) -> None:
        self.active_path = active_path
        self.versions_dir = active_path.with_name(f"{active_path.stem}.versions")
        self.history_path = self.versions_dir / "history.jsonl"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        with (self.versions_dir / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def history(self) -> list[dict[str, Any]]:
        if not self.history_path.exists():
            return []
        with self.history_path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def stack(self) -> list[str]:
        """Versions that were active, oldest first; the last one is active now."""
        stack: list[str] = []
        for event in self.history():
            if event["action"] in ("adopt", "publish"):
                stack.append(event["version"])
            elif event["action"] == "rollback" and stack:
                stack.pop()
        return stack

    def load_version(self, version: str) -> Policy:
        return load_policy(self.versions_dir / _file_name(version))

    def publish(self, policy: Policy, *, accept: Callable[[Policy], None] | None = None,
                now: datetime | None = None) -> PolicySwitch:
        """Store `policy` as a version and make it the active one.

        Raises
        ------
        Conflict
            `policy_version_exists` when the version was published with other content,
            or whatever `accept` raises (nothing is written then, not even the adoption
            of the active file).
        """
        with self._locked():
            active = self._active()
            stack = self._stack_with(active.adopt)
            previous = stack[-1] if stack else None
            if accept is not None:
                accept(policy)
            self._refuse_rewrite(policy, also=active.adopt)
            self._adopt(active.adopt, now)
            self._write_version(policy)
            if previous == policy.version:
                if not active.loads:  # the version it names is this one: restore its file
                    save_policy(policy, self.active_path)
                return PolicySwitch("publish", policy, previous)
            save_policy(policy, self.active_path)
            self._record("publish", policy.version, previous, now)
            return PolicySwitch("publish", policy, previous)

    def rollback(self, *, accept: Callable[[Policy], None] | None = None,
                 now: datetime | None = None) -> PolicySwitch:
        """Re-activate the version that was active before the current one.

        Raises
        ------
        Conflict
            `no_previous_policy` when there is nothing to return to, or whatever
            `accept` raises for the previous version (nothing changes then).
        """
        with self._locked():
            active = self._active()
            stack = self._stack_with(active.adopt)
            if len(stack) < 2:
                raise Conflict("no previous policy version to roll back to",
                               code="no_previous_policy")
            policy = self.load_version(stack[-2])
            if accept is not None:
                accept(policy)
            self._adopt(active.adopt, now)
            save_policy(policy, self.active_path)
            self._record("rollback", policy.version, stack[-1], now)
            return PolicySwitch("rollback", policy, stack[-1])

    def _active(self) -> _ActiveFile:
        """The active file as the store sees it; nothing is written.

        An active file the store has not seen (e.g. from `train`) is to be adopted as a
        version. One that is not a valid policy (edited by hand, say) is left out of the
        store, so that publishing or rolling back can replace it.
        """
        if not self.active_path.exists():
            return _ActiveFile(adopt=None, loads=True)
        try:
            policy = load_policy(self.active_path)
        except InvalidPolicy as exc:
            logger.warning("the active policy file cannot be loaded, so it is not kept as a "
                           "version: %s", exc.message)
            return _ActiveFile(adopt=None, loads=False)
        stack = self.stack()
        unseen = not stack or stack[-1] != policy.version
        return _ActiveFile(adopt=policy if unseen else None, loads=True)

    def _stack_with(self, adopt: Policy | None) -> list[str]:
        """The stack of active versions once `adopt` (if any) is adopted."""
        stack = self.stack()
        return [*stack, adopt.version] if adopt is not None else stack

    def _adopt(self, adopt: Policy | None, now: datetime | None) -> None:
        if adopt is None:
            return
        stack = self.stack()
        self._write_version(adopt)
        self._record("adopt", adopt.version, stack[-1] if stack else None, now)

    def _refuse_rewrite(self, policy: Policy, *, also: Policy | None = None) -> None:
        """Raise `policy_version_exists` if `policy` would rewrite a stored version (or
        `also`, about to be stored) with other content."""
        stored = [also] if also is not None and also.version == policy.version else []
        path = self.versions_dir / _file_name(policy.version)
        if path.exists():
            stored.append(load_policy(path))
        if any(s.model_dump(mode="json") != policy.model_dump(mode="json") for s in stored):
            raise Conflict(f"policy version {policy.version} was already published with "
                           "different content; give the new policy a new version",
                           code="policy_version_exists")

    def _write_version(self, policy: Policy) -> None:
        self._refuse_rewrite(policy)
        path = self.versions_dir / _file_name(policy.version)
        if not path.exists():
            save_policy(policy, path)

    def _record(self, action: str, version: str, previous: str | None,
                now: datetime | None) -> None:
        event = {"at": (now or datetime.now(UTC)).isoformat(), "action": action,
                 "version": version, "previous": previous}
        with self.history_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")

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
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.contracts import Policy, PolicyModel
from router.errors import ArtifactError, Conflict
from router.settings import Settings


def load_policy(path: Path) -> Policy:
    try:
        return Policy.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ArtifactError(f"no policy at {path}; run `support-router train`") from exc
    except ValueError as exc:
        raise ArtifactError(f"policy {path} is not a valid policy artifact: {exc}") from exc


def save_policy(policy: Policy, path: Path) -> None:
    """Write atomically so a gateway reloading the file never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(policy.model_dump(mode="json"), indent=2, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(payload + "\n")
    os.replace(tmp, path)


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
            or whatever `accept` raises (nothing is written then).
        """
        with self._locked():
            stack = self._adopt_active(now)
            previous = stack[-1] if stack else None
            if accept is not None:
                accept(policy)
            self._write_version(policy)
            if previous == policy.version:
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
            stack = self._adopt_active(now)
            if len(stack) < 2:
                raise Conflict("no previous policy version to roll back to",
                               code="no_previous_policy")
            policy = self.load_version(stack[-2])
            if accept is not None:
                accept(policy)
            save_policy(policy, self.active_path)
            self._record("rollback", policy.version, stack[-1], now)
            return PolicySwitch("rollback", policy, stack[-1])

    def _adopt_active(self, now: datetime | None) -> list[str]:
        """Bring an active file the store has not seen (e.g. from `train`) into the store."""
        stack = self.stack()
        if not self.active_path.exists():
            return stack
        active = load_policy(self.active_path)
        if not stack or stack[-1] != active.version:
            self._write_version(active)
            self._record("adopt", active.version, stack[-1] if stack else None, now)
            stack.append(active.version)
        return stack

    def _write_version(self, policy: Policy) -> None:
        path = self.versions_dir / _file_name(policy.version)
        if path.exists():
            stored = load_policy(path)
            if stored.model_dump(mode="json") != policy.model_dump(mode="json"):
                raise Conflict(f"policy version {policy.version} was already published with "
                               "different content; give the new policy a new version",
                               code="policy_version_exists")
            return
        save_policy(policy, path)

    def _record(self, action: str, version: str, previous: str | None,
                now: datetime | None) -> None:
        event = {"at": (now or datetime.now(UTC)).isoformat(), "action": action,
                 "version": version, "previous": previous}
        with self.history_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")

"""Policy files and what every policy must pass: its contract, and the running model.

The versions, the active pointer and the history live in the shared database
(`router.storage.policy_db`), which is authoritative. The policy file of the primary
backend (`active_policy_path`) is what a gateway loads first at start (and adopts into a
database that has no active policy yet), what `train` and `calibrate` write and what the
offline tools read; the gateway and the CLI rewrite it to follow the database.

A policy binds a model: `ensure_policy_fits` refuses one certified for another backend,
artifact or question (409 `policy_model_mismatch`), whether published or rolled back to.

Every policy read here is validated by its contract (`router.contracts.Policy`): a file
that fails raises `InvalidPolicy` naming the field.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from router.contracts import Policy, PolicyModel
from router.errors import ArtifactError, Conflict, InvalidPolicy
from router.settings import Settings


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
    # A policy that is not a cascade is written without the `stages` field.
    unset = {"stages"} if policy.stages is None else None
    payload = json.dumps(policy.model_dump(mode="json", exclude=unset), indent=2,
                         ensure_ascii=False)
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
    elif settings.backend == "cascade":
        paths += [settings.e5_policy_path, settings.cascade_policy_path]
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
    """The policy file of the configured primary backend (the one it loads at start)."""
    if settings.backend == "typesafe":
        return settings.typesafe_policy_path
    if settings.backend == "cascade":
        return settings.cascade_policy_path
    return settings.e5_policy_path if settings.backend == "e5" else settings.policy_path


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

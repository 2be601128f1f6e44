"""Policy files: written atomically, validated by their contract when read, and bound to
the model they were certified for. (Versions and history: test_policy_db.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.contracts import Policy, PolicyModel
from router.errors import Conflict, InvalidPolicy
from router.settings import Settings
from router.storage.policy_store import (
    active_policy_path,
    ensure_policy_fits,
    load_policy,
    save_policy,
)

MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="abc")


def _policy(version: str, threshold: float = 0.5, model: PolicyModel = MODEL) -> Policy:
    return Policy(version=version, model=model, threshold=threshold)


def _break(path: Path, version: str) -> None:
    """A hand edit that routes nowhere: a temperature calibrator without a temperature."""
    broken = _policy(version).model_dump(mode="json")
    broken["calibrator"] = {"kind": "temperature", "params": {}}
    path.write_text(json.dumps(broken))


def test_a_saved_policy_loads_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "models" / "policy.json"
    policy = _policy("v1", 0.7)
    save_policy(policy, path)
    assert load_policy(path) == policy
    assert [p.name for p in path.parent.iterdir()] == ["policy.json"]  # no temporary left


def test_a_broken_policy_file_is_named_by_its_field(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    _break(path, "trained")
    with pytest.raises(InvalidPolicy, match=r"policy\.json is not a valid policy: field "
                       r"'calibrator\.params'.*temperature: Field required") as info:
        load_policy(path)
    assert info.value.code == "invalid_policy"


def test_a_policy_for_another_model_does_not_fit() -> None:
    other = PolicyModel(backend="local", name="local-tfidf-lr@zzz", artifact_sha="zzz")
    ensure_policy_fits(_policy("v1"), MODEL)
    with pytest.raises(Conflict, match="gateway runs local model local-tfidf-lr@abc") as info:
        ensure_policy_fits(_policy("v9", model=other), MODEL)
    assert info.value.code == "policy_model_mismatch"


def test_the_active_file_is_the_primary_backends(tmp_path: Path) -> None:
    settings = Settings(model_dir=tmp_path)
    assert active_policy_path(settings) == settings.policy_path
    assert active_policy_path(settings.model_copy(update={"backend": "e5"})) == \
        settings.e5_policy_path
    assert active_policy_path(settings.model_copy(update={"backend": "typesafe"})) == \
        settings.typesafe_policy_path

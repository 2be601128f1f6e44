from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.contracts import Policy, PolicyModel
from router.errors import Conflict, InvalidPolicy
from router.storage.policy_store import PolicyStore, ensure_policy_fits, load_policy, save_policy

MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="abc")


def _policy(version: str, threshold: float = 0.5, model: PolicyModel = MODEL) -> Policy:
    return Policy(version=version, model=model, threshold=threshold)


@pytest.fixture
def store(tmp_path: Path) -> PolicyStore:
    active = tmp_path / "models" / "policy.json"
    save_policy(_policy("trained"), active)  # what `train` leaves behind
    return PolicyStore(active)


def test_publish_adopts_the_trained_policy_and_switches(store: PolicyStore) -> None:
    switch = store.publish(_policy("v1", 0.7))
    assert (switch.previous_version, load_policy(store.active_path).version) == ("trained", "v1")
    assert store.stack() == ["trained", "v1"]
    assert (store.versions_dir / "v1.json").exists()
    assert (store.versions_dir / "trained.json").exists()
    assert [e["action"] for e in store.history()] == ["adopt", "publish"]


def test_rollback_returns_to_the_previous_version(store: PolicyStore) -> None:
    v2 = _policy("v2")
    store.publish(_policy("v1"))
    store.publish(v2)
    assert store.rollback().policy.version == "v1"
    assert load_policy(store.active_path).version == "v1"
    assert store.rollback().policy.version == "trained"
    with pytest.raises(Conflict, match="no previous policy version") as info:
        store.rollback()
    assert info.value.code == "no_previous_policy"
    store.publish(v2)  # re-publishing an old version (same content) is allowed
    assert store.stack() == ["trained", "v2"]


def test_a_version_is_never_rewritten(store: PolicyStore) -> None:
    store.publish(_policy("v1", 0.7))
    with pytest.raises(Conflict, match="already published with different content") as info:
        store.publish(_policy("v1", 0.8))
    assert info.value.code == "policy_version_exists"
    assert load_policy(store.active_path).threshold == 0.7


def test_a_rejected_policy_changes_nothing(store: PolicyStore) -> None:
    other = PolicyModel(backend="local", name="local-tfidf-lr@zzz", artifact_sha="zzz")

    def accept(policy: Policy) -> None:
        ensure_policy_fits(policy, MODEL)

    with pytest.raises(Conflict, match="gateway runs local model local-tfidf-lr@abc") as info:
        store.publish(_policy("v9", model=other), accept=accept)
    assert info.value.code == "policy_model_mismatch"
    assert load_policy(store.active_path).version == "trained"
    assert not (store.versions_dir / "v9.json").exists()


def test_a_policy_rewritten_outside_the_store_is_adopted(store: PolicyStore) -> None:
    store.publish(_policy("v1"))
    save_policy(_policy("retrained"), store.active_path)  # `train` ran again
    assert store.rollback().policy.version == "v1"


def _break(path: Path, version: str) -> None:
    """A hand edit that routes nowhere: a temperature calibrator without a temperature."""
    broken = _policy(version).model_dump(mode="json")
    broken["calibrator"] = {"kind": "temperature", "params": {}}
    path.write_text(json.dumps(broken))


def test_a_refused_publish_does_not_even_adopt_the_active_file(store: PolicyStore) -> None:
    def refuse(policy: Policy) -> None:
        raise Conflict("no", code="refused")

    with pytest.raises(Conflict, match="no"):
        store.publish(_policy("v1"), accept=refuse)
    assert store.history() == []
    assert not (store.versions_dir / "trained.json").exists()
    assert load_policy(store.active_path).version == "trained"


def test_a_broken_active_file_is_named_by_its_field(store: PolicyStore) -> None:
    _break(store.active_path, "trained")
    with pytest.raises(InvalidPolicy, match=r"policy\.json is not a valid policy: field "
                       r"'calibrator\.params'.*temperature: Field required") as info:
        load_policy(store.active_path)
    assert info.value.code == "invalid_policy"


def test_publish_replaces_a_broken_active_file(store: PolicyStore) -> None:
    store.publish(_policy("v1"))
    _break(store.active_path, "hand-edit")
    v2 = _policy("v2", 0.8)
    switch = store.publish(v2)
    assert (switch.previous_version, load_policy(store.active_path)) == ("v1", v2)
    assert store.stack() == ["trained", "v1", "v2"]
    assert not (store.versions_dir / "hand-edit.json").exists()


def test_publishing_the_version_a_broken_file_claims_restores_it(store: PolicyStore) -> None:
    v1 = _policy("v1", 0.7)
    store.publish(v1)
    history = store.history()
    _break(store.active_path, "v1")
    store.publish(v1)
    assert load_policy(store.active_path) == v1
    assert store.history() == history


def test_rollback_replaces_a_broken_active_file(store: PolicyStore) -> None:
    store.publish(_policy("v1"))
    store.publish(_policy("v2"))
    _break(store.active_path, "v2")
    assert store.rollback().policy.version == "v1"
    assert load_policy(store.active_path).version == "v1"

from __future__ import annotations

from pathlib import Path

import pytest

from router.contracts import Policy, PolicyModel
from router.errors import Conflict
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

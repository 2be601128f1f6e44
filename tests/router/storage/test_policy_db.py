"""The shared policy store: versions, the active pointer and the history in the database,
on SQLite and PostgreSQL; publish and rollback one transaction each."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, func, select, update

from router.contracts import Policy, PolicyModel
from router.errors import Conflict, InvalidPolicy
from router.storage.policy_db import (
    NO_ACTIVE_VERSION,
    PolicyDB,
    policy_active,
    policy_history,
    policy_versions,
)
from router.storage.policy_store import ensure_policy_fits

MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="abc")
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


def _policy(version: str, threshold: float = 0.5, model: PolicyModel = MODEL) -> Policy:
    return Policy(version=version, model=model, threshold=threshold, created_at=CREATED)


@pytest.fixture
def db(engine: Engine) -> PolicyDB:
    store = PolicyDB(engine)
    assert store.adopt(_policy("trained"))  # what the gateway does with `train`'s file
    return store


def _rows(engine: Engine) -> tuple[list, list, list]:
    with engine.connect() as conn:
        return (list(conn.execute(select(policy_versions).order_by(policy_versions.c.version))),
                list(conn.execute(select(policy_active))),
                list(conn.execute(select(policy_history).order_by(policy_history.c.id))))


def test_adopt_happens_once_and_publish_switches(db: PolicyDB) -> None:
    assert not db.adopt(_policy("other"))  # the database already has an active policy
    assert db.active_version() == "trained"
    switch = db.publish(_policy("v1", 0.7))
    assert (switch.action, switch.previous_version) == ("publish", "trained")
    assert db.active() == _policy("v1", 0.7)
    assert db.stack() == ["trained", "v1"]
    assert [e["action"] for e in db.history()] == ["adopt", "publish"]
    assert db.history()[1]["previous"] == "trained"


def test_rollback_returns_to_the_previous_version(db: PolicyDB) -> None:
    v2 = _policy("v2")
    db.publish(_policy("v1"))
    db.publish(v2)
    assert db.rollback().policy.version == "v1"
    assert db.active_version() == "v1"
    switch = db.rollback()
    assert (switch.policy.version, switch.previous_version) == ("trained", "v1")
    with pytest.raises(Conflict, match="no previous policy version") as info:
        db.rollback()
    assert info.value.code == "no_previous_policy"
    db.publish(v2)  # re-publishing an old version (same content) is allowed
    assert db.stack() == ["trained", "v2"]


def test_publishing_the_active_version_again_records_nothing(db: PolicyDB) -> None:
    db.publish(_policy("v1"))
    history = db.history()
    switch = db.publish(_policy("v1"))
    assert switch.previous_version == "v1"
    assert db.history() == history


def test_a_version_is_never_rewritten(engine: Engine, db: PolicyDB) -> None:
    db.publish(_policy("v1", 0.7))
    before = _rows(engine)
    with pytest.raises(Conflict, match="already published with different content") as info:
        db.publish(_policy("v1", 0.8))
    assert info.value.code == "policy_version_exists"
    assert _rows(engine) == before
    assert db.active() == _policy("v1", 0.7)


def test_a_refused_publish_writes_nothing(engine: Engine, db: PolicyDB) -> None:
    other = PolicyModel(backend="local", name="local-tfidf-lr@zzz", artifact_sha="zzz")
    before = _rows(engine)
    with pytest.raises(Conflict, match="gateway runs local model local-tfidf-lr@abc") as info:
        db.publish(_policy("v9", model=other),
                   accept=lambda policy: ensure_policy_fits(policy, MODEL))
    assert info.value.code == "policy_model_mismatch"
    assert _rows(engine) == before


def test_a_refused_first_publish_does_not_even_adopt(engine: Engine) -> None:
    fresh = PolicyDB(engine, slot="typesafe")

    def refuse(policy: Policy) -> None:
        raise Conflict("no", code="refused")

    with pytest.raises(Conflict, match="no"):
        fresh.publish(_policy("v1"), accept=refuse, adopt=_policy("served"))
    assert _rows(engine) == ([], [], [])
    fresh.publish(_policy("v1"), adopt=_policy("served"))
    assert fresh.stack() == ["served", "v1"]
    assert fresh.rollback().policy.version == "served"


def test_a_refused_rollback_changes_nothing(engine: Engine, db: PolicyDB) -> None:
    db.publish(_policy("v1"))
    before = _rows(engine)
    with pytest.raises(Conflict, match="no"):
        db.rollback(accept=lambda policy: (_ for _ in ()).throw(Conflict("no")))
    assert _rows(engine) == before


def test_a_stored_version_broken_by_hand_is_named_by_its_field(engine: Engine,
                                                               db: PolicyDB) -> None:
    db.publish(_policy("v1"))
    broken = _policy("trained").model_dump(mode="json")
    broken["calibrator"] = {"kind": "temperature", "params": {}}
    with engine.begin() as conn:
        conn.execute(update(policy_versions).where(policy_versions.c.version == "trained")
                     .values(body=json.dumps(broken)))
    before = _rows(engine)
    with pytest.raises(InvalidPolicy, match=r"stored policy version trained is not a valid "
                       r"policy: field 'calibrator\.params'") as info:
        db.rollback()
    assert info.value.code == "invalid_policy"
    assert _rows(engine) == before
    db.publish(_policy("v2"))  # a broken older version does not block the way forward
    assert db.active_version() == "v2"


def test_slots_are_apart(engine: Engine, db: PolicyDB) -> None:
    typesafe = PolicyDB(engine, slot="typesafe")
    assert typesafe.active_version() is None
    typesafe.adopt(_policy("ts-1"))
    db.publish(_policy("v1"))
    assert (typesafe.active_version(), db.active_version()) == ("ts-1", "v1")
    assert typesafe.stack() == ["ts-1"]


def test_concurrent_publishes_each_see_the_other(engine: Engine, db: PolicyDB) -> None:
    """Eight publishes at once: each takes the slot's lock, so the stack is the history
    of eight switches, every `previous` the version before it, none lost."""
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def publish(i: int) -> None:
        start.wait()
        try:
            PolicyDB(engine).publish(_policy(f"c{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = db.history()
    assert len(history) == 9
    for before, after in zip(history, history[1:], strict=False):
        assert after["previous"] == before["version"]
    assert db.active_version() == history[-1]["version"]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(policy_active)).scalar() == 1


def test_each_change_records_who_made_it(db: PolicyDB) -> None:
    db.publish(_policy("v1"), by="alice")
    db.rollback(by="bob")
    assert [(e["action"], e["version"], e["by"]) for e in db.history()] == [
        ("adopt", "trained", None), ("publish", "v1", "alice"), ("rollback", "trained", "bob")]


@pytest.mark.parametrize("change", ["publish", "rollback"])
def test_a_change_expecting_another_active_version_writes_nothing(
        engine: Engine, db: PolicyDB, change: str) -> None:
    db.publish(_policy("v1"), by="alice")
    db.publish(_policy("v2"), by="carol")  # published while bob looked at v1
    before = _rows(engine)
    with pytest.raises(Conflict, match="active policy is v2, not v1") as caught:
        if change == "publish":
            db.publish(_policy("v3"), by="bob", expect_active="v1")
        else:
            db.rollback(by="bob", expect_active="v1")
    assert caught.value.code == "policy_changed"
    assert _rows(engine) == before
    db.rollback(by="bob", expect_active="v2")
    assert db.active_version() == "v1"


def test_a_change_expecting_no_active_version_writes_nothing_once_one_is(
        engine: Engine) -> None:
    """The console confirms a change on an empty slot with `NO_ACTIVE_VERSION`."""
    empty = PolicyDB(engine, slot="empty")
    empty.publish(_policy("v1"), by="carol")  # published while bob looked at the empty slot
    before = _rows(engine)
    with pytest.raises(Conflict, match="active policy is v1, not none") as caught:
        empty.publish(_policy("v2"), by="bob", expect_active=NO_ACTIVE_VERSION)
    assert caught.value.code == "policy_changed"
    assert _rows(engine) == before
    other = PolicyDB(engine, slot="other")
    other.publish(_policy("v2"), by="bob", expect_active=NO_ACTIVE_VERSION)
    assert other.active_version() == "v2"


def test_overview_lists_the_slots_versions_with_when_they_were_stored(engine: Engine,
                                                                      db: PolicyDB) -> None:
    db.publish(_policy("v1", 0.7), now=datetime(2030, 1, 2, tzinfo=UTC))
    db.rollback()
    PolicyDB(engine, slot="e5").publish(_policy("e5-only"))
    versions, history = db.overview()
    assert [(v.version, v.policy.threshold if v.policy else None) for v in versions] == [
        ("trained", 0.5), ("v1", 0.7)]
    assert versions[1].stored_at == datetime(2030, 1, 2, tzinfo=UTC)
    assert history == db.history()
    with engine.begin() as conn:  # a hand edit breaks v1
        conn.execute(update(policy_versions).where(policy_versions.c.version == "v1")
                     .values(body=json.dumps({"version": "v1"})))
    versions, _ = db.overview()
    assert versions[1].policy is None and versions[1].problem is not None
    assert "field 'model'" in versions[1].problem

"""Policy versions, the active pointer and the history, in the shared database.

Every gateway process, on every host, serves the version named by one row of
`policy_active`; each one reads that row every `policy_poll_s` and swaps the policy in
when it changed (router/app/policy_sync.py), so a publish or rollback reaches them all
within the poll interval plus one read. The database is authoritative: the policy file
(`active_policy_path`) is adopted into it when the database has no active policy yet, and
otherwise only rewritten to follow it, for the offline tools that read the file.

    policy_versions   every version ever published or adopted; its JSON never rewritten
    policy_active     one row a slot (the primary backend: local, e5, typesafe)
    policy_history    adopt | publish | rollback events, oldest first, each with who made
                      it (`changed_by`: the API key's name, `cli:<user>`, or NULL for an
                      adoption and for events recorded before the column existed)

Publish and rollback are one transaction each, under a lock per slot (PostgreSQL: a
transaction-scoped advisory lock; SQLite: the write lock `BEGIN IMMEDIATE` takes), so two
of them at once on two hosts cannot both read the same stack. A policy the `accept`
check refuses writes nothing, not even the adoption of the policy served until then.
Rollback re-activates the version that was active before the current one: the stack of
active versions is replayed from the history (adopt/publish push, rollback pops).
`expect_active` makes either one conditional on the version active under the lock, so a
person who confirmed "replace X" does not replace Y that someone published meanwhile
(409 `policy_changed`, nothing written).

Every policy read from here is validated by its contract (`router.contracts.Policy`): a
stored version that fails raises `InvalidPolicy` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    update,
)

from router.contracts import Policy
from router.errors import Conflict, InvalidPolicy
from router.settings import Settings
from router.storage.db import read_connection
from router.storage.policy_store import PolicySwitch, parse_policy

metadata = MetaData()

policy_versions = Table(
    "policy_versions", metadata,
    Column("version", String(128), primary_key=True),
    Column("body", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

policy_active = Table(
    "policy_active", metadata,
    Column("slot", String(32), primary_key=True),
    Column("version", String(128), ForeignKey("policy_versions.version"), nullable=False),
    Column("changed_at", DateTime(timezone=True), nullable=False),
)

policy_history = Table(
    "policy_history", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("slot", String(32), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("action", String(16), nullable=False),
    Column("version", String(128), nullable=False),
    Column("previous", String(128), nullable=True),
    Column("changed_by", String(128), nullable=True),
    Index("ix_policy_history_slot_id", "slot", "id"),
)

# Transaction-scoped, so it cannot outlive a publish; one key per schema and slot.
_PG_SLOT_LOCK = ("SELECT pg_advisory_xact_lock(hashtextextended("
                 "'support-router:policy:' || coalesce(current_schema(), '') || ':' || %s, 0))")


@dataclass(frozen=True)
class StoredVersion:
    """One stored version: its policy, or why it does not load."""

    version: str
    stored_at: datetime
    policy: Policy | None
    problem: str | None = None


def policy_slot(settings: Settings) -> str:
    """The slot of the configured primary backend's policy."""
    return settings.backend


def _body(policy: Policy) -> dict[str, Any]:
    # A policy without a drift reference (or cascade stages) is stored as it was before
    # the field existed, so re-publishing a version stored then is not taken for a rewrite.
    unset = {name for name in ("reference", "stages") if getattr(policy, name) is None}
    return policy.model_dump(mode="json", exclude=unset or None)


class PolicyDB:
    def __init__(self, engine: Engine, slot: str = "local") -> None:
        self.engine = engine
        self.slot = slot

    # -- reads ---------------------------------------------------------------------------

    def active_version(self) -> str | None:
        """The active version's name: the one-row read every worker polls."""
        with read_connection(self.engine) as conn:
            return self._active(conn)

    def active(self) -> Policy | None:
        """The active policy (None: nothing adopted or published in this slot yet)."""
        version = self.active_version()
        return None if version is None else self.load_version(version)

    def load_version(self, version: str) -> Policy:
        """A stored version, validated by its contract.

        Raises
        ------
        InvalidPolicy
            no such version, or its stored JSON is not a valid policy (naming the field).
        """
        with read_connection(self.engine) as conn:
            return self._load(conn, version)

    def history(self) -> list[dict[str, Any]]:
        """Adopt, publish and rollback events of this slot, oldest first."""
        with read_connection(self.engine) as conn:
            return self._history(conn)

    def overview(self) -> tuple[list[StoredVersion], list[dict[str, Any]]]:
        """Every version this slot's history names with when it was stored (oldest
        first), and the history, in one read. A stored version that does not load is
        listed with what is wrong with it, so a broken one can still be seen and replaced.
        """
        with read_connection(self.engine) as conn:
            history = self._history(conn)
            names = list(dict.fromkeys(e["version"] for e in history))
            stored = {row.version: _aware(row.created_at) for row in conn.execute(
                select(policy_versions.c.version, policy_versions.c.created_at)
                .where(policy_versions.c.version.in_(names)))}
            versions = []
            for name in names:
                if name not in stored:
                    continue
                try:
                    versions.append(StoredVersion(name, stored[name], self._load(conn, name)))
                except InvalidPolicy as exc:
                    versions.append(StoredVersion(name, stored[name], None, exc.message))
        versions.sort(key=lambda v: v.stored_at)
        return versions, history

    def stack(self) -> list[str]:
        """Versions that were active, oldest first; the last one is active now."""
        with read_connection(self.engine) as conn:
            return replay_history(self._history(conn))

    # -- changes (one transaction each) ------------------------------------------------------

    def adopt(self, policy: Policy, *, now: datetime | None = None) -> bool:
        """Make `policy` the active one if the slot has none; whether it did.

        Raises
        ------
        Conflict
            `policy_version_exists` when its version is stored with other content.
        """
        with self.engine.begin() as conn:
            self._lock(conn)
            if self._active(conn) is not None:
                return False
            self._adopt(conn, policy, now)
            return True

    def publish(self, policy: Policy, *, accept: Callable[[Policy], None] | None = None,
                adopt: Policy | None = None, by: str | None = None,
                expect_active: str | None = None, now: datetime | None = None) -> PolicySwitch:
        """Store `policy` as a version and make it the active one, recorded as by `by`.

        `adopt`: the policy served until now, made the first version when the slot has
        none, so that the first rollback can return to it. `expect_active`: publish only
        if this version is the active one (the adopted one counts); `NO_ACTIVE_VERSION`:
        only if none is.

        Raises
        ------
        Conflict
            `policy_version_exists` when the version was stored with other content,
            `policy_changed` when `expect_active` is not active, or whatever `accept`
            raises (nothing is written then, not even the adoption).
        """
        with self.engine.begin() as conn:
            self._lock(conn)
            previous = self._active(conn)
            if previous is None and adopt is not None:
                previous = adopt.version
            else:
                adopt = None
            _expect(expect_active, previous)
            if accept is not None:
                accept(policy)
            self._refuse_rewrite(conn, policy, also=adopt)
            if adopt is not None:
                self._adopt(conn, adopt, now)
            self._store(conn, policy, now)
            if previous == policy.version:
                return PolicySwitch("publish", policy, previous)
            self._point(conn, policy.version, now)
            self._record(conn, "publish", policy.version, previous, now, by=by)
            return PolicySwitch("publish", policy, previous)

    def rollback(self, *, accept: Callable[[Policy], None] | None = None,
                 by: str | None = None, expect_active: str | None = None,
                 now: datetime | None = None) -> PolicySwitch:
        """Re-activate the version that was active before the current one, recorded as
        by `by`; with `expect_active`, only if that version is the active one.

        Raises
        ------
        Conflict
            `no_previous_policy` when there is nothing to return to, `policy_changed`
            when `expect_active` is not active, or whatever `accept` raises for the
            previous version (nothing changes then).
        InvalidPolicy
            the previous version's stored JSON is not a valid policy.
        """
        with self.engine.begin() as conn:
            self._lock(conn)
            stack = replay_history(self._history(conn))
            _expect(expect_active, stack[-1] if stack else None)
            if len(stack) < 2:
                raise Conflict("no previous policy version to roll back to",
                               code="no_previous_policy")
            policy = self._load(conn, stack[-2])
            if accept is not None:
                accept(policy)
            self._point(conn, policy.version, now)
            self._record(conn, "rollback", policy.version, stack[-1], now, by=by)
            return PolicySwitch("rollback", policy, stack[-1])

    # -- inside a transaction ------------------------------------------------------------

    def _lock(self, conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(_PG_SLOT_LOCK, (self.slot,))

    def _active(self, conn: Connection) -> str | None:
        return conn.execute(select(policy_active.c.version)
                            .where(policy_active.c.slot == self.slot)).scalar_one_or_none()

    def _load(self, conn: Connection, version: str) -> Policy:
        body = conn.execute(select(policy_versions.c.body)
                            .where(policy_versions.c.version == version)).scalar_one_or_none()
        if body is None:
            raise InvalidPolicy(f"policy version {version} is not stored in the database")
        try:
            return parse_policy(body)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"stored policy version {version} is {exc.message}") from None

    def _history(self, conn: Connection) -> list[dict[str, Any]]:
        rows = conn.execute(select(policy_history.c.at, policy_history.c.action,
                                   policy_history.c.version, policy_history.c.previous,
                                   policy_history.c.changed_by)
                            .where(policy_history.c.slot == self.slot)
                            .order_by(policy_history.c.id))
        return [{"at": _aware(row.at).isoformat(), "action": row.action,
                 "version": row.version, "previous": row.previous, "by": row.changed_by}
                for row in rows]

    def _refuse_rewrite(self, conn: Connection, policy: Policy, *,
                        also: Policy | None = None) -> bool:
        """Raise `policy_version_exists` if `policy` would rewrite a stored version (or
        `also`, about to be stored) with other content; whether its version is stored."""
        stored = [_body(also)] if also is not None and also.version == policy.version else []
        body = conn.execute(select(policy_versions.c.body)
                            .where(policy_versions.c.version == policy.version)
                            ).scalar_one_or_none()
        if body is not None:
            stored.append(json.loads(body))
        if any(s != _body(policy) for s in stored):
            raise Conflict(f"policy version {policy.version} was already published with "
                           "different content; give the new policy a new version",
                           code="policy_version_exists")
        return body is not None

    def _adopt(self, conn: Connection, policy: Policy, now: datetime | None) -> None:
        self._store(conn, policy, now)
        self._point(conn, policy.version, now)
        self._record(conn, "adopt", policy.version, None, now)

    def _store(self, conn: Connection, policy: Policy, now: datetime | None) -> None:
        if not self._refuse_rewrite(conn, policy):
            conn.execute(insert(policy_versions).values(
                version=policy.version, created_at=now or datetime.now(UTC),
                body=json.dumps(_body(policy), ensure_ascii=False)))

    def _point(self, conn: Connection, version: str, now: datetime | None) -> None:
        at = now or datetime.now(UTC)
        changed = conn.execute(update(policy_active).where(policy_active.c.slot == self.slot)
                               .values(version=version, changed_at=at))
        if changed.rowcount == 0:  # under the slot's lock: nobody inserts it meanwhile
            conn.execute(insert(policy_active).values(slot=self.slot, version=version,
                                                      changed_at=at))

    def _record(self, conn: Connection, action: str, version: str, previous: str | None,
                now: datetime | None, *, by: str | None = None) -> None:
        conn.execute(insert(policy_history).values(
            slot=self.slot, at=now or datetime.now(UTC), action=action, version=version,
            previous=previous, changed_by=by))


NO_ACTIVE_VERSION = ""
"""`expect_active` for "no version is active": a change asked for while the slot was
empty is refused once another has made a version active (None asks for no check)."""


def _expect(expected: str | None, active: str | None) -> None:
    if expected is not None and (expected or None) != active:
        raise Conflict(f"the active policy is {active or 'none'}, not {expected or 'none'}: "
                       "it changed since the change was asked for; look again and repeat it",
                       code="policy_changed")


def replay_history(history: list[dict[str, Any]]) -> list[str]:
    """The versions that were active, oldest first, from the history (oldest first)."""
    stack: list[str] = []
    for event in history:
        if event["action"] in ("adopt", "publish"):
            stack.append(event["version"])
        elif event["action"] == "rollback" and stack:
            stack.pop()
    return stack


def _aware(at: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)

"""The shop's store: accounts, addresses, orders, refunds and preferences.

Handlers read and write the shop only through the `Store` protocol, so a real shop API
could replace the default `SqlStore` (SQLAlchemy Core, SQLite or PostgreSQL, portable
column types only). Methods that may take part in a caller's transaction accept an
optional SQLAlchemy `conn`; without one they run in their own transaction.

The store is created from `datasets/store/fixture.json`. The fixture keeps dates as
whole days before the shop's clock (`placed_days_ago`, ...); `seed_store` turns them into
absolute dates from the `today` it is given (the `today` setting, 2026-03-15 by default),
so the fixture means the same thing whatever day the tests run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Date,
    Engine,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from router.storage.db import read_connection

AddressKind = Literal["shipping", "billing"]
T = TypeVar("T")
BUSINESS_TABLES: tuple[str, ...] = ("accounts", "addresses", "orders", "refunds", "preferences")

metadata = MetaData()

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("email", String(254), nullable=False, unique=True),
    Column("status", String(16), nullable=False),
)

addresses = Table(
    "addresses",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("account_id", String(16), ForeignKey("accounts.id"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("line1", String(200), nullable=False),
    Column("city", String(100), nullable=False),
    Column("postal_code", String(20), nullable=False),
    Column("country", String(2), nullable=False),
    UniqueConstraint("account_id", "kind", name="uq_addresses_account_kind"),
)

orders = Table(
    "orders",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("account_id", String(16), ForeignKey("accounts.id"), nullable=False, index=True),
    Column("status", String(16), nullable=False),
    Column("item", String(200), nullable=False),
    Column("total_cents", Integer, nullable=False),
    Column("placed_on", Date, nullable=False),
    Column("delivered_on", Date),
)

refunds = Table(
    "refunds",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("order_id", String(16), ForeignKey("orders.id"), nullable=False, index=True),
    Column("amount_cents", Integer, nullable=False),
    Column("reason", String(500), nullable=False),
    Column("created_on", Date, nullable=False),
)

preferences = Table(
    "preferences",
    metadata,
    Column("account_id", String(16), ForeignKey("accounts.id"), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("value", String(64), nullable=False),
)


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    email: str
    status: str

    @property
    def suspended(self) -> bool:
        return self.status == "suspended"


@dataclass(frozen=True)
class Address:
    id: int
    account_id: str
    kind: str
    line1: str
    city: str
    postal_code: str
    country: str


@dataclass(frozen=True)
class NewAddress:
    line1: str
    city: str
    postal_code: str
    country: str


@dataclass(frozen=True)
class Order:
    id: str
    account_id: str
    status: str
    item: str
    total_cents: int
    placed_on: date
    delivered_on: date | None


@dataclass(frozen=True)
class Refund:
    id: int
    order_id: str
    amount_cents: int
    reason: str
    created_on: date


class Store(Protocol):
    """What handlers and the refund service need from the shop."""

    def account(self, account_id: str) -> Account | None: ...

    def account_by_email(self, email: str) -> Account | None: ...

    def order(self, order_id: str, *, conn: Connection | None = None,
              lock: bool = False) -> Order | None: ...

    def refunded_cents(self, order_id: str, *, conn: Connection | None = None) -> int: ...

    def refunds_of(self, order_id: str) -> list[Refund]: ...

    def add_refund(self, order_id: str, amount_cents: int, reason: str, *,
                   today: date, conn: Connection | None = None) -> Refund: ...

    def address(self, account_id: str, kind: AddressKind) -> Address | None: ...

    def update_address(self, account_id: str, kind: AddressKind,
                       new: NewAddress) -> Address: ...

    def preferences(self, account_id: str) -> dict[str, str]: ...

    def set_preferences(self, account_id: str, changes: Mapping[str, str]) -> dict[str, str]: ...


class SqlStore:
    """The default store: SQLAlchemy Core tables in the gateway's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _conn(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self.engine.begin() as own:
                yield own

    def account(self, account_id: str) -> Account | None:
        with read_connection(self.engine) as conn:
            row = conn.execute(select(accounts).where(accounts.c.id == account_id)).first()
        return Account(**row._mapping) if row else None

    def account_by_email(self, email: str) -> Account | None:
        query = select(accounts).where(func.lower(accounts.c.email) == email.strip().lower())
        with read_connection(self.engine) as conn:
            row = conn.execute(query).first()
        return Account(**row._mapping) if row else None

    def order(self, order_id: str, *, conn: Connection | None = None,
              lock: bool = False) -> Order | None:
        query = select(orders).where(orders.c.id == order_id.upper())
        if lock:
            query = query.with_for_update()
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with read_connection(self.engine) as own:
                row = own.execute(query).first()
        return Order(**row._mapping) if row else None

    def refunded_cents(self, order_id: str, *, conn: Connection | None = None) -> int:
        query = select(func.coalesce(func.sum(refunds.c.amount_cents), 0)).where(
            refunds.c.order_id == order_id.upper()
        )
        if conn is not None:
            return int(conn.execute(query).scalar_one())
        with read_connection(self.engine) as own:
            return int(own.execute(query).scalar_one())

    def refunds_of(self, order_id: str) -> list[Refund]:
        """The order's refunds, oldest first."""
        query = (select(refunds).where(refunds.c.order_id == order_id.upper())
                 .order_by(refunds.c.id))
        with read_connection(self.engine) as conn:
            return [Refund(**row._mapping) for row in conn.execute(query)]

    def add_refund(self, order_id: str, amount_cents: int, reason: str, *,
                   today: date, conn: Connection | None = None) -> Refund:
        reason = reason[:500]
        with self._conn(conn) as c:
            key = c.execute(insert(refunds).values(
                order_id=order_id, amount_cents=amount_cents, reason=reason, created_on=today,
            )).inserted_primary_key
        assert key is not None
        return Refund(id=int(key[0]), order_id=order_id, amount_cents=amount_cents,
                      reason=reason, created_on=today)

    def address(self, account_id: str, kind: AddressKind) -> Address | None:
        query = select(addresses).where(
            addresses.c.account_id == account_id, addresses.c.kind == kind
        )
        with read_connection(self.engine) as conn:
            row = conn.execute(query).first()
        return Address(**row._mapping) if row else None

    def update_address(self, account_id: str, kind: AddressKind, new: NewAddress) -> Address:
        return _retry_on_conflict(lambda: self._update_address(account_id, kind, new))

    def _update_address(self, account_id: str, kind: AddressKind,
                        new: NewAddress) -> Address:
        values = {"line1": new.line1, "city": new.city, "postal_code": new.postal_code,
                  "country": new.country}
        where = (addresses.c.account_id == account_id, addresses.c.kind == kind)
        with self.engine.begin() as conn:
            row = conn.execute(select(addresses.c.id).where(*where)).first()
            if row is None:
                next_id = conn.execute(select(func.coalesce(func.max(addresses.c.id), 0))
                                       ).scalar_one() + 1
                conn.execute(insert(addresses).values(id=next_id, account_id=account_id,
                                                      kind=kind, **values))
                address_id = int(next_id)
            else:
                conn.execute(update(addresses).where(*where).values(**values))
                address_id = int(row.id)
        return Address(id=address_id, account_id=account_id, kind=kind, **values)

    def preferences(self, account_id: str) -> dict[str, str]:
        query = select(preferences.c.key, preferences.c.value).where(
            preferences.c.account_id == account_id
        )
        with read_connection(self.engine) as conn:
            return {row.key: row.value for row in conn.execute(query)}

    def set_preferences(self, account_id: str, changes: Mapping[str, str]) -> dict[str, str]:
        """Write the changes in one transaction; return the previous values (absent → "")."""
        return _retry_on_conflict(lambda: self._set_preferences(account_id, changes))

    def _set_preferences(self, account_id: str, changes: Mapping[str, str]) -> dict[str, str]:
        previous: dict[str, str] = {}
        with self.engine.begin() as conn:
            for key, value in changes.items():
                where = (preferences.c.account_id == account_id, preferences.c.key == key)
                old = conn.execute(select(preferences.c.value).where(*where)).scalar()
                previous[key] = old or ""
                if old is None:
                    conn.execute(insert(preferences).values(account_id=account_id, key=key,
                                                            value=value))
                elif old != value:
                    conn.execute(update(preferences).where(*where).values(value=value))
        return previous


def _retry_on_conflict(write: Callable[[], T], *, attempts: int = 3) -> T:
    """Run a read-then-insert transaction again when a concurrent one inserted first.

    On SQLite `BEGIN IMMEDIATE` serialises writers, so this never fires. On PostgreSQL
    (READ COMMITTED) two transactions can both read "no row" and both insert; the loser
    gets a unique violation, and its retry reads the winner's row and updates it.
    """
    for attempt in range(attempts):
        try:
            return write()
        except IntegrityError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def load_fixture(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _days_before(today: date, days: int | None) -> date | None:
    return None if days is None else today - timedelta(days=days)


def fixture_rows(fixture: Mapping[str, Any], *, today: date) -> dict[str, list[dict]]:
    """The fixture as rows per table, with day offsets turned into dates (pure)."""
    order_rows = [
        {k: v for k, v in o.items() if not k.endswith("_days_ago")}
        | {"placed_on": _days_before(today, o["placed_days_ago"]),
           "delivered_on": _days_before(today, o.get("delivered_days_ago"))}
        for o in fixture["orders"]
    ]
    refund_rows = [
        {k: v for k, v in r.items() if k != "created_days_ago"}
        | {"created_on": _days_before(today, r["created_days_ago"])}
        for r in fixture.get("refunds", [])
    ]
    return {
        "accounts": [dict(a) for a in fixture["accounts"]],
        "addresses": [dict(a) for a in fixture["addresses"]],
        "orders": order_rows,
        "refunds": refund_rows,
        "preferences": [dict(p) for p in fixture.get("preferences", [])],
    }


def seed_store(engine: Engine, fixture: Mapping[str, Any], *, today: date) -> bool:
    """Load the fixture into an empty store (the schema already migrated); True if it loaded.

    Safe when several processes start at once: the check and the load are one transaction,
    and a concurrent loader's duplicate keys are taken as "already loaded".
    """
    rows = fixture_rows(fixture, today=today)
    try:
        with engine.begin() as conn:
            if conn.execute(select(func.count()).select_from(accounts)).scalar_one():
                return False
            for name in BUSINESS_TABLES:
                if rows[name]:
                    conn.execute(insert(metadata.tables[name]), rows[name])
            if rows["refunds"] and engine.dialect.name == "postgresql":
                conn.exec_driver_sql(
                    "SELECT setval(pg_get_serial_sequence('refunds', 'id'), "
                    "(SELECT MAX(id) FROM refunds))"
                )
    except IntegrityError:
        return False
    return True


def snapshot(engine: Engine) -> dict[str, list[dict]]:
    """Every business table as sorted rows, for diffs in the task runner and tests."""
    result: dict[str, list[dict]] = {}
    with read_connection(engine) as conn:
        for name in BUSINESS_TABLES:
            table = metadata.tables[name]
            query = select(table).order_by(*table.primary_key.columns)
            result[name] = [dict(r._mapping) for r in conn.execute(query)]
    return result

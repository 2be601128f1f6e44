from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import Engine

from handlers.services.store import (
    NewAddress,
    SqlStore,
    fixture_rows,
    load_fixture,
    seed_store,
    snapshot,
)
from tests.handlers.helpers import FIXTURE, TODAY


@pytest.fixture
def store(engine: Engine) -> SqlStore:
    seed_store(engine, load_fixture(FIXTURE), today=TODAY)
    return SqlStore(engine)


def test_fixture_dates_are_days_before_the_clock() -> None:
    rows = fixture_rows(load_fixture(FIXTURE), today=TODAY)
    teapot = next(o for o in rows["orders"] if o["id"] == "O-1001")
    assert teapot["placed_on"] == date(2026, 3, 9)
    assert teapot["delivered_on"] == date(2026, 3, 13)
    espresso = next(o for o in rows["orders"] if o["id"] == "O-1004")
    assert espresso["delivered_on"] is None
    assert rows["refunds"][0]["created_on"] == date(2026, 3, 11)


def test_seed_loads_the_fixture_once(engine: Engine, store: SqlStore) -> None:
    assert seed_store(engine, load_fixture(FIXTURE), today=TODAY) is False
    tables = snapshot(engine)
    assert {name: len(rows) for name, rows in tables.items()} == {
        "accounts": 5, "addresses": 10, "orders": 10, "refunds": 1, "preferences": 11,
    }


def test_lookups(store: SqlStore) -> None:
    assert store.account_by_email(" Ana.Novak@Example.com ").id == "A-100"
    assert store.account_by_email("nobody@example.com") is None
    assert store.account("A-102").suspended
    assert store.order("o-2002").total_cents == 35000
    assert store.order("O-9999") is None
    assert store.refunded_cents("O-5001") == 19900
    assert store.refunded_cents("O-1001") == 0
    assert store.address("A-104", "billing").postal_code == "111 51"


def test_add_refund_numbers_after_the_fixture(store: SqlStore) -> None:
    refund = store.add_refund("O-1001", 4800, "broken", today=TODAY)
    assert refund.id == 2
    assert store.refunded_cents("O-1001") == 4800


def test_update_address_keeps_the_customers_spelling(store: SqlStore) -> None:
    row = store.update_address("A-103", "shipping",
                               NewAddress("Schönhauser Allee 12", "Berlin", "10119", "DE"))
    assert row.id == 7
    assert store.address("A-103", "shipping").line1 == "Schönhauser Allee 12"
    assert store.address("A-103", "billing").line1 == "Karl-Marx-Allee 90"


def test_set_preferences_returns_previous_values(store: SqlStore) -> None:
    previous = store.set_preferences("A-103", {"marketing_emails": "off",
                                               "paperless_billing": "on"})
    assert previous == {"marketing_emails": "on", "paperless_billing": ""}
    assert store.preferences("A-103") == {"marketing_emails": "off", "sms_notifications": "on",
                                          "language": "en", "paperless_billing": "on"}



def test_concurrent_writes_of_a_new_preference_all_succeed(store: SqlStore) -> None:
    """Two gateway processes may write the same new row at once; neither may fail."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        previous = list(pool.map(
            lambda _: store.set_preferences("A-103", {"paperless_billing": "on"}), range(8)))
    assert {p["paperless_billing"] for p in previous} <= {"", "on"}
    assert store.preferences("A-103")["paperless_billing"] == "on"

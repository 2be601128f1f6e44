from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.flow import FlowInput
from handlers.identity import identify, lookup_customer
from handlers.services.store import SqlStore, load_fixture, seed_store
from router.errors import InvalidInput
from tests.handlers.helpers import FIXTURE, TODAY


@pytest.fixture
def store(engine: Engine) -> SqlStore:
    seed_store(engine, load_fixture(FIXTURE), today=TODAY)
    return SqlStore(engine)


def _flow(text: str, **kwargs: object) -> FlowInput:
    return FlowInput(case_id="c-1", text=text, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("customer", "account"), [
    ("A-103", "A-103"), ("a-103", "A-103"), ("Dmitri.Sokolov@example.com", "A-103"),
    ("A-999", None), ("nobody@example.com", None),
])
def test_lookup_customer(store: SqlStore, customer: str, account: str | None) -> None:
    found = lookup_customer(store, customer)
    assert (found.id if found else None) == account


def test_email_in_the_message(store: SqlStore) -> None:
    account, obs = identify(store, _flow("hi, ben.ortiz@example.com here"))
    assert account.id == "A-101" and obs.artifacts["source"] == "email"


def test_first_known_email_wins_over_an_unknown_one(store: SqlStore) -> None:
    account, _ = identify(store, _flow("reply to me@gmail.com, account eva.lindqvist@example.com"))
    assert account.id == "A-104"


def test_newest_message_first_then_the_case(store: SqlStore) -> None:
    flow = _flow("it's ben.ortiz@example.com", earlier_texts=["I'm ana.novak@example.com"])
    assert identify(store, flow)[0].id == "A-101"
    flow = _flow("order O-1001", earlier_texts=["hello"], case_customer_id="A-100")
    account, obs = identify(store, flow)
    assert account.id == "A-100" and obs.artifacts["source"] == "case"


def test_authenticated_customer_wins(store: SqlStore) -> None:
    account, obs = identify(store, _flow("I'm ana.novak@example.com", customer="A-103"))
    assert account.id == "A-103" and obs.artifacts["source"] == "authenticated"
    with pytest.raises(InvalidInput) as exc:
        identify(store, _flow("hi", customer="A-999"))
    assert exc.value.code == "unknown_customer"


@pytest.mark.parametrize(("text", "code"), [
    ("refund my teapot", "identity_missing"),
    ("I'm someone@example.org", "unknown_email"),
])
def test_no_identity(store: SqlStore, text: str, code: str) -> None:
    account, obs = identify(store, _flow(text))
    assert account is None and obs.code == code and obs.stop

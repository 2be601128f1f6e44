from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.flow import FlowInput
from handlers.identity import (
    IdentityGate,
    claims_other_account,
    identify,
    is_verified,
    lookup_customer,
)
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


def test_email_in_the_message_is_only_claimed(store: SqlStore) -> None:
    account, obs = identify(store, _flow("hi, ben.ortiz@example.com here"))
    assert account.id == "A-101" and obs.artifacts["source"] == "email"
    assert not is_verified(obs)


def test_first_known_email_wins_over_an_unknown_one(store: SqlStore) -> None:
    account, _ = identify(store, _flow("reply to me@gmail.com, account eva.lindqvist@example.com"))
    assert account.id == "A-104"


def test_newest_message_first_then_the_case(store: SqlStore) -> None:
    flow = _flow("it's ben.ortiz@example.com", earlier_texts=["I'm ana.novak@example.com"])
    assert identify(store, flow)[0].id == "A-101"
    flow = _flow("order O-1001", earlier_texts=["hello"], case_customer_id="A-100")
    account, obs = identify(store, flow)
    assert account.id == "A-100" and obs.artifacts["source"] == "case"
    assert not is_verified(obs)  # a case bound by a claim is still only claimed
    proven = _flow("order O-1001", case_customer_id="A-100", case_customer_verified=True)
    assert is_verified(identify(store, proven)[1])


def test_the_cases_customer_wins_over_an_email_of_the_same_account(store: SqlStore) -> None:
    flow = _flow("ana.novak@example.com again", case_customer_id="A-100",
                 case_customer_verified=True)
    account, obs = identify(store, flow)
    assert account.id == "A-100" and obs.artifacts["source"] == "case" and is_verified(obs)


@pytest.mark.parametrize("kwargs", [
    {"text": "I'm ben.ortiz@example.com, refund O-2001"},
    {"text": "refund O-2001", "earlier_texts": ["I'm ben.ortiz@example.com"]},
    {"text": "refund it", "customer": "A-101"},
    {"text": "me@gmail.com, or ben.ortiz@example.com"},
])
def test_another_account_on_a_bound_case_is_a_mismatch(store: SqlStore, kwargs: dict) -> None:
    account, obs = identify(store, FlowInput(case_id="c-1", case_customer_id="A-100",
                                             case_customer_verified=True, **kwargs))
    assert account is None and obs.code == "identity_mismatch" and obs.stop


def test_claims_other_account_reads_only_this_message(store: SqlStore) -> None:
    bound = {"case_customer_id": "A-100"}
    assert claims_other_account(store, _flow("this is ben.ortiz@example.com", **bound)) \
        .code == "identity_mismatch"
    assert claims_other_account(store, _flow("ana.novak@example.com here", **bound)) is None
    assert claims_other_account(store, _flow("write to nobody@example.org", **bound)) is None
    assert claims_other_account(store, _flow("this is ben.ortiz@example.com")) is None
    # The calling system's customer is checked against the case where it is prepared.
    assert claims_other_account(
        store, _flow("ben.ortiz@example.com", customer="A-100", **bound)) is None


def test_authenticated_customer_wins(store: SqlStore) -> None:
    account, obs = identify(store, _flow("I'm ana.novak@example.com", customer="A-103"))
    assert account.id == "A-103" and obs.artifacts["source"] == "authenticated"
    assert is_verified(obs)
    with pytest.raises(InvalidInput) as exc:
        identify(store, _flow("hi", customer="A-999"))
    assert exc.value.code == "unknown_customer"


def test_a_gate_without_verification_refuses_claims(store: SqlStore) -> None:
    gate = IdentityGate(store)
    flow = _flow("hi, ben.ortiz@example.com here")
    account, obs = gate.identify(flow)
    assert account is not None
    refused = gate.before_write(flow, account, obs)
    assert refused is not None and refused.code == "identity_unverified" and refused.stop
    proven = _flow("refund it", customer="A-101")
    account, obs = gate.identify(proven)
    assert account is not None and gate.before_write(proven, account, obs) is None


@pytest.mark.parametrize(("text", "code"), [
    ("refund my teapot", "identity_missing"),
    ("I'm someone@example.org", "unknown_email"),
])
def test_no_identity(store: SqlStore, text: str, code: str) -> None:
    account, obs = identify(store, _flow(text))
    assert account is None and obs.code == code and obs.stop

"""The account handler through the desk, with hand-built router decisions (no model)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.services.store import snapshot
from tests.handlers.helpers import decision, mail_sender


def _send(desk: SupportDesk, text: str, *, case_id: str | None = None,
          customer: str | None = None, claimed: bool = False):
    """One message; from a mail system that vouches for the e-mail in it unless `claimed`."""
    if customer is None and not claimed:
        customer = mail_sender(desk, text)
    return desk.handle_message(text, case_id, customer, decision("account"))


def _changed(before: dict, after: dict, table: str) -> list[dict]:
    old = {tuple(sorted(r.items())) for r in before[table]}
    return [r for r in after[table] if tuple(sorted(r.items())) not in old]


def test_shipping_address_is_updated_in_the_customers_spelling(desk: SupportDesk,
                                                               engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Hi, dmitri.sokolov@example.com. I moved. My new shipping address is "
                      "Schönhauser Allee 12, 10119 Berlin, Germany.")
    assert out.status == "resolved"
    assert _changed(before, snapshot(engine), "addresses") == [
        {"id": 7, "account_id": "A-103", "kind": "shipping", "line1": "Schönhauser Allee 12",
         "city": "Berlin", "postal_code": "10119", "country": "DE"}]
    assert out.reply == ("Your shipping address is now Schönhauser Allee 12, 10119 Berlin, "
                         "DE.")


def test_billing_address_is_the_billing_row(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    _send(desk, "Hola, soy ben.ortiz@example.com. Cambien mi dirección de facturación a "
                "Calle Mayor 10, 28013 Madrid, España.")
    changed = _changed(before, snapshot(engine), "addresses")
    assert [(r["id"], r["kind"], r["country"]) for r in changed] == [(4, "billing", "ES")]


def test_incomplete_address_asks_for_the_missing_fields(desk: SupportDesk,
                                                       engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "This is ana.novak@example.com. Please change my shipping address to "
                      "12 Oak Street.")
    assert out.status == "awaiting_customer"
    assert "city, postal code and country" in out.reply and "?" in out.reply
    assert snapshot(engine) == before
    answer = _send(desk, "80-002 Gdańsk, Poland", case_id=out.case_id)
    assert answer.status == "resolved"
    assert _changed(before, snapshot(engine), "addresses") == [
        {"id": 1, "account_id": "A-100", "kind": "shipping", "line1": "12 Oak Street",
         "city": "Gdańsk", "postal_code": "80-002", "country": "PL"}]


def test_an_answer_that_still_lacks_a_field_asks_again(desk: SupportDesk,
                                                      engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, "Hi, ben.ortiz@example.com. Please change my billing address to "
                        "500 Congress Avenue, Austin 78701.")
    assert first.status == "awaiting_customer" and "country" in first.reply
    again = _send(desk, "thanks!", case_id=first.case_id)
    assert again.status == "awaiting_customer" and "country" in again.reply
    done = _send(desk, "USA", case_id=first.case_id)
    assert done.status == "resolved"
    assert [(r["id"], r["country"]) for r in _changed(before, snapshot(engine),
                                                     "addresses")] == [(4, "US")]


@pytest.mark.parametrize("text", [
    "Hello, chloe.park@example.com. Please update my billing address to 8 Avenue Foch, "
    "75116 Paris, France.",
    "Hi, chloe.park@example.com. Please stop sending me marketing emails.",
    "Hi, chloe.park@example.com. Please change my address to 12 Oak Street.",
])
def test_suspended_accounts_get_no_writes(desk: SupportDesk, engine: Engine,
                                          text: str) -> None:
    before = snapshot(engine)
    out = _send(desk, text)
    assert out.status == "resolved"
    assert out.actions[-1]["code"] == "account_suspended"
    assert "suspended" in out.reply
    assert snapshot(engine) == before


def test_two_preference_changes_in_one_message(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Hi, dmitri.sokolov@example.com. Please stop sending me marketing "
                      "emails and switch my account language to German.")
    changed = {(r["key"], r["value"]) for r in _changed(before, snapshot(engine),
                                                        "preferences")}
    assert changed == {("marketing_emails", "off"), ("language", "de")}
    assert "German (de)" in out.reply and out.status == "resolved"


def test_unsupported_preference_is_refused_by_name(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Hey, ben.ortiz@example.com. Turn on dark mode for my account, and "
                      "turn on SMS notifications.")
    assert [(r["account_id"], r["key"], r["value"]) for r in
            _changed(before, snapshot(engine), "preferences")] == [
        ("A-101", "sms_notifications", "on")]
    assert "SMS notifications are on" in out.reply and "dark mode" in out.reply


def test_a_preference_already_set_is_not_written(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Hi, ana.novak@example.com. Please turn off SMS notifications.")
    assert snapshot(engine) == before
    assert "No change was needed" in out.reply and out.status == "resolved"


def test_nothing_recognisable_asks_what_to_change(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Hi, ana.novak@example.com. I want to change something on my account.")
    assert out.status == "awaiting_customer" and "What would you like to change" in out.reply
    assert snapshot(engine) == before


def test_identity_answer_completes_a_preference_change(desk: SupportDesk,
                                                      engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, "Please unsubscribe me from marketing emails.")
    assert first.status == "awaiting_customer" and "e-mail address" in first.reply
    assert snapshot(engine) == before
    second = _send(desk, "It's ben.ortiz@example.com", case_id=first.case_id)
    assert second.status == "resolved"
    assert [(r["account_id"], r["key"], r["value"]) for r in
            _changed(before, snapshot(engine), "preferences")] == [
        ("A-101", "marketing_emails", "off")]


# -- markup and other characters no address holds are refused, never stored --------------

DMITRI = "Hi, dmitri.sokolov@example.com."


@pytest.mark.parametrize(("address", "field"), [
    ("<script>alert(1)</script> Street 12, 10119 Berlin, Germany", "street and house number"),
    ("Main Street 12, 10119 &lt;b&gt;Berlin, Germany", "city"),
    ("Main Street &#60;12, 10119 Berlin, Germany", "street and house number"),
    ("javascript:alert(1) Street 12, 10119 Berlin, Germany", "street and house number"),
    ("Main\u200b Street 12, 10119 Berlin, Germany", "street and house number"),
    ("Main Street {{7*7}}, 10119 Berlin, Germany", "street and house number"),
    ("Main Street 12, 10119 Ber\x07lin, Germany", "city"),
])
def test_an_address_with_markup_or_strange_characters_is_refused(
        desk: SupportDesk, engine: Engine, address: str, field: str) -> None:
    before = snapshot(engine)
    out = _send(desk, f"{DMITRI} My new shipping address is {address}")
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == "address_unsafe"
    assert field in out.actions[-1]["artifacts"]["fields"]
    assert snapshot(engine) == before
    for piece in ("<", ">", "script", "&lt", "&#", "{{", "\x07"):
        assert piece not in out.reply
    assert "plain text" in out.reply and "Nothing has been changed" in out.reply
    context = desk.cases.get(out.case_id).context
    assert "address" not in context  # nothing of the refused address is kept


def test_the_plain_answer_after_a_refused_address_is_stored(desk: SupportDesk,
                                                           engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, f"{DMITRI} My new shipping address is <script>alert(1)</script> "
                        "Street 12, 10119 Berlin, Germany")
    second = _send(desk, "Torstraße 1, 10119 Berlin, Germany", case_id=first.case_id)
    assert second.status == "resolved"
    assert _changed(before, snapshot(engine), "addresses") == [
        {"id": 7, "account_id": "A-103", "kind": "shipping", "line1": "Torstraße 1",
         "city": "Berlin", "postal_code": "10119", "country": "DE"}]

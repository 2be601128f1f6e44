"""E-mail replies with quoting through the desk: what is written is what the customer
asked in their own words, never an amount, a setting or an address from the quote.

The messages come from an authenticated mail sender (`customer`), so every request acts.
When the customer's own words name no amount and only `>`-quoted lines (or a signature,
a disclaimer) do, the refund is what a request naming no amount gets: the order's
remainder, under the shop's rules (`handlers.shop_rules.check_refund`). Below an unquoted
forward or reply header the customer may have written too: an amount there is asked
about.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from handlers.desk import SupportDesk
from handlers.services.store import snapshot
from tests.handlers.helpers import decision, new_refunds
from tests.messages import ANA

DMITRI = "dmitri.sokolov@example.com"
ON_WROTE = "On Mon, 9 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:"


def _send(desk: SupportDesk, text: str, customer: str, route: str = "refund"):
    return desk.handle_message(text, None, customer, decision(route))


def _changed(before: dict, after: dict, table: str) -> list[dict]:
    old = {tuple(sorted(r.items())) for r in before[table]}
    return [r for r in after[table] if tuple(sorted(r.items())) not in old]


@pytest.mark.parametrize(("text", "customer", "refund"), [
    (f"Please refund $15.00, only the bread knife is missing.\n\n{ON_WROTE}\n"
     "> We can refund you $25.00 for order O-1002 or $60.00 for the knife block.",
     ANA, ("O-1002", 1500)),
    ("Bitte erstatten Sie mir nur 12,50 $.\n\nVon: Kundenservice <service@shop.example>\n"
     "Gesendet: Montag, 9. März 2026 10:00\nAn: Dmitri Sokolov\n"
     "Betreff: AW: Bestellung O-4001\n\nWir können 20,00 $ oder 60,00 $ erstatten.",
     DMITRI, ("O-4001", 1250)),
    ("Je préfère 20,00 $ seulement pour la commande O-1002.\n\n"
     "Le lun. 9 mars 2026 à 10:00, Service Client <service@shop.example> a écrit :\n"
     "> Nous pouvons vous rembourser 25,00 $ ou 60,00 $.", ANA, ("O-1002", 2000)),
    ("Prefiero que me devuelvan 30,00 $.\n\n---------- Mensaje reenviado ---------\n"
     "De: Atención al cliente <soporte@shop.example>\nFecha: lun, 9 mar 2026\n"
     "Asunto: Pedido O-1002\n\nPodemos reembolsarle 25,00 $ o 60,00 $.", ANA, ("O-1002", 3000)),
    ("Proszę o zwrot 10,00 $ za zamówienie O-1002.\n\n"
     "Dnia 9 marca 2026 Obsługa klienta <obsluga@shop.example> napisał(a):\n"
     "> Możemy zwrócić 25,00 $ albo 60,00 $.", ANA, ("O-1002", 1000)),
])
def test_the_customers_amount_is_refunded_not_the_quotes(
        desk: SupportDesk, engine: Engine, text: str, customer: str,
        refund: tuple[str, int]) -> None:
    before = snapshot(engine)
    out = _send(desk, text, customer)
    assert out.status == "resolved"
    after = snapshot(engine)
    assert new_refunds(before, after) == [refund]
    reason = after["refunds"][-1]["reason"]  # the customer's words, not the quote's
    assert reason and reason in " ".join(text.split()) and "60,00" not in reason
    assert "60.00" not in reason


@pytest.mark.parametrize("text", [
    # Amounts in a signature, a disclaimer or a phone number are no amount.
    "Please refund order O-1001, the teapot arrived broken.\n\nBest regards,\nAna Novak\n"
    "Tel: +49 30 1234 5678",
    "Bitte erstatten Sie Bestellung O-1001.\n\nMit freundlichen Grüßen\nAna Novak\n"
    "Novak Handels GmbH, Stammkapital: 25.000,00 EUR",
    "Please refund order O-1001.\n\n--\nAna Novak | consulting from $150.00 per hour",
    "Please refund order O-1001.\n\nDisclaimer: This e-mail is confidential. Payments "
    "above $10,000.00 need a second signature and are never confirmed by e-mail.",
])
def test_an_amount_only_the_signature_or_a_disclaimer_names_is_no_amount(
        desk: SupportDesk, engine: Engine, text: str) -> None:
    before = snapshot(engine)
    out = _send(desk, text, ANA)
    assert out.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]  # the remainder


@pytest.mark.parametrize(("text", "mentioned"), [
    # "Yes please" above our quoted offer accepts one of its amounts: which is asked,
    # never guessed, and never the whole remainder.
    (f"Yes please, just the one item. Order O-1001.\n\n{ON_WROTE}\n"
     "> We can refund you $25.00 for order O-1001 or $30.00 for the whole order.",
     ["$25.00", "$30.00"]),
    ("Ja, bitte die Bestellung O-1001 erstatten.\n\n"
     "Am 09.03.2026 um 10:00 schrieb Kundenservice <service@shop.example>:\n"
     "> Wir können Ihnen 25,00 $ oder 30,00 $ erstatten.", ["25,00 $", "30,00 $"]),
    # Their own earlier request, quoted under a reminder.
    (f"Any update on this?\n\n{ON_WROTE}\n> Please refund $20.00 for order O-1001.",
     ["$20.00"]),
    ("Can you sort this out? Order O-1001.\n\n---------- Forwarded message ---------\n"
     "From: Shop Support <support@shop.example>\nDate: Mon, 9 Mar 2026 at 10:00\n"
     "Subject: Your refund\nTo: Ana Novak <ana.novak@example.com>\n\n"
     "We can refund $20.00 or $30.00 for your teapot.", ["$20.00", "$30.00"]),
    ("Go ahead with the refund for order O-1001.\n\n-----Original Message-----\n"
     "From: Shop Support\nSent: Monday, March 9, 2026 10:00 AM\nTo: Ana Novak\n"
     "Subject: RE: order O-1001\n\nWe can refund you $20.00 for the chipped lid.",
     ["$20.00"]),
    # Written below the forwarded message: it may be the customer's, so it is asked about.
    ("Goedemiddag,\n\n---------- Doorgestuurd bericht ---------\n"
     "Van: Klantenservice <klantenservice@shop.example>\nDatum: ma 9 mrt 2026 om 10:00\n"
     "Onderwerp: Bestelling O-1001\n\nUw bestelling is geleverd.\n\n"
     "De theepot was kapot. Graag 12,00 $ terug.\n\nGroet,\nAna Novak", ["12,00 $"]),
    # All quote: perhaps the customer's own earlier request, sent again.
    ("> Please refund $20.00 for order O-1001, the lid is chipped.\n> Ana", ["$20.00"]),
])
def test_an_amount_only_the_quoted_or_forwarded_message_names_is_asked_about(
        desk: SupportDesk, engine: Engine, text: str, mentioned: list[str]) -> None:
    before = snapshot(engine)
    out = _send(desk, text, ANA)
    assert snapshot(engine) == before
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == "amount_in_earlier_message"
    assert out.actions[-1]["artifacts"]["mentioned"] == mentioned
    assert "How much should I refund for order O-1001" in out.reply
    answer = desk.handle_message("$12.00 please.", out.case_id, ANA, decision("refund"))
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 1200)]
    assert answer.status == "resolved"


def test_an_impossible_amount_in_the_quote_does_not_refuse_the_reply(
        desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, f"Please refund order O-1001 after all.\n\n{ON_WROTE}\n"
                      "> Your balance is $0.00 and the refund of -$48.00 was cancelled.", ANA)
    # Not a 422: the impossible amount is the quote's. It is asked about, like any
    # amount only the quote names, and nothing is refunded yet.
    assert snapshot(engine) == before
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == "amount_in_earlier_message"


@pytest.mark.parametrize("text", [
    "I do not want a refund for order O-1001, just fix the billing address.",
    "Ich möchte keine Erstattung für O-1001, bitte nur die Rechnungsadresse ändern.",
    "No quiero un reembolso del pedido O-1001, solo cambien la dirección de facturación.",
])
def test_a_message_refusing_a_refund_writes_none_when_routed_to_refunds(
        desk: SupportDesk, engine: Engine, text: str) -> None:
    before = snapshot(engine)
    out = _send(desk, text, ANA)
    assert snapshot(engine) == before
    assert out.status == "resolved"
    assert [a["code"] for a in out.actions] == ["refund_not_wanted"]
    assert "nothing has been refunded" in out.reply


def test_a_refusal_in_an_open_refund_flow_closes_it(desk: SupportDesk,
                                                    engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, "My teapot arrived broken, please refund it.", ANA)
    assert first.actions[-1]["code"] == "order_missing"
    second = desk.handle_message("Actually I don't want a refund any more, I'll keep it.",
                                 first.case_id, ANA, decision("refund"))
    assert second.status == "resolved"
    assert [a["code"] for a in second.actions] == ["refund_not_wanted"]
    assert desk.prepare("It's order O-1001.", case_id=first.case_id).case_route is None
    assert snapshot(engine) == before


def test_a_quoted_setting_is_not_written_the_customers_is(desk: SupportDesk,
                                                         engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, f"Please switch the language to German.\n\n{ON_WROTE}\n"
                      "> You can turn on SMS notifications or unsubscribe from marketing\n"
                      "> e-mails in your account settings.", ANA, route="account")
    assert out.status == "resolved"
    assert [(r["key"], r["value"]) for r in _changed(before, snapshot(engine),
                                                     "preferences")] == [("language", "de")]


def test_a_quoted_address_is_not_written_the_customer_is_asked(desk: SupportDesk,
                                                              engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, f"Yes, please update my shipping address.\n\n{ON_WROTE}\n"
                      "> Shall we change your shipping address to Karl-Marx-Allee 90,\n"
                      "> 10243 Berlin, Germany?", ANA, route="account")
    assert snapshot(engine) == before
    assert out.status == "awaiting_customer"
    assert out.actions[-1]["code"] == "address_incomplete"


def test_the_customers_address_is_written_not_the_quoted_one(desk: SupportDesk,
                                                            engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, "Mijn nieuwe bezorgadres is Keizersgracht 100, 1015 CS Amsterdam, "
                      f"Nederland.\n\n{ON_WROTE}\n> Your shipping address is 14 Harbour "
                      "Road, 80-001 Gdansk, Poland.", ANA, route="account")
    assert out.status == "resolved"
    assert _changed(before, snapshot(engine), "addresses") == [
        {"id": 1, "account_id": "A-100", "kind": "shipping", "line1": "Keizersgracht 100",
         "city": "Amsterdam", "postal_code": "1015 CS", "country": "NL"}]

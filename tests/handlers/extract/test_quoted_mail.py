"""E-mail replies with quoting: which part of a message each fact is read from.

Each row is a customer's e-mail with an earlier message in it — our agent's reply quoted
with `>` under an "On … wrote:" line, a forwarded message, an Outlook "-----Original
Message-----" block, in several languages — and what a person reads as the customer's
request now. Order ids come from the whole message (a quoted one still names the
order); amounts, settings and addresses only from the customer's own words, so an amount
the quote offers is never taken as the one asked for, and the customer's own amount
wins over the quote's.
"""

from __future__ import annotations

import pytest

from handlers.extract import (
    customer_words,
    declines_refund,
    find_order_ids,
    parse_address,
    parse_preference_changes,
    read_amounts,
)

EN_QUOTE_ONLY = """Yes please, just the one item.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> We can refund you $25.00 for order O-1234 or $60.00 for the whole order.
> Let us know which you prefer."""
EN_MIXED = """Please refund $15.00, the lid is the only broken part.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> We can refund you $25.00 for order O-1234 or $60.00 for the whole order."""
EN_FORWARD = """Can you sort this out? Order O-1001.

---------- Forwarded message ---------
From: Shop Support <support@shop.example>
Date: Mon, 2 Mar 2026 at 10:00
Subject: Your refund
To: Ana Novak <ana.novak@example.com>

We can refund $20.00 or the full $48.00 for your teapot."""
EN_OUTLOOK = """Go ahead with the refund for order O-1001.

-----Original Message-----
From: Shop Support
Sent: Monday, March 2, 2026 10:00 AM
To: Ana Novak
Subject: RE: order O-1001

We can refund you $20.00 for the chipped lid."""
DE_QUOTE = """Ja, bitte so machen.

Am 02.03.2026 um 10:00 schrieb Kundenservice <service@shop.example>:
> Wir können Ihnen 25,00 $ für Bestellung O-1001 oder 48,00 $ für die ganze
> Bestellung erstatten."""
DE_MIXED = """Bitte erstatten Sie mir nur 12,50 $.

Von: Kundenservice <service@shop.example>
Gesendet: Montag, 2. März 2026 10:00
An: Dmitri Sokolov
Betreff: AW: Bestellung O-4001

Wir können 20,00 $ oder 74,00 $ erstatten."""
FR_QUOTE = """D'accord pour le remboursement de la commande O-1001.

Le lun. 2 mars 2026 à 10:00, Service Client <service@shop.example> a écrit :
> Nous pouvons vous rembourser 20,00 $ ou 48,00 $ pour la commande O-1001."""
FR_MIXED = """Je préfère 20,00 $ seulement.

-------- Message transféré --------
Sujet : Votre commande O-1001
De : Service Client <service@shop.example>

Nous pouvons vous rembourser 20,00 $ ou 48,00 $."""
ES_QUOTE = """Sí, adelante con el reembolso del pedido O-1001.

El lun, 2 mar 2026 a las 10:00, Atención al cliente (<soporte@shop.example>) escribió:
> Podemos reembolsarle 20,00 $ o 48,00 $ por el pedido O-1001."""
ES_MIXED = """Prefiero que me devuelvan 30,00 $.

---------- Mensaje reenviado ---------
De: Atención al cliente <soporte@shop.example>
Fecha: lun, 2 mar 2026
Asunto: Pedido O-1001

Podemos reembolsarle 20,00 $ o 48,00 $."""
NL_QUOTE = """Ja, graag terugbetalen voor bestelling O-1001.

Op ma 2 mrt 2026 om 10:00 schreef Klantenservice <service@shop.example>:
> Wij kunnen u 20,00 $ of 48,00 $ terugbetalen."""
PL_MIXED = """Proszę o zwrot 10,00 $ za zamówienie O-1001.

Dnia 2 marca 2026 Obsługa klienta <obsluga@shop.example> napisał(a):
> Możemy zwrócić 20,00 $ albo 48,00 $."""
IT_QUOTE = """Sì, procedete pure con il rimborso dell'ordine O-1001.

Il giorno lun 2 mar 2026 alle ore 10:00 Servizio clienti <servizio@shop.example> ha scritto:
> Possiamo rimborsarle 20,00 $ oppure 48,00 $."""
EN_PREF = """Please switch the language to German.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> You can turn off SMS notifications or unsubscribe from marketing e-mails
> in your account settings."""
EN_PREF_QUOTE_ONLY = """Thanks, that answers it.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> Would you like us to turn off SMS notifications and stop marketing e-mails?"""
DE_PREF = """Bitte keine Werbe-E-Mails mehr.

Am 02.03.2026 um 10:00 schrieb Kundenservice <service@shop.example>:
> Möchten Sie die SMS-Benachrichtigungen einschalten? Wir können auch
> die Sprache auf Englisch umstellen."""
FR_PREF = """Merci pour votre réponse.

-------- Message transféré --------
De : Service Client <service@shop.example>
Objet : Vos préférences

Pour désactiver les SMS, répondez STOP. Nous pouvons aussi passer la langue en anglais."""
ES_PREF = """Por favor, desactiven las notificaciones SMS.

El lun, 2 mar 2026 a las 10:00, Atención al cliente (<soporte@shop.example>) escribió:
> ¿Quiere activar la facturación electrónica y cambiar el idioma a inglés?"""
IT_PREF = """Grazie, va bene così.

Il giorno lun 2 mar 2026 alle ore 10:00 Servizio clienti <servizio@shop.example> ha scritto:
> Vuole disattivare le email promozionali e gli SMS?"""
EN_ADDR = """My new shipping address is Lindenweg 3, 80331 München, Germany.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> We have your shipping address as 14 Harbour Road, 80-001 Gdansk, Poland."""
EN_ADDR_QUOTE_ONLY = """Yes, please update my address.

On Mon, 2 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:
> Shall we change your shipping address to 14 Harbour Road, 80-001 Gdansk, Poland?"""
DE_ADDR = """Bitte meine Lieferadresse ändern.

-----Ursprüngliche Nachricht-----
Von: Kundenservice <service@shop.example>
Gesendet: Montag, 2. März 2026 10:00
An: Dmitri Sokolov
Betreff: Ihre Adresse

Ihre Lieferadresse lautet Karl-Marx-Allee 90, 10243 Berlin, Deutschland."""
FR_ADDR = """Ma nouvelle adresse de livraison : 12 rue de la Paix, 75002 Paris, France.

Le lun. 2 mars 2026 à 10:00, Service Client <service@shop.example> a écrit :
> Votre adresse de livraison est 3 Rue Cler, 75007 Paris, France."""
ES_ADDR = """Quiero cambiar mi dirección de envío.

---------- Mensaje reenviado ---------
De: Atención al cliente <soporte@shop.example>
Asunto: Su dirección

Su dirección de envío es Calle Mayor 5, 28013 Madrid, España."""
NL_ADDR = """Mijn nieuwe bezorgadres is Keizersgracht 100, 1015 CS Amsterdam, Nederland.

Op ma 2 mrt 2026 om 10:00 schreef Klantenservice <service@shop.example>:
> Uw bezorgadres is Drottninggatan 5, 111 51 Stockholm, Zweden."""
SIGNATURE_PHONE = """Hi, ana.novak@example.com here. Please refund my teapot, order O-1001.

Best regards,
Ana Novak
Tel: +49 30 1234 5678
Mobile: +1 (555) 123-4567"""
SIGNATURE_CAPITAL = """Bitte erstatten Sie Bestellung O-4001, die Decke ist beschädigt.

Mit freundlichen Grüßen
Dmitri Sokolov
Sokolov Handels GmbH, Stammkapital: 25.000,00 EUR
Amtsgericht Berlin HRB 12345, Tel. +49 30 1234 5678"""
SIGNATURE_SEPARATOR = """Please refund order O-1001, it arrived broken.

--
Ana Novak | Novak Consulting, fees from $150.00 per hour | +48 58 123 45 67"""
DISCLAIMER_AMOUNT = """Please refund order O-1001, the teapot arrived broken.

Disclaimer: This e-mail is confidential. Payments above $10,000.00 need a second
signature and are never confirmed by e-mail."""
POSTSCRIPT = """Please refund order O-1002, a knife was missing.

Kind regards,
Ana Novak

P.S. Only $15.00 please, the rest of the set is fine."""


@pytest.mark.parametrize(("text", "whole", "own", "orders"), [
    (EN_QUOTE_ONLY, [2500, 6000], [], ["O-1234"]),
    (EN_MIXED, [1500, 2500, 6000], [1500], ["O-1234"]),
    (EN_FORWARD, [2000, 4800], [], ["O-1001"]),
    (EN_OUTLOOK, [2000], [], ["O-1001"]),
    (DE_QUOTE, [2500, 4800], [], ["O-1001"]),
    (DE_MIXED, [1250, 2000, 7400], [1250], ["O-4001"]),
    (FR_QUOTE, [2000, 4800], [], ["O-1001"]),
    (FR_MIXED, [2000, 4800], [2000], ["O-1001"]),
    (ES_QUOTE, [2000, 4800], [], ["O-1001"]),
    (ES_MIXED, [3000, 2000, 4800], [3000], ["O-1001"]),
    (NL_QUOTE, [2000, 4800], [], ["O-1001"]),
    (PL_MIXED, [1000, 2000, 4800], [1000], ["O-1001"]),
    (IT_QUOTE, [2000, 4800], [], ["O-1001"]),
])
def test_amounts_come_from_the_customers_words_and_order_ids_from_the_whole_mail(
        text: str, whole: list[int], own: list[int], orders: list[str]) -> None:
    assert [a.cents for a in read_amounts(text).amounts] == whole  # what the quote adds
    reading = read_amounts(customer_words(text))
    assert [a.cents for a in reading.amounts] == own
    assert reading.unreadable == []
    assert find_order_ids(text) == orders


@pytest.mark.parametrize(("text", "quoted", "own"), [
    (EN_PREF, {"sms_notifications": "off", "marketing_emails": "off"}, {"language": "de"}),
    (EN_PREF_QUOTE_ONLY, {"sms_notifications": "off", "marketing_emails": "off"}, {}),
    (DE_PREF, {"sms_notifications": "on", "language": "en"}, {"marketing_emails": "off"}),
    (FR_PREF, {"sms_notifications": "off", "language": "en"}, {}),
    (ES_PREF, {"paperless_billing": "on", "language": "en"}, {"sms_notifications": "off"}),
    (IT_PREF, {"marketing_emails": "off", "sms_notifications": "off"}, {}),
])
def test_a_setting_in_the_quote_is_not_asked_for(text: str, quoted: dict[str, str],
                                                 own: dict[str, str]) -> None:
    assert quoted.items() <= parse_preference_changes(text).changes.items()
    assert parse_preference_changes(customer_words(text)).changes == own


@pytest.mark.parametrize(("text", "quoted_line1", "own"), [
    (EN_ADDR, "14 Harbour Road", ("Lindenweg 3", "München", "80331", "DE")),
    (EN_ADDR_QUOTE_ONLY, "14 Harbour Road", None),
    (DE_ADDR, "Karl-Marx-Allee 90", None),
    (FR_ADDR, "3 Rue Cler", ("12 rue de la Paix", "Paris", "75002", "FR")),
    (ES_ADDR, "Calle Mayor 5", None),
    (NL_ADDR, "Drottninggatan 5", ("Keizersgracht 100", "Amsterdam", "1015 CS", "NL")),
])
def test_an_address_in_the_quote_is_not_the_new_one(
        text: str, quoted_line1: str, own: tuple[str, str, str, str] | None) -> None:
    assert quoted_line1 in text
    found = parse_address(customer_words(text))
    assert found is not None  # every one of them names an address
    fields = (found.line1, found.city, found.postal_code, found.country)
    assert fields == (own or (None, None, None, None))


@pytest.mark.parametrize(("text", "own"), [
    (SIGNATURE_PHONE, []),
    (SIGNATURE_CAPITAL, []),
    (SIGNATURE_SEPARATOR, []),
    (DISCLAIMER_AMOUNT, []),
    (POSTSCRIPT, [1500]),
    # A closing word that opens a request is no signature.
    ("Hola,\nSaludos, necesito que me reembolsen 20,00 $ del pedido O-1001.", [2000]),
    ("Hi,\nThanks, could you refund $12.00 for order O-1002?\nAna", [1200]),
])
def test_a_signature_a_disclaimer_or_a_phone_number_states_no_amount(
        text: str, own: list[int]) -> None:
    reading = read_amounts(customer_words(text))
    assert [a.cents for a in reading.amounts] == own
    assert reading.unreadable == []


@pytest.mark.parametrize(("text", "declined"), [
    ("I do not want a refund, just fix the billing address.", True),
    ("I don’t want a refund for O-1001, please change my billing address.", True),
    ("I'd like a replacement instead of a refund for order O-1001.", True),
    ("Ich möchte keine Erstattung, bitte nur die Rechnungsadresse ändern.", True),
    ("Je ne veux pas de remboursement, changez juste mon adresse de facturation.", True),
    ("No quiero un reembolso, solo cambien la dirección de facturación.", True),
    ("Non voglio un rimborso, cambiate solo l’indirizzo di fatturazione.", True),
    ("Ik wil geen terugbetaling, alleen mijn factuuradres wijzigen.", True),
    ("Nie chcę zwrotu pieniędzy, proszę zmienić adres rozliczeniowy.", True),
    # A refund not received yet, or one amount refused for another, is a request.
    ("No refund has arrived yet for order O-1001.", False),
    ("Ich habe noch keine Erstattung für O-4001 erhalten.", False),
    ("I don't want a partial refund, I want a full refund for O-1001.", False),
    ("I don't want a refund of $5, refund the whole $48 for O-1001.", False),
    ("Please refund O-1001, I do not want the teapot any more.", False),
])
def test_a_refusal_of_any_refund_is_told_from_a_request(text: str, declined: bool) -> None:
    assert declines_refund(text) is declined


def test_a_refusal_in_the_quote_is_not_the_customers() -> None:
    text = ("Yes, please refund order O-1001.\n\nOn Mon, 2 Mar 2026, Ana wrote:\n"
            "> I don't want a refund, I'd rather have a new teapot.")
    assert declines_refund(text) and not declines_refund(customer_words(text))

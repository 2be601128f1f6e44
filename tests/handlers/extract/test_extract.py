"""Typed extraction: real-world variants per function, and what must not be extracted.

Amounts have their own table: `test_amounts.py`.
"""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

from handlers.extract import (
    AddressExtraction,
    Amount,
    PreferenceExtraction,
    country_code,
    find_emails,
    find_order_ids,
    language_code,
    parse_address,
    parse_preference_changes,
)

# --- e-mails ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Contact me at Anna.Schmidt@Example.COM please", ["anna.schmidt@example.com"]),
        ("anna@example.com, ANNA@example.com and bob@shop.co.uk",
         ["anna@example.com", "bob@shop.co.uk"]),
        ("Reply to <bob.smith+orders@mail.example.org>", ["bob.smith+orders@mail.example.org"]),
        ("my email is anna@example.com.", ["anna@example.com"]),
        ("(anna_b-1@sub.example.de)", ["anna_b-1@sub.example.de"]),
        ("mailto:jose@correo.es", ["jose@correo.es"]),
        ("Meine Adresse: jörg@beispiel.de", ["jörg@beispiel.de"]),
        ("почта: ivan.petrov@yandex.ru, спасибо", ["ivan.petrov@yandex.ru"]),
        ("anna [at] example [dot] com", ["anna@example.com"]),
        ("anna(at)example.com", ["anna@example.com"]),
        ("From: a@x.io\nReply-To: b@y.io\n", ["a@x.io", "b@y.io"]),
        ("old: OLD@Example.com; new: new@example.com!", ["old@example.com", "new@example.com"]),
    ],
)
def test_find_emails(text: str, expected: list[str]) -> None:
    assert find_emails(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "no email here", "anna@example", "@anna on twitter", "anna@@example.com", "x@y.c",
     "write to anna at example dot com", "price 5 @ 10.00"],
)
def test_find_emails_none(text: str) -> None:
    assert find_emails(text) == []


# --- order ids -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Order O-1001 arrived broken", ["O-1001"]),
        ("o-1001", ["O-1001"]),
        ("O1001", ["O-1001"]),
        ("#O-1001", ["O-1001"]),
        ("O 1001", ["O-1001"]),
        ("order #o1001, and O-1002.", ["O-1001", "O-1002"]),
        ("O-1001 and again O-1001", ["O-1001"]),
        ("orders O-1001/O-1002", ["O-1001", "O-1002"]),
        ("O–1001 (en dash)", ["O-1001"]),
        ("заказ О-1001 (Cyrillic О)", ["O-1001"]),
        ("pedido O-7215, por favor", ["O-7215"]),
        ("(O-1001)", ["O-1001"]),
        ("Bestellung Nr. O-1001\nund Nr. O-1003", ["O-1001", "O-1003"]),
        ("O - 1001", ["O-1001"]),
    ],
)
def test_find_order_ids(text: str, expected: list[str]) -> None:
    assert find_order_ids(text) == expected


@pytest.mark.parametrize(
    "text",
    ["order 1234", "#1234", "pedido 1001 o 1002", "PO-1234", "FOO-1234", "O-12", "O-1001a",
     "call me on 555 1001", "0-1001", "", "reembolso o 1500 euros"],
)
def test_find_order_ids_needs_the_o(text: str) -> None:
    assert find_order_ids(text) == []


# --- addresses -------------------------------------------------------------------------

FULL_ADDRESSES = [
    # the issue's examples
    ("My new shipping address is Schönhauser Allee 12, 10119 Berlin, Germany.",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Please update my billing address to 8 Avenue Foch, 75116 Paris, France.",
     "billing", "8 Avenue Foch", "Paris", "75116", "FR"),
    ("My address is 221 Elm Street, Austin, TX 73301, USA",
     "shipping", "221 Elm Street", "Austin", "73301", "US"),
    ("New address: 10 Downing Street, London SW1A 2AA, United Kingdom",
     "shipping", "10 Downing Street", "London", "SW1A 2AA", "GB"),
    ("my address is now Drottninggatan 5, 111 51 Stockholm, Sweden",
     "shipping", "Drottninggatan 5", "Stockholm", "111 51", "SE"),
    ("Mój nowy adres: ul. Długa 5, 80-001 Gdańsk, Polska",
     "shipping", "ul. Długa 5", "Gdańsk", "80-001", "PL"),
    ("mi nueva dirección de envío es Calle Mayor 3, 28013 Madrid, España",
     "shipping", "Calle Mayor 3", "Madrid", "28013", "ES"),
    ("новый адрес доставки: ул. Тверская 7, 125009 Москва, Россия",
     "shipping", "ул. Тверская 7", "Москва", "125009", "RU"),
    ("ma nouvelle adresse de livraison : 5 rue de Rivoli, 75001 Paris, France",
     "shipping", "5 rue de Rivoli", "Paris", "75001", "FR"),
    ("novo endereço de entrega: Rua Augusta 100, 1100-053 Lisboa, Portugal",
     "shipping", "Rua Augusta 100", "Lisboa", "1100-053", "PT"),
    # lower case, extra punctuation, several lines
    ("my new address is schönhauser allee 12, 10119 berlin, germany",
     "shipping", "schönhauser allee 12", "berlin", "10119", "DE"),
    ("New address -> Schönhauser Allee 12 , 10119 Berlin , Germany !!!",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Hi,\nmy new address:\nSchönhauser Allee 12\n10119 Berlin\nGermany\n\nThanks, Anna",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("New address:\n  Schönhauser Allee 12\n  10119 Berlin\n  Germany\nThanks\nAnna",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("ship to Schönhauser Allee 12 10119 Berlin Germany",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    # other languages and billing
    ("Meine neue Lieferadresse lautet: Schönhauser Allee 12, 10119 Berlin, Deutschland",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Bitte ändern Sie meine Rechnungsadresse auf Hauptstraße 5, 80331 München, Deutschland.",
     "billing", "Hauptstraße 5", "München", "80331", "DE"),
    ("Mi dirección de facturación es Calle de Alcalá 50, 28014 Madrid, España",
     "billing", "Calle de Alcalá 50", "Madrid", "28014", "ES"),
    ("Адрес для счетов: ул. Ленина 10, 620014 Екатеринбург, Россия",
     "billing", "ул. Ленина 10", "Екатеринбург", "620014", "RU"),
    ("Mon adresse de facturation est 10 rue de la Paix, 75002 Paris, France",
     "billing", "10 rue de la Paix", "Paris", "75002", "FR"),
    ("Meu endereço de cobrança é Av. Paulista 1000, 01310-100 São Paulo, Brasil",
     "billing", "Av. Paulista 1000", "São Paulo", "01310-100", "BR"),
    ("Please change my invoice address to 8 Avenue Foch, 75116 Paris, France",
     "billing", "8 Avenue Foch", "Paris", "75116", "FR"),
    ("Il mio nuovo indirizzo è Via Roma 10, 00184 Roma, Italia",
     "shipping", "Via Roma 10", "Roma", "00184", "IT"),
    ("Mijn nieuwe adres is Damrak 1, 1012 LG Amsterdam, Nederland",
     "shipping", "Damrak 1", "Amsterdam", "1012 LG", "NL"),
    ("Neue Adresse: Stephansplatz 1, 1010 Wien, Österreich",
     "shipping", "Stephansplatz 1", "Wien", "1010", "AT"),
    ("Lieferadresse: Bahnhofstrasse 10, CH-8001 Zürich, Schweiz",
     "shipping", "Bahnhofstrasse 10", "Zürich", "8001", "CH"),
    ("mon adresse est Rue de la Loi 16, 1000 Bruxelles, Belgique",
     "shipping", "Rue de la Loi 16", "Bruxelles", "1000", "BE"),
    ("min nya adress är Drottninggatan 5, 111 51 Stockholm, Sverige",
     "shipping", "Drottninggatan 5", "Stockholm", "111 51", "SE"),
    ("Proszę zmienić adres dostawy na: ul. Marszałkowska 1, 00-624 Warszawa, Polska",
     "shipping", "ul. Marszałkowska 1", "Warszawa", "00-624", "PL"),
    # layouts: apartments, ZIP+4, postcode on its own, Russian order, typos, codes
    ("Please ship to 221 Elm Street, Apt 4B, Austin, TX 73301, USA",
     "shipping", "221 Elm Street, Apt 4B", "Austin", "73301", "US"),
    ("My address is 350 Fifth Avenue, New York, NY 10118, United States",
     "shipping", "350 Fifth Avenue", "New York", "10118", "US"),
    ("address: 1600 Pennsylvania Avenue NW, Washington, DC 20500-0003, USA",
     "shipping", "1600 Pennsylvania Avenue NW", "Washington", "20500-0003", "US"),
    ("Address: Flat 2, 10 Downing Street, London, SW1A 2AA, UK",
     "shipping", "Flat 2, 10 Downing Street", "London", "SW1A 2AA", "GB"),
    ("new address: 221B Baker Street, London nw1 6xe, England",
     "shipping", "221B Baker Street", "London", "NW1 6XE", "GB"),
    ("ship to 100 Queen St W, Toronto, ON M5H 2N2, Canada",
     "shipping", "100 Queen St W", "Toronto", "M5H 2N2", "CA"),
    ("address: 1 Macquarie St, Sydney NSW 2000, Australia",
     "shipping", "1 Macquarie St", "Sydney", "2000", "AU"),
    ("new address: 1 Grafton Street, Dublin, D02 X285, Ireland",
     "shipping", "1 Grafton Street", "Dublin", "D02 X285", "IE"),
    ("Новый адрес: Россия, 125009, г. Москва, ул. Тверская, д. 7, кв. 12",
     "shipping", "ул. Тверская, д. 7, кв. 12", "Москва", "125009", "RU"),
    ("my new address is Schönhauser Allee 12, 10119 Berlin, Germnay",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("address: Schönhauser Allee 12, D-10119 Berlin, DE",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("I moved to Hauptstraße 5, 80331 München, Germany.",
     "shipping", "Hauptstraße 5", "München", "80331", "DE"),
    # text around the address does not leak into it
    ("Hello, this is Anna Schmidt (anna@example.com), order O-1001. My new address is "
     "Schönhauser Allee 12, 10119 Berlin, Germany. Thanks!",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Dear support team, I moved. The new address is 5 rue de Rivoli, 75001 Paris, France. "
     "Best regards, Marie", "shipping", "5 rue de Rivoli", "Paris", "75001", "FR"),
    ("Hi team, 42 is my lucky number, but my address is 8 Avenue Foch, 75116 Paris, France",
     "shipping", "8 Avenue Foch", "Paris", "75116", "FR"),
    ("Hola, my new address is Rua Augusta 100, 1100-053 Lisboa, Portugal, obrigado",
     "shipping", "Rua Augusta 100", "Lisboa", "1100-053", "PT"),
    ("Please update my shipping address to Calle Mayor 3, 28013 Madrid, Spain and stop the "
     "newsletter", "shipping", "Calle Mayor 3", "Madrid", "28013", "ES"),
    ("Schönhauser Allee 12, 10119 Berlin, Germany is my new address",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Please update my address. New one: Schönhauser Allee 12, 10119 Berlin, Germany",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("The address on order O-1001 is wrong, it should be Schönhauser Allee 12, 10119 Berlin, "
     "Germany", "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("change shipping addr to 12 Oak St, Springfield, IL 62704, USA",
     "shipping", "12 Oak St", "Springfield", "62704", "US"),
    ("I live at 221B Baker Street, London NW1 6XE, UK",
     "shipping", "221B Baker Street", "London", "NW1 6XE", "GB"),
    ("We moved! Our new address is: 42 Wallaby Way, Sydney NSW 2000, Australia. Cheers",
     "shipping", "42 Wallaby Way", "Sydney", "2000", "AU"),
    ("SHIPPING ADDRESS: 10 DOWNING STREET, LONDON SW1A 2AA, UK",
     "shipping", "10 DOWNING STREET", "LONDON", "SW1A 2AA", "GB"),
    ("Rechnungsadresse: Musterfirma GmbH, Hauptstr. 5, 80331 München, Deutschland",
     "billing", "Hauptstr. 5", "München", "80331", "DE"),
    ("my address: Hauptstraße 5a, 2. OG, 80331 München, Germany",
     "shipping", "Hauptstraße 5a, 2. OG", "München", "80331", "DE"),
    ("Adresse: Bahnhofstr. 10\n8001 Zürich\nSchweiz",
     "shipping", "Bahnhofstr. 10", "Zürich", "8001", "CH"),
    ("My new address is An der Alster 5, 20099 Hamburg, Germany",
     "shipping", "An der Alster 5", "Hamburg", "20099", "DE"),
    ("new address: Avenida a Coruña 5, 15001 A Coruña, España",
     "shipping", "Avenida a Coruña 5", "A Coruña", "15001", "ES"),
    ("nowy adres: ul. Długa 5/7, 80-001 Gdańsk, Polska",
     "shipping", "ul. Długa 5/7", "Gdańsk", "80-001", "PL"),
    ("Nueva dirección: C/ Mayor 3, 2º B, 28013 Madrid, España",
     "shipping", "C/ Mayor 3, 2º B", "Madrid", "28013", "ES"),
    ("Моя новая адрес: Невский проспект 28, Санкт-Петербург, 191186, Россия",
     "shipping", "Невский проспект 28", "Санкт-Петербург", "191186", "RU"),
    ("new address is Schönhauser Allee 12, 10119 Berlin, Germany; phone +49 30 1234567",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("Update address to: 8 Avenue Foch\n75116 Paris\nFrance\n\nAlso stop the newsletter",
     "shipping", "8 Avenue Foch", "Paris", "75116", "FR"),
    # a bare address, as in an answer to "what is the new address?"
    ("Schönhauser Allee 12, 10119 Berlin, Germany",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
    ("12 Oak Street, Springfield, IL 62704, USA",
     "shipping", "12 Oak Street", "Springfield", "62704", "US"),
    ("Schönhauser Allee 12, Berlin, 10119, it's Germany",
     "shipping", "Schönhauser Allee 12", "Berlin", "10119", "DE"),
]


@pytest.mark.parametrize(("text", "kind", "line1", "city", "postal_code", "country"),
                         FULL_ADDRESSES)
def test_parse_address_complete(text: str, kind: Literal["shipping", "billing"], line1: str,
                                city: str, postal_code: str, country: str) -> None:
    assert parse_address(text) == AddressExtraction(
        kind=kind, line1=line1, city=city, postal_code=postal_code, country=country)


@pytest.mark.parametrize(
    ("text", "kind", "found", "missing"),
    [
        ("Please change my shipping address to 12 Oak Street.", "shipping",
         {"line1": "12 Oak Street"}, ["city", "postal_code", "country"]),
        ("My new shipping address is Schönhauser Allee 12, 10119 Berlin.", "shipping",
         {"line1": "Schönhauser Allee 12", "city": "Berlin", "postal_code": "10119"},
         ["country"]),
        ("new address: 12 Oak Street, Springfield", "shipping",
         {"line1": "12 Oak Street", "city": "Springfield"}, ["postal_code", "country"]),
        ("new address: 12 Oak Street, Springfield, IL", "shipping",
         {"line1": "12 Oak Street", "city": "Springfield"}, ["postal_code", "country"]),
        ("my new address is Schönhauser Allee 12, Berlin, Germany", "shipping",
         {"line1": "Schönhauser Allee 12", "city": "Berlin", "country": "DE"},
         ["postal_code"]),
        ("Lieferadresse ändern: 10119 Berlin, Deutschland", "shipping",
         {"city": "Berlin", "postal_code": "10119", "country": "DE"}, ["line1"]),
        ("ship to Calle Mayor 3, 28013 Madrid", "shipping",
         {"line1": "Calle Mayor 3", "city": "Madrid", "postal_code": "28013"}, ["country"]),
        ("Адрес доставки: ул. Тверская 7", "shipping", {"line1": "ул. Тверская 7"},
         ["city", "postal_code", "country"]),
        ("125009, Москва, ул. Тверская, д. 7", "shipping",
         {"line1": "ул. Тверская, д. 7", "city": "Москва", "postal_code": "125009"},
         ["country"]),
        ("Schönhauser Allee 12\n10119 Berlin", "shipping",
         {"line1": "Schönhauser Allee 12", "city": "Berlin", "postal_code": "10119"},
         ["country"]),
        ("Please change my billing address", "billing", {},
         ["line1", "city", "postal_code", "country"]),
        ("I need to update my address", "shipping", {},
         ["line1", "city", "postal_code", "country"]),
        ("Quiero cambiar mi dirección de facturación", "billing", {},
         ["line1", "city", "postal_code", "country"]),
        ("Bitte Rechnungsadresse ändern", "billing", {},
         ["line1", "city", "postal_code", "country"]),
        ("Поменяйте адрес для счетов, пожалуйста", "billing", {},
         ["line1", "city", "postal_code", "country"]),
        ("my new address is in Berlin", "shipping", {},
         ["line1", "city", "postal_code", "country"]),
        ("Hi, my new address is Main Street 5 in Berlin", "shipping",
         {"line1": "Main Street 5", "city": "Berlin"}, ["postal_code", "country"]),
        ("My address changed!\nSchönhauser Allee 12\n10119 Berlin", "shipping",
         {"line1": "Schönhauser Allee 12", "city": "Berlin", "postal_code": "10119"},
         ["country"]),
        ("my address: Drottninggatan 5. Thanks", "shipping", {"line1": "Drottninggatan 5"},
         ["city", "postal_code", "country"]),
        ("Please change my address, I moved to Berlin. Thanks", "shipping", {},
         ["line1", "city", "postal_code", "country"]),
    ],
)
def test_parse_address_partial_lists_what_is_missing(
        text: str, kind: str, found: dict[str, str], missing: list[str]) -> None:
    result = parse_address(text)
    assert result is not None
    assert result.kind == kind
    assert {f: getattr(result, f) for f in found} == found
    assert result.missing == missing


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Where is my order O-1001?",
        "My email address is anna@example.com",
        "Meine E-Mail-Adresse ist anna@example.de",
        "mi dirección de correo es ana@correo.es",
        "мой адрес электронной почты ivan@yandex.ru",
        "adresse e-mail : marie@exemple.fr",
        "min e-postadress är anna@exempel.se",
        "Refund $15 for O-1001, it arrived broken",
        "Do you ship to Malta?",
        "I moved to Berlin last year",
        "The parcel was delivered to my neighbour",
        "Stop the newsletter please",
        "call me at 555 1234",
    ],
)
def test_parse_address_none_when_no_address_is_named(text: str) -> None:
    assert parse_address(text) is None


def test_address_missing_is_derived_from_the_fields() -> None:
    address = AddressExtraction(kind="shipping", line1="12 Oak Street", country="US",
                                missing=["line1"])
    assert address.missing == ["city", "postal_code"]


# --- preferences -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "changes", "unsupported"),
    [
        # English
        ("stop sending me marketing emails", {"marketing_emails": "off"}, []),
        ("Please unsubscribe me from the newsletter.", {"marketing_emails": "off"}, []),
        ("no more promos!!", {"marketing_emails": "off"}, []),
        ("I don't want any marketing emails anymore", {"marketing_emails": "off"}, []),
        ("opt me out of promotional emails", {"marketing_emails": "off"}, []),
        ("Please remove me from your mailing list", {"marketing_emails": "off"}, []),
        ("Unsubscribe", {"marketing_emails": "off"}, []),
        ("subscribe me to the newsletter", {"marketing_emails": "on"}, []),
        ("I'd like to receive your newsletter again", {"marketing_emails": "on"}, []),
        ("Pls stop the newsletters!!", {"marketing_emails": "off"}, []),
        ("turn on SMS notifications", {"sms_notifications": "on"}, []),
        ("Please enable text message notifications", {"sms_notifications": "on"}, []),
        ("turn SMS notifications off", {"sms_notifications": "off"}, []),
        ("I do NOT want SMS", {"sms_notifications": "off"}, []),
        ("stop texting me", {"sms_notifications": "off"}, []),
        ("don't stop the newsletter", {"marketing_emails": "on"}, []),
        ("switch my account language to German", {"language": "de"}, []),
        ("Change language from English to Spanish", {"language": "es"}, []),
        ("please set my language to french", {"language": "fr"}, []),
        ("please switch my account to German", {"language": "de"}, []),
        ("change the language to German, not English", {"language": "de"}, []),
        ("swich language to germna", {"language": "de"}, []),
        ("I want paperless billing", {"paperless_billing": "on"}, []),
        ("go paperless please", {"paperless_billing": "on"}, []),
        ("Please send paper invoices again", {"paperless_billing": "off"}, []),
        ("stop sending paper invoices", {"paperless_billing": "on"}, []),
        ("I'd like e-invoices instead of paper bills", {"paperless_billing": "on"}, []),
        ("Stop the newsletter and the SMS",
         {"marketing_emails": "off", "sms_notifications": "off"}, []),
        ("Turn off marketing emails and SMS",
         {"marketing_emails": "off", "sms_notifications": "off"}, []),
        ("Turn off the newsletter but turn on SMS",
         {"marketing_emails": "off", "sms_notifications": "on"}, []),
        ("I keep getting promo emails, please stop", {"marketing_emails": "off"}, []),
        ("Newsletter: stop", {"marketing_emails": "off"}, []),
        ("I never signed up for your newsletter, unsubscribe me now",
         {"marketing_emails": "off"}, []),
        # unsupported settings
        ("Turn on dark mode for my account, and turn on SMS notifications",
         {"sms_notifications": "on"}, ["dark mode"]),
        ("Can you enable two-factor authentication?", {}, ["two-factor authentication"]),
        ("make the font size bigger", {}, ["font size"]),
        ("I'd like high contrast mode and no more newsletters",
         {"marketing_emails": "off"}, ["high-contrast mode"]),
        ("Enable 2FA and dark mode", {}, ["two-factor authentication", "dark mode"]),
        ("Schalte den Dunkelmodus ein", {}, ["dark mode"]),
        ("включите тёмную тему", {}, ["dark mode"]),
        ("change the language from English to German, and enable 2FA", {"language": "de"},
         ["two-factor authentication"]),
        # Spanish
        ("Quiero darme de baja del boletín", {"marketing_emails": "off"}, []),
        ("darse de baja del boletín", {"marketing_emails": "off"}, []),
        ("No quiero recibir más correos promocionales", {"marketing_emails": "off"}, []),
        ("no quiero mas correos promocionales", {"marketing_emails": "off"}, []),
        ("Por favor, activen las notificaciones por SMS", {"sms_notifications": "on"}, []),
        ("cambiar el idioma a español", {"language": "es"}, []),
        ("Quiero factura electrónica", {"paperless_billing": "on"}, []),
        # Portuguese
        ("não quero mais e-mails promocionais", {"marketing_emails": "off"}, []),
        ("Quero cancelar a newsletter", {"marketing_emails": "off"}, []),
        ("Ativem as notificações por SMS", {"sms_notifications": "on"}, []),
        ("mudar o idioma para inglês", {"language": "en"}, []),
        ("quero fatura eletrônica", {"paperless_billing": "on"}, []),
        # French
        ("Je ne veux plus recevoir la newsletter", {"marketing_emails": "off"}, []),
        ("ne plus recevoir la newsletter", {"marketing_emails": "off"}, []),
        ("Désabonnez-moi de la newsletter", {"marketing_emails": "off"}, []),
        ("Activez les notifications SMS s'il vous plaît", {"sms_notifications": "on"}, []),
        ("Passez la langue en anglais", {"language": "en"}, []),
        ("Je veux la facture électronique", {"paperless_billing": "on"}, []),
        ("Arrêtez la newsletter mais gardez les SMS",
         {"marketing_emails": "off", "sms_notifications": "on"}, []),
        # German
        ("keine Werbe-E-Mails mehr", {"marketing_emails": "off"}, []),
        ("Bitte den Newsletter abbestellen", {"marketing_emails": "off"}, []),
        ("SMS an", {"sms_notifications": "on"}, []),
        ("SMS-Benachrichtigungen bitte einschalten", {"sms_notifications": "on"}, []),
        ("SMS-Benachrichtigungen aus", {"sms_notifications": "off"}, []),
        ("Ich möchte SMS nicht mehr erhalten", {"sms_notifications": "off"}, []),
        ("Sprache auf Englisch umstellen", {"language": "en"}, []),
        ("Ich möchte eine papierlose Rechnung", {"paperless_billing": "on"}, []),
        ("Bitte wieder Papierrechnungen schicken", {"paperless_billing": "off"}, []),
        # Russian
        ("отпишите от рассылки", {"marketing_emails": "off"}, []),
        ("Не присылайте мне рекламу", {"marketing_emails": "off"}, []),
        ("никаких рассылок", {"marketing_emails": "off"}, []),
        ("больше не присылайте рассылку", {"marketing_emails": "off"}, []),
        ("включите смс-уведомления", {"sms_notifications": "on"}, []),
        ("отключите СМС", {"sms_notifications": "off"}, []),
        ("поменяйте язык на русский", {"language": "ru"}, []),
        ("Хочу электронные счета", {"paperless_billing": "on"}, []),
        # Italian, Polish
        ("Disiscrivetemi dalla newsletter", {"marketing_emails": "off"}, []),
        ("Wypiszcie mnie z newslettera", {"marketing_emails": "off"}, []),
        # mixed languages, several lines
        ("Hi! Please stop the newsletter, und SMS bitte an. Gracias",
         {"marketing_emails": "off", "sms_notifications": "on"}, []),
        ("1) stop marketing emails\n2) turn on SMS\n3) language: German",
         {"marketing_emails": "off", "sms_notifications": "on", "language": "de"}, []),
        ("Please stop sending me newsletters and text messages",
         {"marketing_emails": "off", "sms_notifications": "off"}, []),
        ("Stop all marketing. Keep SMS on.",
         {"marketing_emails": "off", "sms_notifications": "on"}, []),
        ("I'd like German as my language please", {"language": "de"}, []),
        ("Language: Deutsch", {"language": "de"}, []),
        ("idioma: português", {"language": "pt"}, []),
        ("Mein Konto bitte auf Deutsch umstellen", {"language": "de"}, []),
        ("Can I get my invoices by email instead of post?", {"paperless_billing": "on"}, []),
        ("I prefer paper bills", {"paperless_billing": "off"}, []),
        ("I no longer want to receive paper invoices", {"paperless_billing": "on"}, []),
        ("Switch to paperless, please", {"paperless_billing": "on"}, []),
        ("Stop marketing emails! Also switch language to French and turn on SMS.",
         {"marketing_emails": "off", "sms_notifications": "on", "language": "fr"}, []),
        ("Ich will keine Newsletter", {"marketing_emails": "off"}, []),
        ("Bitte keine SMS mehr", {"sms_notifications": "off"}, []),
        ("Quiero recibir el boletín", {"marketing_emails": "on"}, []),
        ("Я хочу получать рассылку", {"marketing_emails": "on"}, []),
        ("Не хочу получать смс", {"sms_notifications": "off"}, []),
        ("don't switch off SMS", {"sms_notifications": "on"}, []),
        ("Please enable dark mode and change my password", {}, ["dark mode"]),
        ("Turn off two-factor authentication", {}, ["two-factor authentication"]),
        # unsure → left out
        ("please don't send me any more emails", {}, []),
        ("Please turn on notifications", {}, []),
        ("I hate your newsletter", {}, []),
        ("Deactivate my account", {}, []),
        ("Turn on SMS. Actually, turn off SMS.", {}, []),
        ("I get too many emails from you", {}, []),
        ("my SMS notifications are not arriving", {}, []),
        ("I don't get SMS anymore", {}, []),
        ("I keep getting SMS", {}, []),
        ("Can you reply in Spanish?", {}, []),
        ("What are your opening hours?", {}, []),
        ("", {}, []),
    ],
)
def test_parse_preference_changes(text: str, changes: dict[str, str],
                                  unsupported: list[str]) -> None:
    assert parse_preference_changes(text) == PreferenceExtraction(
        changes=changes, unsupported=unsupported)


# --- country and language names --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code"),
    [
        *[(n, "DE") for n in ("Germany", "Deutschland", "Allemagne", "Alemania", "Германия",
                              "Alemanha", "Germania", "Niemcy", "Duitsland", "Tyskland", "DE",
                              "de", "DEU", " germany ", "GERMANY", "Germnay")],
        *[(n, "FR") for n in ("France", "Francia", "Frankreich", "França", "Франция",
                              "Francja", "Frankrijk", "Frankrike", "la France", "Frnace")],
        *[(n, "GB") for n in ("United Kingdom", "UK", "U.K.", "Great Britain", "England",
                              "Royaume-Uni", "Reino Unido", "Великобритания", "GB",
                              "Vereinigtes Königreich", "Wielka Brytania")],
        *[(n, "US") for n in ("USA", "U.S.A.", "United States", "Estados Unidos", "EE.UU.",
                              "États-Unis", "США", "Vereinigte Staaten", "the United States",
                              "Untied States")],
        *[(n, "CH") for n in ("Switzerland", "Schweiz", "Suisse", "Svizzera", "die Schweiz",
                              "Swtizerland")],
        *[(n, "PL") for n in ("Polska", "Pologne", "Польша", "Poland", "Polônia")],
        *[(n, "RU") for n in ("Россия", "Russland", "Rússia", "РФ", "Russia")],
        *[(n, "NL") for n in ("Nederland", "Pays-Bas", "the Netherlands", "Holland",
                              "Países Bajos", "Нидерланды")],
        ("Österreich", "AT"), ("Autriche", "AT"), ("España", "ES"), ("Espagne", "ES"),
        ("Brasil", "BR"), ("Brésil", "BR"), ("Україна", "UA"), ("Ukraine", "UA"),
        ("Türkiye", "TR"), ("Turquía", "TR"), ("Japan", "JP"), ("Япония", "JP"),
        ("Australia", "AU"), ("Canada", "CA"), ("Kanada", "CA"), ("Norge", "NO"),
        ("Norwegen", "NO"), ("Sverige", "SE"), ("Suède", "SE"), ("Italia", "IT"),
        ("Włochy", "IT"), ("Portugal", "PT"), ("Ireland", "IE"), ("Éire", "IE"),
        ("Czechia", "CZ"), ("Tschechien", "CZ"), ("Česko", "CZ"), ("Ελλάδα", "GR"),
        ("Belgique", "BE"), ("Danmark", "DK"), ("Suomi", "FI"), ("Magyarország", "HU"),
        ("Eesti", "EE"), ("Lietuva", "LT"), ("Latvija", "LV"), ("Hrvatska", "HR"),
        ("Slovensko", "SK"), ("Slovenija", "SI"), ("Rumänien", "RO"), ("България", "BG"),
        ("Malta", "MT"), ("Chypre", "CY"), ("Luxemburg", "LU"),
    ],
)
def test_country_code(name: str, code: str) -> None:
    assert country_code(name) == code


@pytest.mark.parametrize("name", ["Atlantis", "Berlin", "", "XX", "Brasilia", "Austin", "Paris",
                                  "Texas", "Moskau"])
def test_country_code_unknown(name: str) -> None:
    assert country_code(name) is None


@pytest.mark.parametrize(
    ("name", "code"),
    [
        *[(n, "de") for n in ("German", "Deutsch", "alemán", "немецкий", "allemand", "alemão",
                              "tedesco", "niemiecki", "Duits", "tyska", "de", "DE", "de-AT",
                              "deu", "ger", "Germna", "German language")],
        *[(n, "en") for n in ("English", "inglés", "Englisch", "anglais", "inglês", "inglese",
                              "английский", "angielski", "Engels", "engelska", "en", "EN",
                              "en-GB", "en_US", "eng", "Englsih", "ENGLISH")],
        *[(n, "es") for n in ("Spanish", "Español", "castellano", "spanisch", "espagnol",
                              "испанский", "es", "Spansih")],
        *[(n, "ru") for n in ("русский", "Russian", "russe", "ru", "Russisch", "русском")],
        *[(n, "pt") for n in ("Português", "portugues", "Brazilian Portuguese", "pt-BR",
                              "Portugese")],
        ("français", "fr"), ("French", "fr"), ("italiano", "it"), ("polski", "pl"),
        ("Nederlands", "nl"), ("svenska", "sv"), ("українська", "uk"), ("Türkçe", "tr"),
        ("日本語", "ja"), ("Chinese", "zh"), ("Korean", "ko"),
    ],
)
def test_language_code(name: str, code: str) -> None:
    assert language_code(name) == code


@pytest.mark.parametrize("name", ["Klingon", "", "xx", "Elvish", "zz-ZZ"])
def test_language_code_unknown(name: str) -> None:
    assert language_code(name) is None


# --- the models ------------------------------------------------------------------------


def test_models_are_frozen() -> None:
    amount = Amount(cents=1500, currency="USD", raw="$15")
    with pytest.raises(pydantic.ValidationError):
        amount.cents = 1  # type: ignore[misc]
    address = AddressExtraction(kind="billing")
    with pytest.raises(pydantic.ValidationError):
        address.kind = "shipping"  # type: ignore[misc]

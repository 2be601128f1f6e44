"""Amounts in every language the router accepts, read as a person would — or asked about.

The table was written from the customer's side, before reading the extractor: each row
is a message and either the one amount a person would read in it (cents, ISO 4217
currency) or `ASK` where a person could not be sure how much the customer wants (a
range, "half", two different amounts, a number spelled out in words) and the refund
handler must ask instead of guessing. Forms per language: decimal comma, thousands
separators (dot, space, no-break space), the currency before or after, the currency's
name next to the digits ("euros", "złotych", "рублей"), diacritics left out.

The accepted languages are the `lang` values of `datasets/routes/` (ISO 639-1).
"""

from __future__ import annotations

import pytest

from handlers.extract import AmountReading, read_amounts
from tests.handlers.extract.test_preferences_by_language import accepted_languages

ASK = "ask"

# language -> [(message, (cents, currency) a person reads, or ASK)]
TABLE: dict[str, list[tuple[str, tuple[int, str | None] | str]]] = {
    "en": [
        ("Please refund $15.99 for the broken mug from O-1002", (1599, "USD")),
        ("refund me £12.50", (1250, "GBP")),
        ("I want my $1,250 back", (125000, "USD")),
        ("refund 20 euros please", (2000, "EUR")),
        ("i paid 45 bucks, refund it", (4500, "USD")),
        ("€9.99 back please", (999, "EUR")),
        ("refund 15 or 20 dollars, whatever is fair", ASK),
        ("refund 15-20 dollars", ASK),
        ("refund half of what I paid", ASK),
    ],
    "es": [
        ("Reembolsen 15,50 € del pedido O-1002", (1550, "EUR")),
        ("Quiero que me devuelvan 20 euros", (2000, "EUR")),
        ("Me cobraron 1.250,00 € de más", (125000, "EUR")),
        ("devuelvanme 12€ porfa", (1200, "EUR")),
        ("son 49,99 euros", (4999, "EUR")),
        ("devolución de 80 dólares", (8000, "USD")),
        ("devuélvanme entre 15 y 20 euros", ASK),
        ("reembolsen la mitad", ASK),
        # number words: only English ones are read; elsewhere the handler asks
        ("devuélvanme quince euros", ASK),
    ],
    "de": [
        ("Bitte erstatten Sie 15,50 € für Bestellung O-1002", (1550, "EUR")),
        ("Ich möchte 20 Euro zurück", (2000, "EUR")),
        ("Mir wurden 1.299,00 € zu viel abgebucht", (129900, "EUR")),
        ("EUR 49,90 bitte erstatten", (4990, "EUR")),
        ("12,- € zurück bitte", (1200, "EUR")),
        ("1.500 Euro zurück", (150000, "EUR")),
        ("15.50 € zurück bitte", (1550, "EUR")),
        ("so 15 bis 20 Euro zurück", ASK),
        ("die Hälfte zurück bitte", ASK),
        ("zwanzig Euro zurück", ASK),
    ],
    "fr": [
        ("Remboursez-moi 15,50 € pour la commande O-1002", (1550, "EUR")),
        ("je veux récupérer mes 20 euros", (2000, "EUR")),
        ("1\u202f250,00 € prélevés en trop", (125000, "EUR")),
        ("1\u00a0250,00 € prélevés en trop", (125000, "EUR")),
        ("remboursez 15€50 svp", (1550, "EUR")),
        ("rembourser 9,99 EUR", (999, "EUR")),
        ("on m'a débité 30 euros deux fois", (3000, "EUR")),
        ("remboursez entre 15 et 20 €", ASK),
        ("remboursez la moitié du prix", ASK),
    ],
    "pt": [
        ("Quero o reembolso de R$ 80,00 do pedido O-1002", (8000, "BRL")),
        ("devolvam 49,90 reais", (4990, "BRL")),
        ("reembolsem 15,50 €", (1550, "EUR")),
        ("me cobraram R$1.250,00 a mais", (125000, "BRL")),
        ("quero 20 euros de volta", (2000, "EUR")),
        ("reembolso entre 15 e 20 euros", ASK),
        ("devolvam metade do valor", ASK),
    ],
    "it": [
        ("Rimborsatemi 15,50 € per l'ordine O-1002", (1550, "EUR")),
        ("voglio indietro 20 euro", (2000, "EUR")),
        ("€ 1.200,00 addebitati per errore", (120000, "EUR")),
        ("rimborso di 9,99 EUR", (999, "EUR")),
        ("mi avete preso 35€ due volte", (3500, "EUR")),
        ("rimborsatemi tra 15 e 20 euro", ASK),
        ("rimborsatemi metà del prezzo", ASK),
    ],
    "ru": [
        ("Верните 1 500 рублей за заказ O-1002", (150000, "RUB")),
        ("верните 1500 руб.", (150000, "RUB")),
        ("списали 350 ₽ дважды", (35000, "RUB")),
        ("верните 99,90 руб", (9990, "RUB")),
        ("верните мне 200 р. за чехол", (20000, "RUB")),
        ("верните 20 евро", (2000, "EUR")),
        ("верните 15 долларов", (1500, "USD")),
        ("верните 500-600 рублей", ASK),
        ("верните половину", ASK),
        ("верните пятьсот рублей", ASK),
    ],
    "pl": [
        ("Proszę o zwrot 49,99 zł za zamówienie O-1002", (4999, "PLN")),
        ("chcę zwrotu 100 złotych", (10000, "PLN")),
        ("zwróćcie 1 200 zł", (120000, "PLN")),
        ("PLN 30 do zwrotu", (3000, "PLN")),
        ("oddajcie 20 zl", (2000, "PLN")),
        ("zwrot 25 złote", (2500, "PLN")),
        ("zwrot 20-30 zł", ASK),
        ("zwróćcie połowę", ASK),
    ],
    "nl": [
        ("Graag € 15,50 terug voor bestelling O-1002", (1550, "EUR")),
        ("ik wil 20 euro terug", (2000, "EUR")),
        ("€15,- terugstorten aub", (1500, "EUR")),
        ("er is 1.250,00 euro afgeschreven", (125000, "EUR")),
        ("terugbetaling van EUR 9,99", (999, "EUR")),
        ("tussen de 15 en 20 euro terug", ASK),
        ("de helft terug graag", ASK),
    ],
    "sv": [
        ("Jag vill ha tillbaka 350 kr för order O-1002", (35000, "SEK")),
        ("återbetala 199 kronor", (19900, "SEK")),
        ("ni drog 1 250 kr två gånger", (125000, "SEK")),
        ("49,50 kr tillbaka tack", (4950, "SEK")),
        ("SEK 200 tillbaka", (20000, "SEK")),
        ("aterbetala 99 kronor", (9900, "SEK")),
        ("150-200 kr tillbaka", ASK),
        ("hälften tillbaka tack", ASK),
    ],
    "tr": [
        ("O-1002 siparişi için 150 TL iade edin", (15000, "TRY")),
        ("₺150 iade istiyorum", (15000, "TRY")),
        ("49,90 TL iade", (4990, "TRY")),
        ("1.250 TL fazla çekildi", (125000, "TRY")),
        ("200 lira geri istiyorum", (20000, "TRY")),
        ("250 Türk lirası iade edin", (25000, "TRY")),
        ("100-150 TL arası iade", ASK),
        ("yarısını iade edin", ASK),
    ],
    "uk": [
        ("Поверніть 500 грн за замовлення O-1002", (50000, "UAH")),
        ("поверніть 1 200 гривень", (120000, "UAH")),
        ("₴300 поверніть", (30000, "UAH")),
        ("99,50 грн повернення", (9950, "UAH")),
        ("поверніть 20 євро", (2000, "EUR")),
        ("поверніть 500-600 грн", ASK),
        ("поверніть половину", ASK),
    ],
    "cs": [
        ("Vraťte mi prosím 500 Kč za objednávku O-1002", (50000, "CZK")),
        ("strhli jste mi 1 200 Kč dvakrát", (120000, "CZK")),
        ("99,50 Kč zpět prosím", (9950, "CZK")),
        ("chci zpátky 300 korun", (30000, "CZK")),
        ("vratte mi 150 Kc", (15000, "CZK")),
        ("vraťte mi 20 eur", (2000, "EUR")),
        ("€15 zpět prosím", (1500, "EUR")),
        ("vraťte mi 200-300 Kč", ASK),
        ("vraťte mi polovinu", ASK),
    ],
}

# The edges of the rules the table needs: what must still be read as one amount next to
# an order id, a half or a count, and the other shapes of a range or a number in words.
EDGES: list[tuple[str, str, tuple[int, str | None] | str]] = [
    ("en", "refund O-1002 and €15 for the lid", (1500, "EUR")),
    ("en", "the box arrived half crushed, refund $20", (2000, "USD")),
    ("en", "bought 2 and paid 30 euros", (3000, "EUR")),
    ("fr", "15€50 et encore 15€50", (1550, "EUR")),
    ("ru", "верните от 500 до 600 рублей", ASK),
    ("pl", "zwrot od 20 do 30 zł", ASK),
    ("tr", "yüz lira iade edin", ASK),
    ("uk", "поверніть п'ятсот гривень", ASK),
    ("uk", "поверніть 20 доларів", (2000, "USD")),
    ("tr", "iade 49,90 lütfen", (4990, None)),  # a decimal after a refund word
]

CASES = [pytest.param(lang, text, expected, id=f"{lang}-{i:02d}")
         for lang, rows in TABLE.items() for i, (text, expected) in enumerate(rows)]
CASES += [pytest.param(lang, text, expected, id=f"{lang}-edge-{i:02d}")
          for i, (lang, text, expected) in enumerate(EDGES)]


def _refund_handler_asks(reading: AmountReading) -> bool:
    """What `handlers.refund` asks about: anything unreadable, or more than one amount."""
    return bool(reading.unreadable) or len(reading.amounts) > 1


@pytest.mark.parametrize(("lang", "text", "expected"), CASES)
def test_amounts_as_a_person_reads_them(lang: str, text: str,
                                        expected: tuple[int, str | None] | str) -> None:
    reading = read_amounts(text)
    if expected == ASK:
        assert _refund_handler_asks(reading), reading
    else:
        assert not reading.unreadable, reading
        assert [(a.cents, a.currency) for a in reading.amounts] == [expected]


def test_table_covers_every_language_the_router_accepts() -> None:
    assert accepted_languages() == set(TABLE)

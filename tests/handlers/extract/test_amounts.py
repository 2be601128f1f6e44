"""Amounts: what a customer's text says about money, read or asked about, never guessed.

`READINGS` is the table of real-world forms for `read_amounts`: each row is a text, the
distinct amounts it states (cents, currency) and the amount-like pieces it could not
read. A row with anything unreadable is one the refund handler asks about; a row with
neither is a full refund. The older per-function tables below check `parse_amounts`.
"""

from __future__ import annotations

import pytest

from handlers.extract import Amount, AmountReading, InvalidAmount, parse_amounts, read_amounts
from router.errors import InvalidInput

# (text, distinct amounts, unreadable pieces)
READINGS: list[tuple[str, list[tuple[int, str | None]], list[str]]] = [
    # the attacks: each was read as "no amount" (a full refund) or as another number
    ("refund just $.50", [(50, "USD")], []),
    ("please refund $5,00000", [], ["$5,00000"]),
    ("refund $1e5 please", [], ["$1e5"]),
    ("refund ＄15", [(1500, "USD")], []),
    ("refund ＄１５.５０", [(1550, "USD")], []),
    ("refund fifteen dollars", [(1500, "USD")], []),
    ("refund me 20.00", [(2000, None)], []),
    ("refund $15.5.5", [], ["$15.5.5"]),
    ("refund $15k", [], ["$15k"]),
    ("refund $2OO", [], ["$2OO"]),
    # decimals, separators, locales
    ("refund $15.50 please", [(1550, "USD")], []),
    ("refund $.5", [(50, "USD")], []),
    ("€ 12,50", [(1250, "EUR")], []),
    ("12,50 €", [(1250, "EUR")], []),
    ("1.250,00 €", [(125000, "EUR")], []),
    ("1,250.00", [(125000, None)], []),
    ("$1,250.00", [(125000, "USD")], []),
    ("1 250,00 €", [(125000, "EUR")], []),
    ("£7", [(700, "GBP")], []),
    ("7 GBP", [(700, "GBP")], []),
    ("CHF 45.-", [(4500, "CHF")], []),
    ("300 kr", [(30000, "SEK")], []),
    ("25 zł", [(2500, "PLN")], []),
    ("R$ 80,00", [(8000, "BRL")], []),
    ("1500 руб.", [(150000, "RUB")], []),
    ("C$20", [(2000, "CAD")], []),
    ("￥3000", [(300000, "JPY")], []),
    ("Erstattung von 15,50 bitte", [(1550, None)], []),
    ("reembolso de 15,50", [(1550, None)], []),
    # number words
    ("refund twenty-five dollars", [(2500, "USD")], []),
    ("a hundred and twenty euros", [(12000, "EUR")], []),
    ("two hundred fifty bucks", [(25000, "USD")], []),
    ("I only want twenty pounds back", [(2000, "GBP")], []),
    ("fifteen twenty dollars", [], ["fifteen twenty dollars"]),
    ("quince dólares, por favor", [], ["quince dólares"]),
    ("ihr schuldet mir zwanzig Euro", [], ["zwanzig Euro"]),
    ("Rendez-moi les dix euros de trop", [], ["dix euros"]),
    ("refund a few dollars", [], ["few dollars"]),
    ("refund fifteen", [], ["fifteen"]),
    ("Bitte erstatten Sie die Hälfte", [], ["Hälfte"]),
    ("refund half of it", [], ["half"]),
    # bare numbers after a refund word, percentages, cents, ranges, lone signs
    ("refund 20", [], ["20"]),
    ("refund me 20", [], ["20"]),
    ("please refund 50%", [], ["50"]),
    ("refund 50 cents", [], ["50 cents"]),
    ("refund $15 and 50 cents", [(1500, "USD")], ["50 cents"]),
    ("refund 15-20 €", [], ["15-20 €"]),
    ("refund $15-$20", [(1500, "USD")], ["$20"]),
    ("refund $ for the teapot", [], ["$"]),
    ("Верните 1 200 за чехол", [], ["1"]),
    # two different amounts (ask), the same one twice (one amount)
    ("refund $10 or maybe $15?", [(1000, "USD"), (1500, "USD")], []),
    ("15 € ($17)", [(1500, "EUR"), (1700, "USD")], []),
    ("refund $15, yes $15.00", [(1500, "USD")], []),
    ("€15 and again 15 €", [(1500, "EUR")], []),
    ("$15 USD", [(1500, "USD")], []),
    # not money at all: a full refund, nothing to ask
    ("Please refund the full amount for order O-1001.", [], []),
    ("refund for order 1234", [], []),
    ("I was charged 2 times for O-1001, refund it", [], []),
    ("it weighs 2.50 kg", [], []),
    ("ordered on 12.05.2024, delivered 2024-05-12", [], []),
    ("call me on +49 30 1234567", [], []),
    ("Schönhauser Allee 12, 10119 Berlin", [], []),
    ("5 pounds of flour", [], []),
    ("Please refund them in dollars.", [], []),
    ("refund the 2e débit", [], []),
    ("I paid 12.05.2024 and want my money back", [], []),
    ("1) refund 2) newsletter", [], []),
    ("el importe del pedido", [], []),
    ("the amount due is $15", [(1500, "USD")], []),
    ("I emailed about my refund three times", [], []),
]


@pytest.mark.parametrize(("text", "amounts", "unreadable"), READINGS,
                         ids=[row[0] for row in READINGS])
def test_read_amounts(text: str, amounts: list[tuple[int, str | None]],
                      unreadable: list[str]) -> None:
    reading = read_amounts(text)
    assert [(a.cents, a.currency) for a in reading.amounts] == amounts
    assert reading.unreadable == unreadable
    assert reading.amount_like == bool(amounts or unreadable)


def test_the_table_covers_enough_real_world_forms() -> None:
    assert len(READINGS) >= 40
    asked = [t for t, amounts, unreadable in READINGS if unreadable or len(amounts) > 1]
    assert len(asked) >= 20


@pytest.mark.parametrize(("text", "full"), [
    ("Please refund the full amount.", True),
    ("refund it in full", True),
    ("Bitte erstatten Sie mir den vollen Betrag.", True),
    ("Quero o reembolso total, por favor.", True),
    ("Верните деньги полностью", True),
    ("the box was full of broken glass", False),
    ("refund $15", False),
])
def test_asks_full(text: str, full: bool) -> None:
    assert read_amounts(text).asks_full is full


@pytest.mark.parametrize("text", ["-$20", "refund $0", "zero dollars", "a million dollars",
                                  "refund -15.50", "$999,999,999"])
def test_read_amounts_refuses_impossible_amounts_like_parse(text: str) -> None:
    with pytest.raises(InvalidAmount):
        read_amounts(text)


def test_fullwidth_text_keeps_its_normalised_raw() -> None:
    assert read_amounts("refund ＄１５").amounts == [Amount(cents=1500, currency="USD",
                                                          raw="$15")]


def test_reading_is_frozen() -> None:
    reading = AmountReading()
    assert not reading.amount_like and not reading.asks_full
    with pytest.raises(ValueError):
        reading.asks_full = True  # type: ignore[misc]


# --- parse_amounts ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$15", [(1500, "USD")]),
        ("$15.00", [(1500, "USD")]),
        ("$ 15", [(1500, "USD")]),
        ("US$15", [(1500, "USD")]),
        ("15 dollars", [(1500, "USD")]),
        ("15 Dollars", [(1500, "USD")]),
        ("15 bucks", [(1500, "USD")]),
        ("15 USD", [(1500, "USD")]),
        ("15usd", [(1500, "USD")]),
        ("USD 15.50", [(1550, "USD")]),
        ("15$", [(1500, "USD")]),
        ("15 dólares", [(1500, "USD")]),
        ("€15", [(1500, "EUR")]),
        ("15 €", [(1500, "EUR")]),
        ("15€", [(1500, "EUR")]),
        ("15\u00a0€", [(1500, "EUR")]),
        ("15,50 €", [(1550, "EUR")]),
        ("15,5 €", [(1550, "EUR")]),
        ("EUR 15", [(1500, "EUR")]),
        ("15 EUR", [(1500, "EUR")]),
        ("15 euros", [(1500, "EUR")]),
        ("15 Euro", [(1500, "EUR")]),
        ("15 евро", [(1500, "EUR")]),
        ("15,- €", [(1500, "EUR")]),
        ("1.234,56 €", [(123456, "EUR")]),
        ("€1.234,56", [(123456, "EUR")]),
        ("1 234,56 €", [(123456, "EUR")]),
        ("1\u202f234,56 €", [(123456, "EUR")]),
        ("$1,234.56", [(123456, "USD")]),
        ("$1,234", [(123400, "USD")]),
        ("1,234.56", [(123456, None)]),
        ("£20", [(2000, "GBP")]),
        ("20 pounds", [(2000, "GBP")]),
        ("GBP 20.99", [(2099, "GBP")]),
        ("R$ 80", [(8000, "BRL")]),
        ("R$80,00", [(8000, "BRL")]),
        ("80 reais", [(8000, "BRL")]),
        ("1500 руб.", [(150000, "RUB")]),
        ("1500 рублей", [(150000, "RUB")]),
        ("1500 ₽", [(150000, "RUB")]),
        ("1500р", [(150000, "RUB")]),
        ("1 500 руб.", [(150000, "RUB")]),
        ("1.500 руб.", [(150000, "RUB")]),
        ("50 zł", [(5000, "PLN")]),
        ("50 zl", [(5000, "PLN")]),
        ("50 PLN", [(5000, "PLN")]),
        ("50 złotych", [(5000, "PLN")]),
        ("350 kr", [(35000, "SEK")]),
        ("350 kronor", [(35000, "SEK")]),
        ("SEK 350", [(35000, "SEK")]),
        ("350:-", [(35000, "SEK")]),
        ("CHF 20", [(2000, "CHF")]),
        ("$100,000", [(10_000_000, "USD")]),
        ("refund 15.50 please", [(1550, None)]),
        ("Erstattung von 15,50 bitte", [(1550, None)]),
        ("возврат 1500,00", [(150000, None)]),
        ("I paid $20 but was charged $35.50", [(2000, "USD"), (3550, "USD")]),
        ("15 € ($17)", [(1500, "EUR"), (1700, "USD")]),
        ("$15 USD", [(1500, "USD")]),
        ("€15 €20", [(1500, "EUR"), (2000, "EUR")]),
        ("Bitte erstatten Sie 49,99 € für O-1001", [(4999, "EUR")]),
        ("Refund me $15 for order O-1001 placed on 12.05.2024, call +1 555 123 4567",
         [(1500, "USD")]),
        ("I was charged 29.99 EUR twice!!", [(2999, "EUR")]),
        ("devuélvanme 20 euros del pedido O-1001", [(2000, "EUR")]),
        ("верните 1500 руб. за заказ O-1001", [(150000, "RUB")]),
        ("reembolso de R$ 80,00, obrigado", [(8000, "BRL")]),
        ("order O-1001 350 kr", [(35000, "SEK")]),
        ("Hi,\nthe total was\n$42.10\nthanks", [(4210, "USD")]),
        ("- $20 shipping\n- $5 tax", [(2000, "USD"), (500, "USD")]),
        ("Hi - $20 was charged twice", [(2000, "USD")]),
        ("my card ending -1234 was charged $15", [(1500, "USD")]),
        ("Total: 1 299,00 €", [(129900, "EUR")]),
        ("Bestellung vom 01.02.2024 über 59,90 EUR", [(5990, "EUR")]),
        ("3 pcs at $4.50 each", [(450, "USD")]),
        ("refund 5 pounds", [(500, "GBP")]),
    ],
)
def test_parse_amounts(text: str, expected: list[tuple[int, str | None]]) -> None:
    assert [(a.cents, a.currency) for a in parse_amounts(text)] == expected


@pytest.mark.parametrize(
    ("text", "raw"),
    [("1500 руб.", "1500 руб."), ("R$ 80", "R$ 80"), ("please refund $15.00!", "$15.00"),
     ("refund 15.50 please", "15.50")],
)
def test_parse_amounts_keeps_raw(text: str, raw: str) -> None:
    assert [a.raw for a in parse_amounts(text)] == [raw]


@pytest.mark.parametrize(
    "text",
    [
        "call me on +49 30 1234567",
        "my number is 555-123-4567",
        "ordered on 12.05.2024",
        "delivered 2024-05-12",
        "on 05/12/2024 at 15:30",
        "Schönhauser Allee 12, 10119 Berlin",
        "Drottninggatan 5, 111 51 Stockholm",
        "Rua Augusta 100, 1100-053 Lisboa",
        "ул. Тверская 7, 125009 Москва",
        "order O-1001",
        "refund 20",
        "I bought 3 items",
        "50% off",
        "version 1.2.3",
        "it weighs 2.50 kg",
        "15-20 €",
        "refund for order 1234",
        "5 pounds of flour",
        "discount -10%",
        "Temperature was -5 C",
        "ISBN 978-3-16-148410-0",
        "zip 10001-1234",
        "-- \nAnna\n+49 170 1234567",
        "",
    ],
)
def test_parse_amounts_ignores_numbers_that_are_not_money(text: str) -> None:
    assert parse_amounts(text) == []


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("-$20", r"'-\$20' is negative"),
        ("$-5", r"'\$-5' is negative"),
        ("refund -20 € please", "'-20 €' is negative"),
        ("−20 €", "negative"),
        ("minus 20 dollars", "'minus 20 dollars' is negative"),
        ("menos 20 euros", "negative"),
        ("минус 500 руб.", "negative"),
        ("refund -15.50", "negative"),
        ("$0", r"'\$0' is zero"),
        ("0 €", "zero"),
        ("0,00 EUR", "zero"),
        ("$0.00", "zero"),
        ("$1,000,000", r"'\$1,000,000' is above the limit of 100,000 USD"),
        ("150000 €", "above the limit"),
        ("100000.01 USD", "above the limit"),
        ("15 000 000 руб.", "above the limit of 10,000,000 RUB"),
        ("refund $15 and -$5", "negative"),
        ("−€5", "negative"),
        ("US$ 1.000.000", "above the limit"),
    ],
)
def test_parse_amounts_rejects_impossible_amounts(text: str, match: str) -> None:
    with pytest.raises(InvalidAmount, match=match):
        parse_amounts(text)


def test_invalid_amount_is_a_value_error_with_an_api_code() -> None:
    with pytest.raises(ValueError) as info:
        parse_amounts("-$20")
    assert isinstance(info.value, InvalidInput)
    assert isinstance(info.value, InvalidAmount)
    assert info.value.code == "invalid_amount"
    assert info.value.raw == "-$20"

from __future__ import annotations

import pytest

from router.models.local.text.entities import normalise_entities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("this is ana.novak@example.com", "this is  emailaddr "),
        ("order O-1001 and #O-22 and o1234", "order  orderid  and #O-0 and  orderid "),
        ("see https://shop.example/x?y=1 now", "see  urladdr  now"),
        ("look at WWW.Shop.example/mugs", "look at  urladdr "),
        ("no link here, no digits, no at-sign", "no link here, no digits, no at-sign"),
        ("refund $15.50 for 3 mugs", "refund $0.0 for 0 mugs"),
        ("Schönhauser Allee 12, 10119 Berlin", "Schönhauser Allee 0, 0 Berlin"),
    ],
)
def test_entities_become_placeholders(text: str, expected: str) -> None:
    assert normalise_entities(text) == expected

"""The output check on the agent's final text."""

from __future__ import annotations

import pytest

from handlers.fallback.output_check import check_output


@pytest.mark.parametrize(("text", "problem"), [
    ("I've refunded your order, it's done.", "promises a refund"),
    ("Your refund has been issued to your card.", "promises a refund"),
    ("You will get your money back tomorrow.", "promises a refund"),
    ("We have cancelled your order.", "promises a refund or a change"),
    ("I have updated your shipping address.", "promises a refund or a change"),
    ("That's 45 dollars in total.", "states an amount"),
    ("A €20 voucher is on its way.", "states an amount"),
    ("Order O-2002 was delivered on Monday.", "not on the customer's account"),
    ("I've asked ben.ortiz@example.com about it.", "another e-mail"),
    ("   ", "empty reply"),
])
def test_unsafe_replies_fail(text: str, problem: str) -> None:
    check = check_output(text, own_order_ids=["O-1004"], own_email="ana.novak@example.com")
    assert not check.ok and any(problem in p for p in check.problems), check.problems


@pytest.mark.parametrize("text", [
    "Your espresso machine (O-1004) has shipped.",
    "Returns are free within 30 days of delivery; start them under My account.",
    "A colleague will look into it and reply here, ana.novak@example.com.",
    "It has been shipped.",
])
def test_safe_replies_pass(text: str) -> None:
    check = check_output(text, own_order_ids=["o-1004"], own_email="Ana.Novak@example.com")
    assert check.ok, check.problems

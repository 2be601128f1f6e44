from __future__ import annotations

import pytest

from handlers.observation import fail, success, warning
from handlers.replies import TEMPLATES, compose, format_money, render

RECEIPT = {"operation": "op-1", "order_id": "O-2002", "amount_cents": 35000, "refund_id": 2,
           "replayed": False}


def test_held_reply_says_nothing_was_issued() -> None:
    reply = render(warning("refund_held", "held", **{**RECEIPT, "refund_id": None}))
    assert "$350.00" in reply and "O-2002" in reply
    assert "on hold" in reply and "Nothing has been issued yet" in reply


def test_approved_reply_says_issued_with_the_refund_id() -> None:
    reply = render(success("refund_approved", "issued", **RECEIPT))
    assert reply == ("A supervisor approved your refund of $350.00 for order O-2002. "
                     "It has been issued (refund 2).")


def test_replayed_receipt_says_nothing_more_was_refunded() -> None:
    reply = render(success("refund_issued", "issued", **{**RECEIPT, "replayed": True}))
    assert "already issued (refund 2)" in reply and "nothing more" in reply


def test_internal_observations_are_not_told() -> None:
    assert render(success("refund_allowed", "ok", amount_cents=1)) is None
    assert compose([success("customer_identified", "ok"),
                    fail("order_missing", "?", retry=False, stop=True)]).startswith("Which order")


def test_preference_lists() -> None:
    reply = compose([
        success("preferences_updated", "ok",
                changes={"marketing_emails": "off", "language": "de"}),
        fail("preferences_unsupported", "no", retry=False, stop=False,
             unsupported=["dark mode"]),
    ])
    assert "marketing e-mails are off and the language is German (de)" in reply
    assert '"dark mode"' in reply


@pytest.mark.parametrize("cents, text", [(1500, "$15.00"), (123456, "$1,234.56"), (5, "$0.05")])
def test_format_money(cents: int, text: str) -> None:
    assert format_money(cents) == text


SAMPLE = {
    "email": "x@example.com", "what": "refunds", "order_ids": ["O-1", "O-2"],
    "amounts_cents": [100, 200], "order_id": "O-1", "raw": "€15", "item": "Teapot",
    "order_status": "shipped", "delivered_on": "2026-01-01", "days_since_delivery": 40,
    "window_days": 30, "refunded_cents": 100, "amount_cents": 100, "remaining_cents": 50,
    "refund_id": 3, "operation": "op-1", "kind": "shipping", "missing": ["city"],
    "line1": "1 A St", "postal_code": "1", "city": "C", "country": "DE",
    "changes": {"language": "es"}, "unchanged": {"sms_notifications": "on"},
    "unsupported": ["dark mode"], "answer": "Returns are free.", "placed_on": "2026-01-01",
    "text": "Returns are free.", "ttl_minutes": 10, "attempts_left": 4,
    "unreadable": ["$1e5"], "fields": ["street and house number"], "mentioned": ["$20.00"],
}


@pytest.mark.parametrize("code", sorted(c for c in TEMPLATES if not c.endswith("_replayed")))
def test_every_template_fills_from_artifacts(code: str, caplog: pytest.LogCaptureFixture) -> None:
    reply = render(success(code, "x", **SAMPLE))
    assert reply and "{" not in reply
    assert "missing" not in caplog.text


def test_a_missing_field_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    assert render(success("refund_issued", "x")) is not None
    assert "missing" in caplog.text


@pytest.mark.parametrize("code", sorted(c for c in TEMPLATES if not c.endswith("_replayed")))
def test_no_template_echoes_markup(code: str) -> None:
    """Whatever an artifact holds, a reply carries no tag, entity or script URL."""
    attack = "<script>alert(1)</script>&lt;b&gt;&#60;javascript:x\x07"
    hostile = {k: (attack if isinstance(v, str)
                   else [attack] if isinstance(v, list) and isinstance(v[0], str) else v)
               for k, v in SAMPLE.items()}
    hostile["changes"] = {"language": attack}
    reply = render(warning(code, "x", **hostile))
    assert reply is not None
    for piece in ("<", ">", "&lt", "&#", "javascript:", "\x07"):
        assert piece not in reply


def test_closed_refund_reply_says_nothing_was_issued() -> None:
    reply = render(warning("no_longer_refundable", "closed", **{**RECEIPT, "refund_id": None}))
    assert "$350.00" in reply and "O-2002" in reply and "can no longer be issued" in reply
    assert "Nothing has been issued" in reply and "op-1" in reply


def test_unreadable_amount_reply_quotes_what_it_could_not_read() -> None:
    reply = render(fail("amount_unreadable", "?", retry=False, stop=True, order_id="O-1001",
                        unreadable=["$1e5", "refund 20"]))
    assert reply.startswith('I couldn\'t read "$1e5" and "refund 20" as an amount.')
    assert "O-1001" in reply and "?" in reply and "Nothing has been refunded" in reply

"""Plain text: what may be stored as an address field, and what a reply may show."""

from __future__ import annotations

import pytest

from handlers.extract import address_field_problem, markup_problem, strip_markup


@pytest.mark.parametrize(("value", "problem"), [
    ("Schönhauser Allee 12", None),
    ("ул. Тверская, д. 7", None),
    ("Flat 2/B, 12 O’Connell St.", None),
    ("Apt #4 (rear), 3° piso", None),
    ("AT&T Plaza 1", None),
    ("Rua Augusta 100", None),
    ("<script>alert(1)</script> Street 12", "markup"),
    ("Street 12 <b>", "markup"),
    ("&lt;b&gt;Berlin", "markup"),
    ("&lt", "markup"),
    ("Main St &#60;", "markup"),
    ("&#x3c;x", "markup"),
    ("javascript:alert(1)", "markup"),
    ("JavaScript : alert(1)", "markup"),
    ("img onerror=alert(1)", "markup"),
    ("Ber\x07lin", "control_characters"),
    ("Main\u200b Street", "control_characters"),
    ("Main\u202e Street", "control_characters"),
    ("Street {{7*7}}", "characters"),
    ("Street 12; DROP TABLE", "characters"),
    ("Street 12 \U0001f600", "characters"),
    ("Street $12", "characters"),
])
def test_address_field_problem(value: str, problem: str | None) -> None:
    assert address_field_problem(value) == problem


@pytest.mark.parametrize(("text", "problem"), [
    ("Returns are free within 30 days; see our FAQ!", None),
    ("Smith & Sons {ok}", None),
    ("<i>hi</i>", "markup"),
    ("tab\there", "control_characters"),
])
def test_markup_problem_leaves_ordinary_punctuation_alone(text: str,
                                                          problem: str | None) -> None:
    assert markup_problem(text) == problem


@pytest.mark.parametrize(("text", "plain"), [
    ("Returns are free.  Really.", "Returns are free.  Really."),  # plain text unchanged
    ("<script>alert(1)</script> Street 12", "alert(1) Street 12"),
    ("&lt;b&gt;bold", "b bold"),
    ("click javascript:go()", "click go()"),
    ("a\x07b", "a b"),
    ("line one\nline <b>two</b>", "line one\nline two"),
])
def test_strip_markup(text: str, plain: str) -> None:
    assert strip_markup(text) == plain

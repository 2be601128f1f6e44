from __future__ import annotations

from handlers.flow import FlowInput


def _digits(text: str) -> list[str]:
    return [c for c in text if c.isdigit()]


def test_facts_come_from_the_newest_message_that_has_them() -> None:
    flow = FlowInput(case_id="c-1", text="no digits", earlier_texts=["1 first", "2 second"])
    assert flow.texts_newest_first() == ["no digits", "2 second", "1 first"]
    assert flow.first_found(_digits) == ["2"]
    assert FlowInput(case_id="c-1", text="9").first_found(_digits) == ["9"]
    assert FlowInput(case_id="c-1", text="none").first_found(_digits) == []

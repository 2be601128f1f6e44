"""The conversation use case on real services: a message's case turn and its decision-log
row commit in one transaction, or neither does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError

from handlers.services.cases import case_messages, cases
from router.app.bootstrap import build_services
from router.app.conversation import IncomingMessage
from router.app.services import Services
from router.settings import Settings
from router.storage.decision_log import decisions
from tests.messages import ANA, TEAPOT
from tests.tables import row_counts


@pytest.fixture
def services(settings: Settings, any_db_url: str) -> Iterator[Services]:
    built = build_services(settings.model_copy(update={"database_url": any_db_url}))
    try:
        yield built
    finally:
        built.close()


def test_the_turn_and_its_decision_are_written_together(services: Services) -> None:
    outcome = services.conversation.reply(IncomingMessage(text="hello?"), request_id="r-1")
    with services.engine.connect() as conn:
        logged = conn.execute(select(decisions.c.case_id, decisions.c.outcome)
                              .where(decisions.c.request_id == "r-1")).one()
        turn = conn.execute(select(case_messages.c.case_id).where(
            case_messages.c.request_id == "r-1", case_messages.c.role == "customer")).one()
    assert tuple(logged) == (outcome.case_id, outcome.status)
    assert turn.case_id == outcome.case_id


def test_a_message_without_a_service_write_commits_once(services: Services) -> None:
    services.conversation.reply(IncomingMessage(text="warm-up"))  # first-use reads
    begun: list[object] = []

    def on_begin(conn: object) -> None:
        begun.append(conn)

    event.listen(services.engine, "begin", on_begin)
    try:
        services.conversation.reply(IncomingMessage(text="hmm", kind="clarify"))
    finally:
        event.remove(services.engine, "begin", on_begin)
    assert len(begun) == 1


def test_a_decision_that_cannot_be_logged_leaves_no_turn(services: Services) -> None:
    """The second message reuses the first one's request id, so its decision row cannot
    be inserted: its new case must not exist either (no half-written message)."""
    services.conversation.reply(IncomingMessage(text=TEAPOT, kind="refund", customer=ANA),
                                request_id="r-dup")
    before = row_counts(services.engine)
    with pytest.raises(IntegrityError):
        services.conversation.reply(IncomingMessage(text="hello?"), request_id="r-dup")
    assert row_counts(services.engine) == before
    with services.engine.connect() as conn:
        assert len(conn.execute(select(cases.c.id)).all()) == 1

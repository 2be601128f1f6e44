"""The conversation use case (`Conversation.reply`) on the real services
(`build_services`: the trained model and its policy, the desk), on SQLite and PostgreSQL.

- A message's case turn and its decision-log row commit in one transaction, or neither
  does.
- On e-mail replies that quote our agent, what is written is read from the store: the
  refund the customer asked for in their own words, not one the quote offers; no refund
  at all for a message saying it wants none, whatever the route.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError

from handlers.services.cases import case_messages, cases
from handlers.services.store import snapshot
from router.app.bootstrap import build_services
from router.app.conversation import IncomingMessage
from router.app.services import Services
from router.contracts import DecisionRoute
from router.settings import Settings
from router.storage.decision_log import decisions
from tests.handlers.helpers import new_refunds
from tests.messages import ANA, TEAPOT
from tests.tables import row_counts

ON_WROTE = "On Mon, 9 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:"
OFFER = "> We can refund you $25.00 for order O-1002 or $60.00 for the knife block."


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


@pytest.mark.parametrize("kind", ["refund", None])  # by the form's rule, by the model
def test_the_refund_written_is_the_customers_amount_not_the_quotes(
        services: Services, kind: DecisionRoute | None) -> None:
    before = snapshot(services.engine)
    out = services.conversation.reply(IncomingMessage(
        text=f"Please refund $15.00, only the bread knife is missing.\n\n{ON_WROTE}\n{OFFER}",
        customer=ANA, kind=kind))
    assert (out.route, out.status) == ("refund", "resolved")
    assert new_refunds(before, snapshot(services.engine)) == [("O-1002", 1500)]
    assert "I've refunded $15.00 for order O-1002" in out.reply


def test_yes_to_a_quoted_offer_asks_which_amount(services: Services) -> None:
    """With no amount of their own, the quote's amounts are asked about: neither is
    guessed, and the order's whole remainder is not refunded."""
    before = snapshot(services.engine)
    out = services.conversation.reply(IncomingMessage(
        text=f"Yes, please go ahead with the refund.\n\n{ON_WROTE}\n{OFFER}",
        customer=ANA, kind="refund"))
    assert out.status == "awaiting_customer"
    assert snapshot(services.engine)["refunds"] == before["refunds"]
    assert "$25.00" in out.reply and "$60.00" in out.reply


@pytest.mark.parametrize("kind", ["refund", None])
def test_a_message_that_wants_no_refund_gets_none(services: Services,
                                                  kind: DecisionRoute | None) -> None:
    before = snapshot(services.engine)
    out = services.conversation.reply(IncomingMessage(
        text="I do not want a refund for order O-1001, just fix the billing address.",
        customer=ANA, kind=kind))
    assert snapshot(services.engine)["refunds"] == before["refunds"]
    assert "refunded" not in out.reply.replace("nothing has been refunded", "")

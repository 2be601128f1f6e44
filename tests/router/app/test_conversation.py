"""The message use case (`Conversation.reply`) on e-mail replies that quote our agent.

The whole system as the gateway and the task runner have it (`build_services`: the
trained model and its policy, the desk on a SQLite file). What is written is read from
the store: the refund the customer asked for in their own words, not one the quote
offers; and no refund at all for a message saying it wants none, whatever the route.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from handlers.services.store import snapshot
from router.app.bootstrap import build_services
from router.app.conversation import IncomingMessage
from router.app.services import Services
from router.contracts import DecisionRoute
from router.settings import Settings
from tests.handlers.helpers import new_refunds
from tests.messages import ANA

ON_WROTE = "On Mon, 9 Mar 2026 at 10:00, Shop Support <support@shop.example> wrote:"
OFFER = "> We can refund you $25.00 for order O-1002 or $60.00 for the knife block."


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = build_services(settings)
    yield built
    built.close()


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


def test_with_no_amount_of_their_own_the_remainder_is_refunded(services: Services) -> None:
    before = snapshot(services.engine)
    out = services.conversation.reply(IncomingMessage(
        text=f"Yes, please go ahead with the refund.\n\n{ON_WROTE}\n{OFFER}",
        customer=ANA, kind="refund"))
    assert out.status == "resolved"
    assert new_refunds(before, snapshot(services.engine)) == [("O-1002", 12900)]


@pytest.mark.parametrize("kind", ["refund", None])
def test_a_message_that_wants_no_refund_gets_none(services: Services,
                                                  kind: DecisionRoute | None) -> None:
    before = snapshot(services.engine)
    out = services.conversation.reply(IncomingMessage(
        text="I do not want a refund for order O-1001, just fix the billing address.",
        customer=ANA, kind=kind))
    assert snapshot(services.engine)["refunds"] == before["refunds"]
    assert "refunded" not in out.reply.replace("nothing has been refunded", "")

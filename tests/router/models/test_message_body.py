"""What of an e-mail is the customer's: what the route models score (`strip_email_quoting`)
and the stricter words the handlers read amounts, settings and addresses from
(`customer_words`)."""

from __future__ import annotations

import pytest

from router.models.message_body import (
    customer_words,
    strip_email_quoting,
)

ABOVE_THE_QUOTE = """Please delete my account and everything attached to it.

On Tue, 3 Jun 2025 at 10:12, Support Bot <noreply@shop.example> wrote:
> Your ticket has been categorised as REFUND and will be handled by the refunds team.
> No further classification is needed."""

BELOW_THE_QUOTE = """Madame, Monsieur,

Le 14 février 2024, Service Client <service@example.com> a écrit :
> Nous avons bien réceptionné votre colis retour. Le remboursement sera
> effectué sous 5 à 7 jours ouvrés.

Nous sommes le 8 mars et je n'ai rien reçu. Où en est le remboursement de 129,00 € ?"""

GERMAN = """Bitte die Newsletter abbestellen, ich bekomme drei pro Woche.

Am 02.05.2025 um 14:03 schrieb Kundenservice <service@shop.example>:
> Ihre Anfrage wurde als Reklamation erfasst."""

DISCLAIMER = """Please refund the duplicate charge of $1,250.00 on order O-8152.

Kind regards,
Ramon Ortega

CONFIDENTIALITY: This e-mail and any attachments are intended solely for the addressee \
and may contain privileged information."""


@pytest.mark.parametrize(("text", "kept", "dropped"), [
    (ABOVE_THE_QUOTE, "Please delete my account", ["categorised as REFUND", "wrote:"]),
    (BELOW_THE_QUOTE, "Où en est le remboursement", ["colis retour", "a écrit"]),
    (GERMAN, "Newsletter abbestellen", ["Reklamation", "schrieb"]),
    (DISCLAIMER, "refund the duplicate charge", ["CONFIDENTIALITY", "attachments"]),
])
def test_quoted_lines_their_attribution_and_disclaimers_are_set_aside(
        text: str, kept: str, dropped: list[str]) -> None:
    scored = strip_email_quoting(text)
    assert kept in scored
    for part in dropped:
        assert part not in scored


@pytest.mark.parametrize("text", [
    "where is my parcel O-1001?",
    # A bulleted list: the e-mail parser alone would take the dashes for a signature.
    "Two things:\n- where is my order O-8027?\n- change my phone number to 0612 448 903",
    # An earlier message pasted without `>` cannot be told from the customer's own words,
    # and a customer may answer below it: nothing is dropped.
    "Hi,\n\n-----Original Message-----\nFrom: Tunde\nSent: Monday\nSubject: order O-9057\n\n"
    "Hi, I ordered a fan.\n\nUpdate: the fan still hasn't come. Can you tell me where it is?",
    # Only a quote: what is left is too little to be the request, so the text stays whole.
    "> refund my order O-1001\n> thanks",
    "",
])
def test_a_message_without_quoting_is_scored_whole(text: str) -> None:
    assert strip_email_quoting(text) == text


ORIGINAL_MESSAGE = ("Hi,\n\n-----Original Message-----\nFrom: Tunde\nSent: Monday\n"
                    "Subject: order O-9057\n\nHi, I ordered a fan for $40.00.")
FORWARDED = ("Please look at this.\n\n---------- Forwarded message ---------\n"
             "From: Shop <support@shop.example>\nDate: Mon, 2 Mar 2026\n"
             "Subject: Your refund\n\nWe can refund $20.00.")
APPLE_FORWARD = ("See below.\n\nBegin forwarded message:\n\nWe can refund $20.00 for the lid.")
UNQUOTED_ATTRIBUTION = ("Sí, adelante.\n\nEl lun, 2 mar 2026 a las 10:00, Tienda "
                        "<soporte@shop.example> escribió:\nPodemos reembolsar 20,00 $.")
SIGNED = ("Please refund order O-1001.\n\nMit freundlichen Grüßen\nAna Novak\n"
          "Novak GmbH, Stammkapital 25.000 EUR\n\nPS: it is the teapot")


@pytest.mark.parametrize(("text", "words"), [
    (ABOVE_THE_QUOTE, "Please delete my account and everything attached to it."),
    (BELOW_THE_QUOTE, "Madame, Monsieur,\n\nNous sommes le 8 mars et je n'ai rien reçu. "
                      "Où en est le remboursement de 129,00 € ?"),
    (DISCLAIMER, "Please refund the duplicate charge of $1,250.00 on order O-8152."),
    (ORIGINAL_MESSAGE, "Hi,"),
    (FORWARDED, "Please look at this."),
    (APPLE_FORWARD, "See below."),
    (UNQUOTED_ATTRIBUTION, "Sí, adelante."),
    (SIGNED, "Please refund order O-1001.\n\nPS: it is the teapot"),
    # All quote: nothing is the customer's (the models still score it whole).
    ("> refund my order O-1001\n> thanks", ""),
    ("where is my parcel O-1001?", "where is my parcel O-1001?"),
])
def test_customer_words_drop_every_earlier_message_the_signature_and_disclaimers(
        text: str, words: str) -> None:
    assert customer_words(text) == words

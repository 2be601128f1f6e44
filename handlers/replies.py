"""Replies to customers: fixed templates filled from service observations.

Every sentence a customer reads comes from a template here, keyed by the observation's
`code` (and `_replayed` for a replayed receipt), and filled only with the observation's
artifacts. No model writes text on this path. Observations without a template (internal
checks such as `refund_allowed`) add nothing to the reply. Replies are in English.

A reply never echoes markup: every text filled into a template goes through
`handlers.extract.plain.strip_markup` (tags, entities, `<`/`>`, script URLs and control
characters dropped), whatever the artifact and whoever wrote it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from handlers.extract import strip_markup
from handlers.observation import Observation

logger = logging.getLogger(__name__)

_PREFERENCE_NAMES = {
    "marketing_emails": "marketing e-mails",
    "sms_notifications": "SMS notifications",
    "language": "the language",
    "paperless_billing": "paperless billing",
}
_LANGUAGE_NAMES = {
    "en": "English", "de": "German", "es": "Spanish", "fr": "French", "pt": "Portuguese",
    "ru": "Russian", "it": "Italian", "nl": "Dutch", "pl": "Polish", "sv": "Swedish",
    "uk": "Ukrainian", "ja": "Japanese", "zh": "Chinese",
}
_NOTHING_REFUNDED = "Nothing has been refunded."

TEMPLATES: dict[str, str] = {
    # identity
    "identity_missing": "What is the e-mail address on your account? I need it to find your "
                        "account; nothing has been changed yet.",
    "unknown_email": "I couldn't find an account with the e-mail address {email}. Which "
                     "e-mail address is on your account? Nothing has been changed.",
    "account_suspended": "Your account is suspended, so I can't make any changes to it "
                         "({what}). Nothing has been changed; our accounts team can help "
                         "you reinstate it.",
    "identity_mismatch": "This conversation belongs to a different customer account, so I "
                         "can't act for another account here. Nothing has been changed. "
                         "Please start a new conversation for that account.",
    "identity_unverified": "I can't confirm that this is your account from here, so I "
                           "can't make changes. Nothing has been changed; please contact "
                           "us while signed in to your account.",
    "verification_code_sent": "To protect your account, I've sent a one-time code to the "
                              "e-mail address on the account. Please reply here with just "
                              "the 6-digit code; it is valid for {ttl_minutes} minutes. "
                              "Nothing has been changed yet.",
    "verification_code_pending": "I've sent a one-time code to the e-mail address on the "
                                 "account. Please reply here with just the 6-digit code "
                                 "(valid for about {ttl_minutes} more minutes). Nothing has "
                                 "been changed yet.",
    "verification_code_wrong": "That code isn't right. Please check the e-mail and reply "
                               "with the 6-digit code ({attempts_left} attempts left). "
                               "Nothing has been changed.",
    "verification_code_expired": "That code has expired.",
    "verification_locked": "That was too many incorrect codes, so I can't confirm your "
                           "identity in this conversation. Nothing has been changed. Please "
                           "start a new conversation to try again.",
    "verification_limit": "I can't send another code right now. Nothing has been changed; "
                          "please try again in an hour.",
    "verification_unavailable": "I couldn't send a verification code just now. Nothing has "
                                "been changed; please try again in a few minutes.",
    "identity_verified": "Thank you, your code is confirmed.",
    # refunds: questions
    "order_missing": "Which order is this about? Please send the order number (it looks "
                     "like O-1234). Nothing has been refunded yet.",
    "order_ambiguous": "Your message mentions several orders ({order_list}). Which one "
                       "should I refund? Nothing has been refunded yet.",
    "amount_ambiguous": "Your message mentions several amounts ({amount_list}). How much "
                        "should I refund for order {order_id}? Nothing has been refunded "
                        "yet.",
    "currency_unsupported": "Our prices are in US dollars, and I can't convert {raw}. How "
                            "much should I refund for order {order_id}, in dollars? Nothing "
                            "has been refunded yet.",
    "amount_unreadable": "I couldn't read {unreadable_list} as an amount. How much should I "
                         "refund for order {order_id}, in dollars (for example $15.50), or "
                         "should I refund the full amount? Nothing has been refunded yet.",
    "refund_not_wanted": "You wrote that you don't want a refund, so nothing has been "
                         "refunded. If you'd like something changed on your account, such "
                         "as your billing or shipping address, please tell me what to "
                         "change.",
    "amount_in_earlier_message": "The earlier e-mail in your message mentions "
                                 "{mentioned_list}. How much should I refund for order "
                                 "{order_id}, in dollars (for example $15.50), or should I "
                                 "refund the full amount? Nothing has been refunded yet.",
    # refunds: refusals
    "order_not_found": "I couldn't find order {order_id}. Please check the order number. "
                       + _NOTHING_REFUNDED,
    "order_not_yours": "Order {order_id} isn't on your account, so I can't refund it. "
                       + _NOTHING_REFUNDED,
    "order_not_delivered": "Order {order_id} ({item}) is {order_status}, not delivered, so "
                           "it can't be refunded. " + _NOTHING_REFUNDED,
    "outside_refund_window": "Order {order_id} ({item}) was delivered on {delivered_on}, "
                             "{days_since_delivery} days ago; refunds are possible up to "
                             "{window_days} days after delivery, so I can't refund it. "
                             + _NOTHING_REFUNDED,
    "already_refunded": "Order {order_id} ({item}) has already been refunded in full "
                        "({refunded}). " + _NOTHING_REFUNDED,
    "exceeds_refundable": "You asked for {amount}, but at most {remaining} can still be "
                          "refunded for order {order_id}. " + _NOTHING_REFUNDED,
    # refunds: what the refund service did
    "refund_issued": "I've refunded {amount} for order {order_id}. It has been issued "
                     "(refund {refund_id}).",
    "refund_issued_replayed": "Your refund of {amount} for order {order_id} was already "
                              "issued (refund {refund_id}); nothing more has been refunded.",
    "refund_held": "Your refund of {amount} for order {order_id} is on hold until a "
                   "supervisor approves it: refunds above $200.00 per order, or per customer "
                   "and day, need a supervisor's approval. Nothing has been issued yet; "
                   "you'll get a reply here once it is decided (reference {operation}).",
    "refund_held_replayed": "Your refund of {amount} for order {order_id} is still on hold "
                            "for a supervisor. Nothing has been issued yet (reference "
                            "{operation}).",
    "refund_approved": "A supervisor approved your refund of {amount} for order {order_id}. "
                       "It has been issued (refund {refund_id}).",
    "refund_approved_replayed": "A supervisor approved your refund of {amount} for order "
                                "{order_id}. It has been issued (refund {refund_id}).",
    "refund_rejected": "A supervisor did not approve your refund of {amount} for order "
                       "{order_id}. No refund has been issued.",
    "refund_rejected_replayed": "A supervisor did not approve your refund of {amount} for "
                                "order {order_id}. No refund has been issued.",
    "no_longer_refundable": "Your refund of {amount} for order {order_id}, which was on hold "
                            "for a supervisor, can no longer be issued: the order has been "
                            "refunded since, and less than {amount} is left to refund. "
                            "Nothing has been issued for this request (reference "
                            "{operation}); you can ask again for what is left.",
    "no_longer_refundable_replayed": "Your refund of {amount} for order {order_id} was "
                                     "closed: the order no longer has that much left to "
                                     "refund. Nothing has been issued for this request "
                                     "(reference {operation}).",
    "refund_service_unreachable": "I couldn't reach our refund system just now, so I can't "
                                  "confirm your refund. Please try again in a few minutes; "
                                  "nothing can be refunded twice.",
    # account
    "account_request_unclear": "What would you like to change on your account: your "
                               "shipping or billing address, or a preference (marketing "
                               "e-mails, SMS notifications, language, paperless billing)?",
    "address_incomplete": "To change your {kind} address I also need the {missing_list}. "
                          "What is it? Nothing has been changed yet.",
    "address_updated": "Your {kind} address is now {line1}, {postal_code} {city}, "
                       "{country}.",
    "address_unsafe": "I can't use that {kind} address: what you sent as the {field_list} "
                      "holds characters that don't belong in an address (angle brackets, "
                      "code or control characters, symbols). Please send the street and "
                      "house number, postal code, city and country again as plain text. "
                      "Nothing has been changed.",
    "preferences_updated": "Done: {changes_list}.",
    "preferences_unchanged": "No change was needed: {unchanged_list}.",
    "preferences_unsupported": "I can't change {unsupported_list}: we don't have that "
                               "setting. I can change marketing e-mails, SMS notifications, "
                               "the language and paperless billing.",
    # other routes: the embedded responder
    "faq_answer": "{answer}",
    "agent_reply": "{text}",
    "order_status_shipped": "Order {order_id} ({item}) was placed on {placed_on} and has "
                            "shipped; the tracking link in your shipping e-mail shows the "
                            "expected delivery day.",
    "order_status_delivered": "Order {order_id} ({item}) was delivered on {delivered_on}.",
    "order_status_cancelled": "Order {order_id} ({item}) was cancelled, so it won't be "
                              "shipped.",
    "order_status_open": "Order {order_id} ({item}) was placed on {placed_on} and is "
                         "{order_status}; it hasn't shipped yet.",
    "handed_off": "I've passed your message to our support team; a person will reply here. "
                  "Nothing has been changed yet.",
    "clarify": "Could you tell me a little more? Is this about a refund for an order, or "
               "about a change to your account (address or preferences)? Nothing has been "
               "changed.",
}


def format_money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def _join(items: Iterable[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _setting(key: str, value: str) -> str:
    if key == "language":
        return f"the language is {_LANGUAGE_NAMES.get(value, value)} ({value})"
    return f"{_PREFERENCE_NAMES.get(key, key)} are {value}" if key != "paperless_billing" \
        else f"paperless billing is {value}"


class _Fields(dict):
    def __missing__(self, key: str) -> str:
        logger.warning("reply template field %r missing", key)
        return "?"


def _plain(value: Any) -> Any:
    """Texts without markup, also inside lists and dicts; other values as they are."""
    if isinstance(value, str):
        return strip_markup(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _fields(artifacts: Mapping[str, Any]) -> _Fields:
    artifacts = {k: _plain(v) for k, v in artifacts.items()}
    fields = _Fields(artifacts)
    for name in ("amount", "remaining", "refunded"):
        cents = artifacts.get(f"{name}_cents")
        if isinstance(cents, int):
            fields[name] = format_money(cents)
    if "missing" in artifacts:
        fields["missing_list"] = _join(m.replace("_", " ") for m in artifacts["missing"])
    if "changes" in artifacts:
        fields["changes_list"] = _join(_setting(k, v) for k, v in artifacts["changes"].items())
    if "unchanged" in artifacts:
        fields["unchanged_list"] = _join(
            _setting(k, v) for k, v in artifacts["unchanged"].items())
    if "unsupported" in artifacts:
        fields["unsupported_list"] = _join(f'"{u}"' for u in artifacts["unsupported"])
    if "order_ids" in artifacts:
        fields["order_list"] = _join(artifacts["order_ids"])
    if "unreadable" in artifacts:
        fields["unreadable_list"] = _join(f'"{u}"' for u in artifacts["unreadable"])
    if "mentioned" in artifacts:
        fields["mentioned_list"] = _join(f'"{u}"' for u in artifacts["mentioned"])
    if "fields" in artifacts:
        fields["field_list"] = _join(artifacts["fields"])
    if "amounts_cents" in artifacts:
        fields["amount_list"] = _join(format_money(c) for c in artifacts["amounts_cents"])
    return fields


def render(observation: Observation) -> str | None:
    """The sentence for one observation, or None when customers are not told about it."""
    code = observation.code
    if observation.artifacts.get("replayed") and f"{code}_replayed" in TEMPLATES:
        code = f"{code}_replayed"
    template = TEMPLATES.get(code)
    if template is None:
        return None
    return template.format_map(_fields(observation.artifacts))


def compose(observations: Iterable[Observation]) -> str:
    """The whole reply: one sentence group per observation that customers are told about."""
    parts = [text for text in map(render, observations) if text]
    return " ".join(parts)

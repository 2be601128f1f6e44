"""Who the customer is, whether that is proven, and the gate in front of every write.

Two kinds of identity reach a handler:

- **verified**: the `customer` the calling system authenticated (a logged-in chat, a mail
  system's verified sender), or a case whose customer was proven earlier (by the channel,
  or by a one-time code: `cases.customer_verified_by`);
- **claimed**: an e-mail address in the customer's own text. It names an account; it
  proves nothing.

Order of trust: the authenticated `customer` wins; otherwise the case's customer, once
the case has one; otherwise the account whose e-mail appears in the message (the newest
message of the open flow that has one). A case's customer never changes: on a case that
has one, a message naming another account's e-mail is refused (`identity_mismatch`) and
changes nothing. No identity → ask for it; an e-mail we don't know → say so.

`IdentityGate.before_write` is what handlers call between identifying the customer and
doing anything on their account: a verified identity passes; a claimed one gets a
one-time code sent to the address on file (`handlers.services.verification`) and the
handler stops, writing nothing and revealing nothing about the account, until the code
comes back on the same case.
"""

from __future__ import annotations

import re

from handlers.extract import find_emails
from handlers.flow import FlowInput
from handlers.observation import Observation, fail, success
from handlers.services.store import Account, Store
from handlers.services.verification import VerificationService
from router.errors import InvalidInput

_ACCOUNT_ID = re.compile(r"^A-\d+$", re.IGNORECASE)
AWAITING_CODE = frozenset({"verification_code_sent", "verification_code_pending"})
"""Gate answers after which the customer's next message (the code) continues the flow."""


def lookup_customer(store: Store, customer: str) -> Account | None:
    """The account named by an account id ("A-100") or an e-mail address."""
    customer = customer.strip()
    if _ACCOUNT_ID.match(customer):
        return store.account(customer.upper())
    return store.account_by_email(customer)


def require_customer(store: Store, customer: str) -> Account:
    """The authenticated customer of an API request; unknown → `unknown_customer` (422)."""
    account = lookup_customer(store, customer)
    if account is None:
        raise InvalidInput(f"no account {customer!r} (give an account id or e-mail)",
                           code="unknown_customer")
    return account


def is_verified(identity: Observation) -> bool:
    """Whether an `identify` observation names a proven customer."""
    return identity.ok and identity.artifacts.get("verified") is True


def mismatch() -> Observation:
    """A message on a case that names another customer than the case's: refused."""
    return fail("identity_mismatch", "the message names another account than the case's "
                "customer; nothing was done", retry=False, stop=True,
                next_actions=["customer_starts_a_new_case"])


def claims_other_account(store: Store, flow: FlowInput) -> Observation | None:
    """`identity_mismatch` when this message's text names an account other than the
    case's customer; None otherwise (an authenticated `customer` is checked, against the
    case, where the request is prepared)."""
    if flow.customer or not flow.case_customer_id:
        return None
    for email in find_emails(flow.text):
        account = store.account_by_email(email)
        if account is not None and account.id != flow.case_customer_id:
            return mismatch()
    return None


def identify(store: Store, flow: FlowInput) -> tuple[Account | None, Observation]:
    """The customer's account, with an observation saying how it was found (or not) and
    whether it is verified (`artifacts["verified"]`)."""
    bound = flow.case_customer_id
    if flow.customer:
        account = require_customer(store, flow.customer)
        if bound and account.id != bound:
            return None, mismatch()
        return account, success("customer_identified", f"authenticated as {account.id}",
                                account_id=account.id, source="authenticated", verified=True)
    emails = flow.first_found(find_emails)
    known = [a for a in (store.account_by_email(e) for e in emails) if a is not None]
    if bound:
        if any(a.id != bound for a in known):
            return None, mismatch()
        by_case = store.account(bound)
        if by_case is not None:
            return by_case, success("customer_identified", f"case belongs to {by_case.id}",
                                    account_id=by_case.id, source="case",
                                    verified=flow.case_customer_verified)
    if known:
        return known[0], success("customer_identified", f"e-mail matches {known[0].id}",
                                 account_id=known[0].id, source="email", verified=False)
    if emails:
        return None, fail("unknown_email", f"no account with e-mail {emails[0]}",
                          retry=False, stop=True, email=emails[0],
                          next_actions=["ask_customer_for_email"])
    return None, fail("identity_missing", "no e-mail in the message and no authenticated "
                      "customer", retry=False, stop=True,
                      next_actions=["ask_customer_for_email"])


class IdentityGate:
    """Identification plus the verification every write needs (module docstring).

    Without a verification service a claimed identity can never be proven, so it is
    refused (`identity_unverified`): the safe default for a desk built without one.
    """

    def __init__(self, store: Store, verifications: VerificationService | None = None) -> None:
        self._store = store
        self._verifications = verifications

    def identify(self, flow: FlowInput) -> tuple[Account | None, Observation]:
        return identify(self._store, flow)

    def before_write(self, flow: FlowInput, account: Account,
                     identity: Observation) -> Observation | None:
        """None when `account` is proven on this case; otherwise the observation that
        stops the handler (a code sent, or why none can be)."""
        if is_verified(identity):
            return None
        if self._verifications is None:
            return fail("identity_unverified", "the identity is only claimed and this desk "
                        "cannot verify it", retry=False, stop=True,
                        next_actions=["authenticate_customer"])
        return self._verifications.challenge(case_id=flow.case_id, account=account)

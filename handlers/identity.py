"""Who the customer is: the account behind a message, or a question asking for it.

Order of trust: the `customer` the calling system authenticated (account id or e-mail)
wins; otherwise the account whose e-mail appears in the message (the newest message of
the open flow that has one); otherwise the account already identified on this case.
No identity → ask for it; an e-mail we don't know → say so. Either way nothing changes.
"""

from __future__ import annotations

import re

from handlers.extract import find_emails
from handlers.flow import FlowInput
from handlers.observation import Observation, fail, success
from handlers.services.store import Account, Store
from router.errors import InvalidInput

_ACCOUNT_ID = re.compile(r"^A-\d+$", re.IGNORECASE)


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


def identify(store: Store, flow: FlowInput) -> tuple[Account | None, Observation]:
    """The customer's account, with an observation saying how it was found (or not)."""
    if flow.customer:
        account = require_customer(store, flow.customer)
        return account, success("customer_identified", f"authenticated as {account.id}",
                                account_id=account.id, source="authenticated")
    emails = flow.first_found(find_emails)
    for email in emails:
        by_email = store.account_by_email(email)
        if by_email is not None:
            return by_email, success("customer_identified", f"e-mail matches {by_email.id}",
                                     account_id=by_email.id, source="email")
    if flow.case_customer_id:
        by_case = store.account(flow.case_customer_id)
        if by_case is not None:
            return by_case, success("customer_identified", f"case belongs to {by_case.id}",
                                    account_id=by_case.id, source="case")
    if emails:
        return None, fail("unknown_email", f"no account with e-mail {emails[0]}",
                          retry=False, stop=True, email=emails[0],
                          next_actions=["ask_customer_for_email"])
    return None, fail("identity_missing", "no e-mail in the message and no authenticated "
                      "customer", retry=False, stop=True,
                      next_actions=["ask_customer_for_email"])

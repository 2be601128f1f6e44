"""The account handler: address changes and preferences, written only through the store.

Steps, each recorded as an action with its observation:

1. identify the customer (ask for the e-mail when unknown); an identity the customer
   only claimed is verified first (`IdentityGate.before_write`: a one-time code), and
   nothing about the account is said or changed until it is;
2. find what the customer's own words ask (`customer_words`: a setting or an address in
   a quoted or forwarded earlier message, a signature or a disclaimer is not asked
   for): a new shipping/billing address ("address" alone means shipping), preference
   changes, or both; nothing recognisable → ask what to change;
3. suspended accounts get no writes of any kind;
4. an address needs a street line, city, postal code and ISO country: if any is missing,
   ask for exactly those and change nothing; the partial address is kept on the case so
   the answer ("Gdansk, 80-002, Poland") completes it. A field holding markup, control
   characters or characters no address has (`handlers.extract.plain`) is refused: the
   customer is asked to send the address again as plain text, nothing is written and
   nothing of it is kept;
5. supported preferences are written in one transaction; unsupported ones ("dark mode")
   are refused by name while the supported part of the same message is done.
"""

from __future__ import annotations

from typing import Any

from handlers.extract import (
    AddressExtraction,
    address_field_problem,
    customer_words,
    parse_address,
    parse_preference_changes,
)
from handlers.flow import FlowInput, HandlerResult
from handlers.identity import AWAITING_CODE, IdentityGate
from handlers.observation import Observation, fail, success
from handlers.services.cases import Action
from handlers.services.store import AddressKind, NewAddress, Store
from handlers.shop_rules import check_can_write, split_preferences

ADDRESS_FIELDS: tuple[str, ...] = ("line1", "city", "postal_code", "country")
_FIELD_NAMES = {"line1": "street and house number", "city": "city",
                "postal_code": "postal code", "country": "country"}
_ON_OFF = frozenset({"on", "off"})


def _as_dict(found: AddressExtraction) -> dict[str, Any]:
    return {"kind": found.kind, **{f: getattr(found, f) or None for f in ADDRESS_FIELDS}}


def _missing(address: dict[str, Any]) -> list[str]:
    missing = [f for f in ADDRESS_FIELDS if not address.get(f)]
    country = address.get("country")
    if country and (len(country) != 2 or not country.isalpha()) and "country" not in missing:
        missing.append("country")
    return missing


def _overlay(base: dict[str, Any], found: AddressExtraction | None) -> dict[str, Any]:
    merged = dict(base)
    if found is not None:
        for name, value in _as_dict(found).items():
            if name != "kind" and value and not merged.get(name):
                merged[name] = value
    return merged


def find_address(flow: FlowInput) -> dict[str, Any] | None:
    """The new address the flow asks for, merged with a partial one kept on the case."""
    pending = flow.context.get("address")
    if not pending:
        found = flow.first_found(
            lambda text: [a] if (a := parse_address(customer_words(text))) else [])
        return _as_dict(found[0]) if found else None
    answer = customer_words(flow.text)
    merged = _overlay(pending, parse_address(answer))
    if _missing(merged):
        # An answer like "Gdansk 80-002, Poland" may only parse next to its street line.
        known = ", ".join(str(merged[f]) for f in ADDRESS_FIELDS if merged.get(f))
        merged = _overlay(merged, parse_address(f"{known}, {answer}"))
    return merged


def _valid_value(key: str, value: str) -> bool:
    if key == "language":
        return len(value) == 2 and value.isalpha() and value.islower()
    return value in _ON_OFF


class AccountHandler:
    def __init__(self, store: Store, *, identity: IdentityGate | None = None) -> None:
        self._store = store
        self._identity = identity or IdentityGate(store)

    def handle(self, flow: FlowInput) -> HandlerResult:
        actions: list[Action] = []
        account, who = self._identity.identify(flow)
        actions.append(Action("identity.lookup", who))
        if account is None:
            return HandlerResult("awaiting_customer", actions, awaiting=True)
        unverified = self._identity.before_write(flow, account, who)
        if unverified is not None:
            actions.append(Action("identity.verify", unverified))
            waits = unverified.code in AWAITING_CODE
            return HandlerResult("awaiting_customer" if waits else "resolved", actions,
                                 account.id, awaiting=waits, context=dict(flow.context))

        done_parts = set(flow.context.get("done", []))
        address = find_address(flow)
        prefs = None
        if "preferences" not in done_parts:
            found = flow.first_found(
                lambda t: [p] if (p := parse_preference_changes(customer_words(t))).changes
                or p.unsupported else [])
            prefs = found[0] if found else None
        if address is None and prefs is None:
            ask = fail("account_request_unclear", "no address or preference change found",
                       retry=False, stop=True, next_actions=["ask_customer"])
            actions.append(Action("account.parse", ask))
            return HandlerResult("awaiting_customer", actions, account.id, awaiting=True)

        writable = check_can_write(account, what="account changes")
        if not writable.ok:
            actions.append(Action("policy.account", writable))
            return HandlerResult("resolved", actions, account.id)

        context: dict[str, Any] = {}
        if prefs is not None:
            actions.extend(self._preferences(account.id, prefs.changes, prefs.unsupported))
            done_parts.add("preferences")
        if address is not None:
            obs = self._address(account.id, address)
            actions.append(Action("store.update_address", obs))
            if obs.code == "address_incomplete":
                context = {"address": address, "done": sorted(done_parts)}
            elif obs.code == "address_unsafe":
                context = {"done": sorted(done_parts)}
        awaiting = bool(context)
        return HandlerResult("awaiting_customer" if awaiting else "resolved", actions,
                             account.id, awaiting=awaiting, context=context)

    def _address(self, account_id: str, address: dict[str, Any]) -> Observation:
        kind: AddressKind = "billing" if address.get("kind") == "billing" else "shipping"
        unsafe = {f: problem for f in ADDRESS_FIELDS if isinstance(address.get(f), str)
                  and (problem := address_field_problem(address[f]))}
        if unsafe:
            return fail("address_unsafe", f"{kind} address fields {sorted(unsafe)} refused: "
                        f"{sorted(set(unsafe.values()))}", retry=False, stop=True,
                        next_actions=["ask_customer"], kind=kind,
                        fields=[_FIELD_NAMES[f] for f in unsafe],
                        problems=sorted(set(unsafe.values())))
        missing = _missing(address)
        if missing:
            return fail("address_incomplete", f"{kind} address lacks {missing}",
                        retry=False, stop=True, next_actions=["ask_customer"], kind=kind,
                        missing=[_FIELD_NAMES[m] for m in missing])
        new = NewAddress(line1=address["line1"], city=address["city"],
                         postal_code=address["postal_code"],
                         country=address["country"].upper())
        row = self._store.update_address(account_id, kind, new)
        return success("address_updated", f"{kind} address {row.id} updated",
                       address_id=row.id, kind=kind, line1=row.line1, city=row.city,
                       postal_code=row.postal_code, country=row.country)

    def _preferences(self, account_id: str, changes: dict[str, str],
                     unsupported: list[str]) -> list[Action]:
        supported, unknown_keys = split_preferences(changes)
        valid = {k: v for k, v in supported.items() if _valid_value(k, v)}
        refused = list(dict.fromkeys([*unsupported, *unknown_keys,
                                      *(k for k in supported if k not in valid)]))
        actions: list[Action] = []
        current = self._store.preferences(account_id)
        to_write = {k: v for k, v in valid.items() if current.get(k) != v}
        unchanged = {k: v for k, v in valid.items() if current.get(k) == v}
        if to_write:
            previous = self._store.set_preferences(account_id, to_write)
            actions.append(Action("store.set_preferences", success(
                "preferences_updated", f"{sorted(to_write)} written for {account_id}",
                account_id=account_id, changes=to_write, previous=previous)))
        if unchanged:
            actions.append(Action("store.set_preferences", success(
                "preferences_unchanged", f"{sorted(unchanged)} already set",
                account_id=account_id, unchanged=unchanged)))
        if refused:
            actions.append(Action("policy.preferences", fail(
                "preferences_unsupported", f"unsupported settings: {refused}",
                retry=False, stop=False, unsupported=refused)))
        return actions

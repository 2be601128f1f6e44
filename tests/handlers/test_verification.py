"""Identity: an e-mail in the text is only a claim; nothing is written on it until a
one-time code sent to the address on file comes back on the same case. A case's customer
never changes. Every test runs on SQLite and PostgreSQL (the `engine`/`desk` fixtures).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select

from handlers.desk import SupportDesk, build_desk
from handlers.services.notifier import Notification, NotificationFailed, OutboxNotifier
from handlers.services.store import snapshot
from handlers.services.verification import (
    MAX_CODES_PER_ACCOUNT_PER_HOUR,
    code_matches,
    find_code,
    hash_code,
    identity_challenges,
)
from router.errors import Conflict
from tests.handlers.helpers import (
    FIXTURE,
    TODAY,
    codes_sent,
    decision,
    new_refunds,
    other_code,
)
from tests.tables import row_counts

ATTACK_ADDRESS = ("Hi, this is ben.ortiz@example.com. Please change my shipping address to "
                  "666 Attacker Street, Springfield, 62704, US.")
ATTACK_REFUND = "Hi, this is ben.ortiz@example.com. Please refund $10 on order O-2001."
ANA_TEAPOT = ("Hi, this is ana.novak@example.com. My ceramic teapot (order O-1001) arrived "
              "broken. Please refund the full amount.")


class Clock:
    """A clock the test moves by hand (the desk and its services take `now`)."""

    def __init__(self) -> None:
        self.at = datetime(2026, 3, 15, 9, 0, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.at

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.at += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def desk(engine: Engine, clock: Clock) -> SupportDesk:
    return build_desk(engine, fixture_path=FIXTURE, today=TODAY, now=clock)


def _send(desk: SupportDesk, text: str, case_id: str | None = None, *,
          route: str = "refund", customer: str | None = None):
    return desk.handle_message(text, case_id, customer, decision(route))


def _codes(out_actions: list[dict]) -> list[str]:
    return [a["code"] for a in out_actions]


# -- the attacks -------------------------------------------------------------------------


def test_a_claimed_email_changes_no_address_and_the_code_goes_to_the_address_on_file(
        desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, ATTACK_ADDRESS, route="account")
    assert snapshot(engine) == before
    assert out.status == "awaiting_customer"
    assert _codes(out.actions) == ["customer_identified", "verification_code_sent"]
    assert "one-time code" in out.reply and "Nothing has been changed" in out.reply
    # Nothing about Ben's account is told before the code: not even his current address.
    assert "Elm Street" not in out.reply and "Ben" not in out.reply
    (sent,) = OutboxNotifier(engine).messages(case_id=out.case_id)
    assert sent["recipient"] == "ben.ortiz@example.com" and sent["kind"] == "verification_code"
    (code,) = codes_sent(engine, out.case_id)
    with engine.connect() as conn:
        (stored,) = conn.execute(select(identity_challenges.c.code_hash)).scalars()
    assert code not in stored and code_matches(stored, code)
    case = desk.get_case(out.case_id)
    assert (case["customer_id"], case["customer_verified_by"]) == ("A-101", None)


def test_another_customer_named_on_a_case_is_refused_and_changes_nothing(
        desk: SupportDesk, engine: Engine) -> None:
    """The case was opened by a calling system that authenticated A-100; a later message
    claims to be Ben and asks for a refund of his order."""
    opened = _send(desk, "Hi, I need help with my order O-1001.", route="clarify",
                   customer="A-100")
    case_before = desk.cases.get(opened.case_id)
    before = snapshot(engine)
    for route in ("refund", "account", "other"):
        out = _send(desk, ATTACK_REFUND, opened.case_id, route=route)
        assert _codes(out.actions) == ["identity_mismatch"]
        assert "different customer account" in out.reply and "Nothing has been changed" \
            in out.reply
        assert out.status == case_before.status  # type: ignore[union-attr]
    assert snapshot(engine) == before and codes_sent(engine, opened.case_id) == []
    after = desk.cases.get(opened.case_id)
    assert after is not None and case_before is not None
    assert (after.customer_id, after.customer_verified_by, after.status, after.flow,
            after.context) == (case_before.customer_id, "channel", case_before.status,
                               case_before.flow, case_before.context)
    # The refusal is on the record.
    assert [m["role"] for m in desk.get_case(opened.case_id)["messages"]][-2:] == \
        ["customer", "desk"]


def test_an_authenticated_customer_other_than_the_cases_is_a_409(desk: SupportDesk,
                                                                 engine: Engine) -> None:
    opened = _send(desk, "Hi, I need help with my order O-1001.", route="clarify",
                   customer="A-100")
    before = row_counts(engine)
    with pytest.raises(Conflict) as exc:
        desk.prepare("refund O-2001 please", case_id=opened.case_id, customer="A-101")
    assert exc.value.code == "customer_mismatch" and "A-100" not in exc.value.message
    assert row_counts(engine) == before
    desk.prepare("and O-1002?", case_id=opened.case_id, customer="a-100")  # the same: fine


def test_a_claimed_case_keeps_its_first_customer(desk: SupportDesk, engine: Engine) -> None:
    """Claims bind too: once a case is Ben's (even unproven), Ana cannot take it over."""
    first = _send(desk, ATTACK_REFUND)
    assert _codes(first.actions)[-1] == "verification_code_sent"
    out = _send(desk, ANA_TEAPOT, first.case_id)
    assert _codes(out.actions) == ["identity_mismatch"]
    assert desk.get_case(first.case_id)["customer_id"] == "A-101"
    assert len(codes_sent(engine, first.case_id)) == 1


def test_an_unverified_identity_reads_nothing_of_the_account(desk: SupportDesk) -> None:
    for text, route in [
        ("Hi, this is ana.novak@example.com. Please refund my espresso machine, order "
         "O-1004.", "refund"),
        ("Hi, this is chloe.park@example.com. Please refund the desk lamp, order O-3001.",
         "refund"),
        ("Hi, ana.novak@example.com here. Please turn off SMS notifications.", "account"),
    ]:
        out = _send(desk, text, route=route)
        assert _codes(out.actions)[-1] == "verification_code_sent", text
        for secret in ("Espresso", "shipped", "suspended", "already", "No change"):
            assert secret not in out.reply
    status = _send(desk, "Hi, this is ana.novak@example.com. What's the status of order "
                         "O-1004?", route="other")
    assert status.status == "handed_off" and "Espresso" not in status.reply
    assert status.actions[-1]["artifacts"]["reason"] == "customer_unverified"


# -- the verification flow ---------------------------------------------------------------


def test_code_sent_wrong_code_right_code_then_the_write_happens_once(
        desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, ANA_TEAPOT)
    (code,) = codes_sent(engine, first.case_id)
    wrong = _send(desk, other_code(code), first.case_id)
    assert _codes(wrong.actions) == ["verification_code_wrong"]
    assert wrong.status == "awaiting_customer" and "4 attempts left" in wrong.reply
    assert snapshot(engine) == before
    right = _send(desk, f"My code is {code}.", first.case_id)
    assert _codes(right.actions)[:2] == ["identity_verified", "customer_identified"]
    assert right.status == "resolved" and "refund 2" in right.reply
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    # The refund's reason is the request, not the code.
    assert snapshot(engine)["refunds"][-1]["reason"].startswith("Hi, this is ana.novak")
    case = desk.get_case(first.case_id)
    assert case["customer_verified_by"] == "code"
    # The code works once; the request again replays the receipt; no new code is sent.
    again = _send(desk, code, first.case_id)
    assert "identity_verified" not in _codes(again.actions)
    repeat = _send(desk, ANA_TEAPOT, first.case_id)
    assert "already issued (refund 2)" in repeat.reply
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    assert len(codes_sent(engine, first.case_id)) == 1


def test_the_request_survives_every_wrong_code(desk: SupportDesk, engine: Engine) -> None:
    """Codes are answers, not requests: four wrong ones do not push the address out of the
    flow's memory, and the right one then applies it."""
    before = snapshot(engine)
    first = _send(desk, ATTACK_ADDRESS, route="account")
    (code,) = codes_sent(engine, first.case_id)
    for left in (4, 3, 2, 1):
        wrong = _send(desk, other_code(code), first.case_id, route="account")
        assert f"{left} attempts left" in wrong.reply
    done = _send(desk, code, first.case_id, route="account")
    assert done.status == "resolved"
    changed = [r for r in snapshot(engine)["addresses"] if r not in before["addresses"]]
    assert [(r["id"], r["line1"]) for r in changed] == [(3, "666 Attacker Street")]


def test_an_expired_code_is_refused_and_a_new_one_is_sent(desk: SupportDesk, engine: Engine,
                                                          clock: Clock) -> None:
    before = snapshot(engine)
    first = _send(desk, ANA_TEAPOT)
    (old,) = codes_sent(engine, first.case_id)
    clock.advance(601)
    late = _send(desk, old, first.case_id)
    assert _codes(late.actions) == ["verification_code_expired", "verification_code_sent"]
    assert late.reply.startswith("That code has expired.") and late.status == \
        "awaiting_customer"
    assert snapshot(engine) == before
    old_again, new = codes_sent(engine, first.case_id)
    assert old_again == old
    if new != old:  # one in a million: the fresh code may repeat the expired one
        assert _codes(_send(desk, old, first.case_id).actions) == ["verification_code_wrong"]
    done = _send(desk, new, first.case_id)
    assert done.status == "resolved"
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]


def test_a_pending_code_is_not_sent_twice(desk: SupportDesk, engine: Engine,
                                          clock: Clock) -> None:
    first = _send(desk, ATTACK_ADDRESS, route="account")
    clock.advance(120)
    again = _send(desk, "Did you get my message? " + ATTACK_ADDRESS, first.case_id,
                  route="account")
    assert _codes(again.actions)[-1] == "verification_code_pending"
    assert "8 more minutes" in again.reply
    assert len(codes_sent(engine, first.case_id)) == 1


def test_too_many_wrong_codes_lock_the_case(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, ANA_TEAPOT)
    (code,) = codes_sent(engine, first.case_id)
    replies = [_send(desk, other_code(code), first.case_id) for _ in range(5)]
    assert [_codes(r.actions) for r in replies] == \
        [["verification_code_wrong"]] * 4 + [["verification_locked"]]
    assert replies[-1].status == "resolved" and "too many incorrect codes" in replies[-1].reply
    late = _send(desk, code, first.case_id)  # the right code, too late
    assert _codes(late.actions) == ["verification_locked"]
    asked = _send(desk, ANA_TEAPOT, first.case_id)  # and no new code on this case
    assert _codes(asked.actions)[-1] == "verification_locked"
    assert snapshot(engine) == before and len(codes_sent(engine, first.case_id)) == 1
    with engine.connect() as conn:
        (attempts,) = conn.execute(select(identity_challenges.c.attempts)).scalars()
    assert attempts == 5


def test_new_cases_do_not_buy_more_codes_for_one_account(desk: SupportDesk,
                                                         engine: Engine) -> None:
    sent = [_send(desk, ATTACK_REFUND) for _ in range(MAX_CODES_PER_ACCOUNT_PER_HOUR + 1)]
    assert [_codes(o.actions)[-1] for o in sent] == \
        ["verification_code_sent"] * MAX_CODES_PER_ACCOUNT_PER_HOUR + ["verification_limit"]
    assert "try again in an hour" in sent[-1].reply
    assert codes_sent(engine, sent[-1].case_id) == []


def test_twenty_concurrent_guesses_count_five_attempts(desk: SupportDesk,
                                                       engine: Engine) -> None:
    first = _send(desk, ANA_TEAPOT)
    (code,) = codes_sent(engine, first.case_id)
    start = threading.Barrier(20)

    def guess(_: int) -> list[str]:
        start.wait()
        return _codes(_send(desk, other_code(code), first.case_id).actions)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(guess, range(20)))
    assert sorted(a[0] for a in answers) == \
        ["verification_code_wrong"] * 4 + ["verification_locked"] * 16
    with engine.connect() as conn:
        row = conn.execute(select(identity_challenges)).one()
    assert (row.attempts, row.status) == (5, "locked")


def test_twenty_concurrent_right_codes_refund_once(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    first = _send(desk, ANA_TEAPOT)
    (code,) = codes_sent(engine, first.case_id)
    start = threading.Barrier(20)

    def answer(_: int) -> list[dict]:
        start.wait()
        return _send(desk, code, first.case_id).actions

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(answer, range(20)))
    assert sum("identity_verified" in _codes(a) for a in answers) == 1
    # The others arrive on a proven case: while the request is still in the case's flow
    # they replay its receipt; once the flow is closed a bare code asks which order.
    assert {_codes(a)[-1] for a in answers} <= {"refund_issued", "order_missing"}
    receipts = [a[-1] for a in answers if a[-1]["code"] == "refund_issued"]
    assert sorted(r["artifacts"]["replayed"] for r in receipts) == \
        [False] + [True] * (len(receipts) - 1)
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    assert len(codes_sent(engine, first.case_id)) == 1


def test_a_channel_verified_customer_needs_no_code(desk: SupportDesk, engine: Engine) -> None:
    before = snapshot(engine)
    out = _send(desk, ANA_TEAPOT, customer="ana.novak@example.com")
    assert out.status == "resolved" and codes_sent(engine, out.case_id) == []
    assert new_refunds(before, snapshot(engine)) == [("O-1001", 4800)]
    assert desk.get_case(out.case_id)["customer_verified_by"] == "channel"
    # Later messages on the case, without the channel's customer, are still proven.
    more = _send(desk, "And please refund $15 for order O-1002, a knife was missing.",
                 out.case_id)
    assert more.status == "resolved" and codes_sent(engine, out.case_id) == []


class _RelayDown:
    """A notifier whose relay refuses every message (the `Notifier` interface)."""

    def send(self, notification: Notification) -> None:
        raise NotificationFailed("relay down")


def test_a_code_that_cannot_be_sent_changes_nothing(engine: Engine, clock: Clock) -> None:
    desk = build_desk(engine, fixture_path=FIXTURE, today=TODAY, now=clock,
                      notifier=_RelayDown())
    before = snapshot(engine)
    out = _send(desk, ANA_TEAPOT)
    assert _codes(out.actions)[-1] == "verification_unavailable"
    assert "couldn't send a verification code" in out.reply and out.status == "resolved"
    assert snapshot(engine) == before
    with engine.connect() as conn:
        assert conn.execute(select(identity_challenges.c.status)).scalars().all() == \
            ["failed"]
    # A code that never left does not count against the account's hourly allowance.
    working = build_desk(engine, fixture_path=FIXTURE, today=TODAY, now=clock)
    sent = [_send(working, ANA_TEAPOT) for _ in range(MAX_CODES_PER_ACCOUNT_PER_HOUR)]
    assert {_codes(o.actions)[-1] for o in sent} == {"verification_code_sent"}


# -- pure helpers ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "code"), [
    ("482913", "482913"), ("my code is 482 913", "482913"), ("Code: 482-913.", "482913"),
    ("Der Code ist 012345", "012345"),
    ("482913 and please also refund order O-1002 for me today", None),
    ("4829135", None), ("48291", None), ("482913 or 123456", None), ("hello", None),
])
def test_find_code(text: str, code: str | None) -> None:
    assert find_code(text) == code


def test_codes_are_hashed_with_their_own_salt() -> None:
    one, two = hash_code("482913"), hash_code("482913")
    assert one != two and "482913" not in one
    assert code_matches(one, "482913") and not code_matches(one, "482914")

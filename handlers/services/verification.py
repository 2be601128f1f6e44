"""One-time codes that prove a customer owns the account their message claims.

A message that only *claims* an identity ("Hi, this is ben.ortiz@example.com") names an
account; it does not prove that its sender can read that account's mail. Before any
write for such a claim, the identity gate asks this service for a challenge:

1. `challenge(case_id=, account=)` makes a six-digit code from the OS's CSPRNG, stores
   only its salted HMAC-SHA256 (never the code) with an expiry (`ttl_s`, 10 minutes by
   default), and sends the code to the **address on file** through the `Notifier`. A
   challenge still pending on the case is not sent again.
2. The customer types the code on the **same case**; `check(case_id=, account_id=,
   code=)` compares it in constant time (`hmac.compare_digest`). Right → the challenge is
   used up and the case's customer is marked verified (`cases.customer_verified_by =
   'code'`), in one transaction. Wrong → one attempt is counted; the `max_attempts`-th
   wrong code (5 by default) locks the case: it gets no further codes, and the customer
   is told to start again. Expired → refused; the next challenge sends a new code.

Limits that bound guessing and mail flooding: `MAX_CODES_PER_CASE` codes per case and
`MAX_CODES_PER_ACCOUNT_PER_HOUR` codes per account across all cases, so opening new
cases does not buy an attacker more guesses than that (at most 5 × 5 = 25 guesses an
hour at one account, against a million codes).

Checks and state changes run under the challenge row's lock (PostgreSQL `FOR UPDATE`;
SQLite's `BEGIN IMMEDIATE` serialises writers), so concurrent guesses are each counted
and one code verifies once. Every answer is an `Observation` the desk turns into a reply.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from handlers.observation import Observation, fail, success
from handlers.services.cases import cases
from handlers.services.notifier import Notification, NotificationFailed, Notifier
from handlers.services.store import Account
from router.storage.db import read_connection

CODE_DIGITS = 6
DEFAULT_TTL_S = 600.0
DEFAULT_MAX_ATTEMPTS = 5
MAX_CODES_PER_CASE = 3
MAX_CODES_PER_ACCOUNT_PER_HOUR = 5

# A reply that is the code and little else: "482913", "my code is 482 913", "Code: 482913.".
_CODE = re.compile(r"(?<!\d)(\d{3})[ -]?(\d{3})(?!\d)")
_MAX_WORDS_AROUND_CODE = 4
_SENT_CODE = re.compile(r"your verification code is (\d{6})\.")

metadata = MetaData()

identity_challenges = Table(
    "identity_challenges",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("case_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("account_id", String(16), nullable=False, index=True),
    Column("code_hash", String(128), nullable=False),
    Column("status", String(16), nullable=False),  # pending|verified|expired|locked|failed
    Column("attempts", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("verified_at", DateTime(timezone=True)),
    # One sequence per case: two messages racing to challenge one case cannot both send.
    UniqueConstraint("case_id", "seq", name="uq_identity_challenges_case_seq"),
)


@dataclass(frozen=True)
class Challenge:
    id: str
    case_id: str
    seq: int
    account_id: str
    status: str
    attempts: int
    created_at: datetime
    expires_at: datetime


def find_code(text: str) -> str | None:
    """The code in a reply that is a code and little else; None for any other message.

    A longer message that happens to contain six digits is a request, not an answer.
    """
    found = list(_CODE.finditer(text))
    if len(found) != 1:
        return None
    rest = text[:found[0].start()] + " " + text[found[0].end():]
    if len(re.findall(r"\w+", rest)) > _MAX_WORDS_AROUND_CODE:
        return None
    return found[0].group(1) + found[0].group(2)


def code_in_notification(body: str) -> str | None:
    """The code in a notification this service wrote (for whoever reads the outbox)."""
    found = _SENT_CODE.search(body)
    return found.group(1) if found else None


def new_code() -> str:
    return f"{secrets.randbelow(10 ** CODE_DIGITS):0{CODE_DIGITS}d}"


def hash_code(code: str, *, salt: bytes | None = None) -> str:
    """`salt-hex$hmac-sha256-hex` of a code; a fresh random salt unless one is given."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hmac.new(salt, code.encode("ascii"), hashlib.sha256).hexdigest()
    return f"{salt.hex()}${digest}"


def code_matches(stored: str, code: str) -> bool:
    """Whether `code` is the one `stored` was made from; constant time in the digest."""
    salt_hex, _, digest = stored.partition("$")
    candidate = hash_code(code, salt=bytes.fromhex(salt_hex)).partition("$")[2]
    return hmac.compare_digest(candidate.encode("ascii"), digest.encode("ascii"))


def _utc(value: datetime) -> datetime:
    """SQLite hands timestamps back naive; they were written in UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _challenge(row: Any) -> Challenge:
    m = row._mapping
    return Challenge(id=m["id"], case_id=m["case_id"], seq=m["seq"],
                     account_id=m["account_id"], status=m["status"], attempts=m["attempts"],
                     created_at=_utc(m["created_at"]), expires_at=_utc(m["expires_at"]))


def _minutes(seconds: float) -> int:
    return max(1, round(seconds / 60))


class VerificationService:
    """Sends and checks one-time codes (see the module docstring)."""

    def __init__(self, engine: Engine, notifier: Notifier, *, ttl_s: float = DEFAULT_TTL_S,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._engine = engine
        self.notifier = notifier
        self.ttl_s = ttl_s
        self.max_attempts = max_attempts
        self._now = now

    # -- reads ------------------------------------------------------------------------

    def latest(self, case_id: str) -> Challenge | None:
        with read_connection(self._engine) as conn:
            return self._latest(conn, case_id)

    @staticmethod
    def _latest(conn: Connection, case_id: str, *, lock: bool = False) -> Challenge | None:
        query = (select(identity_challenges).where(identity_challenges.c.case_id == case_id)
                 .order_by(identity_challenges.c.seq.desc()).limit(1))
        row = conn.execute(query.with_for_update() if lock else query).first()
        return _challenge(row) if row else None

    # -- writes -----------------------------------------------------------------------

    def challenge(self, *, case_id: str, account: Account) -> Observation | None:
        """Send a code for `account` on this case, unless one is pending. The observation
        always stops the write that asked (it waits for the code); None means the account
        is already proven on this case (a code entered meanwhile), so the write may go on."""
        now = self._now()
        code = new_code()
        c = identity_challenges.c
        try:
            with self._engine.begin() as conn:
                latest = self._latest(conn, case_id, lock=True)
                if self._proven(conn, case_id, account.id):
                    return None
                if latest is not None and latest.status == "locked":
                    return self._locked()
                if latest is not None and latest.status == "pending":
                    if latest.account_id == account.id and latest.expires_at > now:
                        return self._pending(latest, now)
                    conn.execute(update(identity_challenges).where(c.id == latest.id)
                                 .values(status="expired"))
                seq = latest.seq + 1 if latest is not None else 1
                if seq > MAX_CODES_PER_CASE or self._sent_last_hour(conn, account.id, now) \
                        >= MAX_CODES_PER_ACCOUNT_PER_HOUR:
                    return fail("verification_limit", "no more codes may be sent for now",
                                retry=True, stop=True, retry_after_s=3600.0,
                                next_actions=["ask_customer_to_try_later"])
                challenge_id = f"vc-{uuid.uuid4().hex[:16]}"
                conn.execute(insert(identity_challenges).values(
                    id=challenge_id, case_id=case_id, seq=seq, account_id=account.id,
                    code_hash=hash_code(code), status="pending", attempts=0,
                    created_at=now, expires_at=now + timedelta(seconds=self.ttl_s)))
        except IntegrityError:
            # Another message on this case sent a code a moment ago: that one stands.
            latest = self.latest(case_id)
            if latest is None or latest.status != "pending":
                raise
            return self._pending(latest, now)
        try:
            self.notifier.send(self._notification(case_id, account, code))
        except NotificationFailed as exc:
            with self._engine.begin() as conn:
                conn.execute(update(identity_challenges).where(c.id == challenge_id)
                             .values(status="failed"))
            return fail("verification_unavailable", f"the code could not be sent ({exc})",
                        retry=True, stop=True, retry_after_s=60.0,
                        next_actions=["ask_customer_to_try_later"])
        return fail("verification_code_sent", "a one-time code was sent to the address on "
                    "file; nothing is written until it is entered", retry=False, stop=True,
                    next_actions=["ask_customer_for_code"], account_id=account.id,
                    challenge=challenge_id, ttl_minutes=_minutes(self.ttl_s))

    def check(self, *, case_id: str, account_id: str, code: str) -> Observation | None:
        """Check a code typed on the case; None when the case has no challenge to answer
        (the message is then handled like any other)."""
        now = self._now()
        c = identity_challenges.c
        with self._engine.begin() as conn:
            latest = self._latest(conn, case_id, lock=True)
            if latest is None or latest.account_id != account_id:
                return None
            if latest.status == "locked":
                return self._locked(code_entered=True)
            if latest.status != "pending":
                return None
            if latest.expires_at <= now:
                conn.execute(update(identity_challenges).where(c.id == latest.id)
                             .values(status="expired"))
                return fail("verification_code_expired", "the code had expired",
                            retry=False, stop=True, code_entered=True,
                            challenge=latest.id, next_actions=["send_new_code"])
            stored = conn.execute(select(c.code_hash).where(c.id == latest.id)).scalar_one()
            attempts = latest.attempts + 1
            if code_matches(stored, code):
                conn.execute(update(identity_challenges).where(c.id == latest.id).values(
                    status="verified", attempts=attempts, verified_at=now))
                conn.execute(update(cases).where(
                    cases.c.id == case_id, cases.c.customer_id == account_id,
                ).values(customer_verified_by="code"))
                return success("identity_verified", f"the code verified {account_id} on "
                               "this case", account_id=account_id, challenge=latest.id,
                               code_entered=True)
            locked = attempts >= self.max_attempts
            conn.execute(update(identity_challenges).where(c.id == latest.id).values(
                attempts=attempts, status="locked" if locked else "pending"))
        if locked:
            return self._locked(code_entered=True)
        return fail("verification_code_wrong", f"wrong code ({attempts} of "
                    f"{self.max_attempts} attempts)", retry=True, stop=True,
                    code_entered=True, challenge=latest.id,
                    attempts_left=self.max_attempts - attempts,
                    next_actions=["ask_customer_for_code"])

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _proven(conn: Connection, case_id: str, account_id: str) -> bool:
        row = conn.execute(select(cases.c.customer_id, cases.c.customer_verified_by)
                           .where(cases.c.id == case_id)).first()
        return row is not None and row[0] == account_id and row[1] is not None

    @staticmethod
    def _sent_last_hour(conn: Connection, account_id: str, now: datetime) -> int:
        c = identity_challenges.c
        return conn.execute(select(func.count()).select_from(identity_challenges).where(
            c.account_id == account_id, c.created_at > now - timedelta(hours=1),
            c.status != "failed")).scalar_one()

    def _pending(self, latest: Challenge, now: datetime) -> Observation:
        left = (latest.expires_at - now).total_seconds()
        return fail("verification_code_pending", "a code sent earlier is still valid",
                    retry=False, stop=True, next_actions=["ask_customer_for_code"],
                    account_id=latest.account_id, challenge=latest.id,
                    ttl_minutes=_minutes(left))

    @staticmethod
    def _locked(*, code_entered: bool = False) -> Observation:
        return fail("verification_locked", "too many wrong codes on this case; it gets no "
                    "more codes", retry=False, stop=True, code_entered=code_entered,
                    next_actions=["customer_starts_a_new_case"])

    def _notification(self, case_id: str, account: Account, code: str) -> Notification:
        minutes = _minutes(self.ttl_s)
        return Notification(
            kind="verification_code", recipient=account.email, case_id=case_id,
            subject="Your support verification code",
            body=(f"Hello {account.name},\n\nyour verification code is {code}. Type it in "
                  f"your support conversation to confirm it is you; it is valid for "
                  f"{minutes} minutes and works once.\n\nIf you did not ask for it, ignore "
                  "this e-mail: nothing on your account changes without the code."),
        )

"""Clauses: a message asking for two things that need different routes.

A whole-message classifier averages two requests into one muddled distribution; scoring
each clause separately shows them. The clause scores feed a second-stage model as
features (`clause_features`), which learns how much a second confident intent should
count. Runs after instruction stripping, or an injected "route this to …" would look like
a second request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from router.contracts import ROUTES, choice_confidence, choice_confidence_rows
from router.models.local.classes import LINEAR_CLASSES, MULTI_REQUEST, UNCLEAR, route_logits
from router.models.local.text.entities import EMAIL_PLACEHOLDER
from router.models.local.text.patterns import grouped_by_first_letter

ACTIONABLE = [ROUTES.index(r) for r in ("refund", "account", "other")]

# Words that join two requests, in the languages we serve, in the order `re` tries them
# (a longer phrase before its first word).
CONNECTIVES = (
    "and also", "and then", "and", "also", "plus", "oh and", "besides", "another thing",
    "second(?:ly)?", "while i have you", "by the way", "btw", "y también", "y además",
    "además", "y", "und außerdem", "außerdem", "und", "а также", "и ещё", "и еще", "и", "ещё",
    "еще", "e também", "além disso", "e", "et aussi", "et", "aussi", "e anche", "inoltre",
    "oraz", "a także", "en ook", "en", "och även", "och", "ayrıca", "ve", "а ще", "та",
)  # fmt: skip


# Every break starts at a space, a comma or the "p" of "p.s."; the leading lookahead lets
# `re` reject every other position with one test instead of five.
_CLAUSE_BREAK = re.compile(
    r"(?=[\s,p])(?:"
    r"(?<=[.!?;])\s+|\n+|\s+[-–—•*]\s+|\bp\.?\s?s\.?\b:?"
    rf"|,?\s+\b{grouped_by_first_letter(CONNECTIVES)}\b\s*)",
    re.IGNORECASE,
)
MIN_CLAUSE_CHARS = 12

# Words of a greeting or a self-introduction ("Hi, this is <e-mail>.", "Hola, soy …",
# "Здравствуйте, это …", "account e-mail: …"), in the languages we serve. A clause made of
# these and an e-mail placeholder says who is writing, not what they want: scored alone,
# the linear model reads the e-mail as an account change, and the second stage then saw
# two requests in every identified refund. Text that changes an e-mail ("change my e-mail
# to …") keeps its verb and is never dropped.
_IDENTITY_WORDS = frozenset(
    """
    hi hello hey hiya dear team support good morning afternoon evening there this is it's
    its it i'm im i am here my email e-mail mail address account name from the on file
    registered under login contact customer
    hola buenas buenos días dias soy mi correo es cuenta aquí aqui electrónico electronico
    hallo guten tag hier ist ich bin meine mein konto e-mail-adresse adresse mailadresse
    kundenkonto bonjour salut c'est ici je suis mon compte courriel électronique
    olá ola oi bom dia sou a o aqui meu minha conta é ciao salve buongiorno sono qui la mia
    il mio здравствуйте привет добрый день это я моя мой почта аккаунт адрес электронная
    dzień dobry cześć tu jestem moje goedendag goedemiddag dit mijn hej det är jag min mitt
    merhaba ben benim вітаю це мене мій пошта
    """.split()
)
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def is_identity_only(clause: str) -> bool:
    """True for a clause that only greets and names the writer's e-mail address."""
    if EMAIL_PLACEHOLDER not in clause:
        return False
    words = (w.lower() for w in _WORD.findall(clause))
    return all(w in _IDENTITY_WORDS or w == EMAIL_PLACEHOLDER for w in words)


def split_clauses(text: str) -> list[str]:
    """The clauses of an already-prepared text, without greeting-and-identity clauses."""
    parts = (p.strip(" ,;:-") for p in _CLAUSE_BREAK.split(text) if p)
    return [p for p in parts if len(p) >= MIN_CLAUSE_CHARS and not is_identity_only(p)]


# --- Clause features for the second stage -------------------------------------------------
#
# The clause scores become inputs of a small second-stage
# model (`router.models.local.linear.SecondStage`) next to the whole-message logits: the highest
# probability any clause gives each route, how confident the two strongest different
# actionable routes are, how many distinct routes clauses pick confidently, how many
# clauses there are and how long the message is. That model is fitted on held-out rows,
# so it learns how much a second confident intent should count.

CONFIDENCE_LEVELS = (0.3, 0.5, 0.7)
MAX_CLAUSES_FEATURE = 6
CLAUSE_FEATURES = (
    [f"whole_logit_{r}" for r in ROUTES]
    # The two unclear classes apart as well: `whole_logit_unclear` is their merged logit.
    + [f"whole_logit_{c}" for c in LINEAR_CLASSES[UNCLEAR:]]
    + [f"clause_max_{r}" for r in ROUTES]
    + ["actionable_second", "actionable_third"]
    + [f"distinct_routes_{level}" for level in CONFIDENCE_LEVELS]
    + ["n_clauses", "log_tokens", "at_most_two_tokens"]
    # How long the clauses behind the two strongest actionable routes are: a short
    # clause ("I changed my mind.") scored alone is read by its loudest word, so its
    # second route is weaker evidence of a second request than a long clause's.
    + ["second_clause_log_tokens", "first_clause_log_tokens", "second_clause_token_share"]
    # A clause the linear model reads as two requests on its own ("refund it and unsubscribe
    # me" has no clause break the splitter knows in every language).
    + ["clause_max_unclear_multi_request"]
)
# The second stage reads the clause features and two of the steering detector's
# (`router.models.local.model.with_steering_features`).
SECOND_STAGE_FEATURES = [*CLAUSE_FEATURES, "kept_steering", "kept_steering_x_actionable_second"]


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax; plain numpy (scipy's wrapper costs more than a few rows take)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def _softmax(row: list[float]) -> list[float]:
    top = max(row)
    exp = [math.exp(x - top) for x in row]
    total = sum(exp)
    return [x / total for x in exp]


def _route_logits(row: list[float]) -> list[float]:
    """`route_logits` of one row as a list (the unclear classes merged by logaddexp)."""
    a, b = row[UNCLEAR], row[UNCLEAR + 1]
    top = max(a, b)
    return [*row[:UNCLEAR], top + math.log1p(math.exp(-abs(a - b)))]


def clause_features(
    whole_logits: np.ndarray,
    clause_logits: np.ndarray,
    n_tokens: int,
    clause_tokens: Sequence[int],
) -> np.ndarray:
    """The second-stage inputs of one message (see `CLAUSE_FEATURES` for their order).

    `whole_logits` are the linear model's raw logits (one per `LINEAR_CLASSES`) for the
    whole (stripped) message, `clause_logits` one row per clause (possibly none), scored
    here over routes, `n_tokens` the number of whitespace-separated tokens of the
    stripped message, `clause_tokens` those of each clause.

    Plain Python over a few rows of five numbers: a single message is scored several
    times faster than through numpy's per-call overhead. `clause_features_batch` is the
    vectorised twin for many messages; a test holds the two equal.
    """
    whole = whole_logits.tolist()
    linear = clause_logits.tolist() if len(clause_logits) else [whole]
    tokens = [float(t) for t in clause_tokens] if len(clause_logits) else [float(n_tokens)]
    rows = [_softmax(_route_logits(row)) for row in linear]
    n = len(ROUTES)
    distinct: list[set[int]] = [set() for _ in CONFIDENCE_LEVELS]
    for row in rows:
        best = max(row)
        choice = row.index(best)
        confidence = choice_confidence(best, n)
        for found, level in zip(distinct, CONFIDENCE_LEVELS, strict=True):
            if choice != UNCLEAR and confidence >= level:
                found.add(choice)
    highest = [max(row[r] for row in rows) for r in range(n)]
    actionable = [highest[r] for r in ACTIONABLE]
    order = sorted(range(len(ACTIONABLE)), key=actionable.__getitem__)  # stable, ascending
    # The clause holding each actionable route's highest probability (ties: the last).
    holder = [max(i for i, row in enumerate(rows) if row[r] == highest[r]) for r in ACTIONABLE]
    second, first = tokens[holder[order[1]]], tokens[holder[order[2]]]
    return np.array(
        [
            *_route_logits(whole),
            *whole[UNCLEAR:],
            *highest,
            actionable[order[1]],
            actionable[order[0]],
            *(len(found) for found in distinct),
            min(len(clause_logits), MAX_CLAUSES_FEATURE),
            math.log1p(n_tokens),
            float(n_tokens <= 2),
            math.log1p(second),
            math.log1p(first),
            second / max(sum(tokens), 1.0),
            max(_softmax(row)[MULTI_REQUEST] for row in linear),
        ]
    )


def clause_features_batch(
    whole_logits: np.ndarray,
    clause_logits: np.ndarray,
    clause_counts: list[int],
    token_counts: list[int],
    clause_token_counts: Sequence[int],
) -> np.ndarray:
    """`clause_features` for many messages at once (vectorised; equal to it row by row).

    `clause_logits` stacks every message's clauses, `clause_counts` says how many each
    message has, `clause_token_counts` how many tokens each stacked clause has. A message
    without clauses stands in for its own single clause.
    """
    counts = np.asarray(clause_counts, dtype=np.intp)
    n_messages = len(counts)
    # Messages without clauses contribute their whole-message logits as one row.
    empty = counts == 0
    rows_per_message = np.where(empty, 1, counts)
    starts = np.zeros(n_messages, dtype=np.intp)
    np.cumsum(rows_per_message[:-1], out=starts[1:])
    logits = np.empty((int(rows_per_message.sum()), whole_logits.shape[1]))
    clause_rows = np.ones(len(logits), dtype=bool)
    clause_rows[starts[empty]] = False
    logits[clause_rows] = clause_logits
    logits[starts[empty]] = whole_logits[empty]
    rows = softmax_rows(route_logits(logits)) if len(logits) else route_logits(logits)
    multi = softmax_rows(logits)[:, MULTI_REQUEST] if len(logits) else np.zeros(0)
    n = rows.shape[1]
    choices = rows.argmax(axis=1) if len(rows) else np.zeros(0, dtype=np.intp)
    confidences = choice_confidence_rows(rows.max(axis=1, initial=0.0), n)
    highest = np.maximum.reduceat(rows, starts, axis=0) if n_messages else rows[:0]
    ranked = np.sort(highest[:, ACTIONABLE], axis=1)
    one_hot = np.zeros((len(rows), n), dtype=bool)
    one_hot[np.arange(len(rows)), choices] = True
    one_hot[:, UNCLEAR] = False
    distinct = [
        np.logical_or.reduceat(one_hot & (confidences >= level)[:, None], starts, axis=0).sum(1)
        if n_messages
        else np.zeros(0)
        for level in CONFIDENCE_LEVELS
    ]
    tokens = np.asarray(token_counts, dtype=float)
    row_tokens = np.empty(len(logits))
    row_tokens[clause_rows] = np.asarray(clause_token_counts, dtype=float)
    row_tokens[starts[empty]] = tokens[empty]
    second, first = _holder_tokens(rows, starts, rows_per_message, highest, row_tokens)
    per_message_tokens = (
        np.add.reduceat(row_tokens, starts) if n_messages else np.zeros(0)
    )
    return np.column_stack(
        [
            route_logits(whole_logits),
            whole_logits[:, UNCLEAR:],
            highest,
            ranked[:, 1],
            ranked[:, 0],
            *distinct,
            np.minimum(counts, MAX_CLAUSES_FEATURE),
            np.log1p(tokens),
            (tokens <= 2).astype(float),
            np.log1p(second),
            np.log1p(first),
            second / np.maximum(per_message_tokens, 1.0),
            np.maximum.reduceat(multi, starts) if n_messages else np.zeros(0),
        ]
    ).reshape(n_messages, len(CLAUSE_FEATURES))


def _holder_tokens(
    rows: np.ndarray,
    starts: np.ndarray,
    rows_per_message: np.ndarray,
    highest: np.ndarray,
    row_tokens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of the clauses holding the second and the first actionable route's maximum."""
    n_messages = len(starts)
    if n_messages == 0:
        return np.zeros(0), np.zeros(0)
    message_of_row = np.repeat(np.arange(n_messages), rows_per_message)
    holders = []
    for route in ACTIONABLE:
        # Sorted by (message, probability, row): each message's last row holds its maximum
        # (ties go to the later clause, as in `clause_features`).
        order = np.lexsort((np.arange(len(rows)), rows[:, route], message_of_row))
        ends = np.cumsum(rows_per_message) - 1
        holders.append(order[ends])
    holders_by_route = np.column_stack(holders)  # (messages, actionable routes)
    rank = np.argsort(highest[:, ACTIONABLE], axis=1, kind="stable")
    index = np.arange(n_messages)
    second = row_tokens[holders_by_route[index, rank[:, 1]]]
    first = row_tokens[holders_by_route[index, rank[:, 2]]]
    return second, first

"""The two-request detector: a message asking for two things that need different routes.

A whole-message classifier averages two requests into one muddled distribution; scoring
each clause separately shows them. When two clauses each confidently pick a different
actionable route, the message is unclear (the customer is asked which to do first).
Runs after instruction stripping, or an injected "route this to …" would look like a
second request.
"""

from __future__ import annotations

import re

import numpy as np

from router.contracts import ROUTES

UNCLEAR = ROUTES.index("unclear")
ACTIONABLE = [ROUTES.index(r) for r in ("refund", "account", "other")]

_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?;])\s+|\n+|\s+[-–—•*]\s+|\bp\.?\s?s\.?\b:?"
    r"|,?\s+\b(?:and also|and then|and|also|plus|oh and|besides|another thing|second(?:ly)?|"
    r"while i have you|by the way|btw|y también|y además|además|y|und außerdem|außerdem|und|"
    r"а также|и ещё|и еще|и|ещё|еще|e também|além disso|e|et aussi|et|aussi|"
    r"e anche|inoltre|oraz|a także|en ook|en|och även|och|ayrıca|ve|а ще|та)\b\s*",
    re.IGNORECASE,
)
MIN_CLAUSE_CHARS = 12


def split_clauses(text: str) -> list[str]:
    parts = (p.strip(" ,;:-") for p in _CLAUSE_BREAK.split(text) if p)
    return [p for p in parts if len(p) >= MIN_CLAUSE_CHARS]


def distinct_confident_routes(
    clause_probabilities: np.ndarray, *, min_confidence: float
) -> set[int]:
    """Actionable routes that some clause picks with at least `min_confidence`."""
    n = clause_probabilities.shape[1]
    routes: set[int] = set()
    for row in clause_probabilities:
        choice = int(row.argmax())
        confidence = (row[choice] - 1 / n) / (1 - 1 / n)
        if choice in ACTIONABLE and confidence >= min_confidence:
            routes.add(choice)
    return routes


def shift_to_unclear(
    probabilities: np.ndarray,
    clause_probabilities: np.ndarray,
    *,
    min_confidence: float,
    weight: float = 0.6,
) -> np.ndarray:
    """Move mass to `unclear` when two clauses confidently want different routes.

    `clause_probabilities` has one row per clause of the message. With weight > 0.5,
    unclear becomes the choice whatever the whole-message scores said.
    """
    if len(clause_probabilities) < 2 or probabilities.argmax() == UNCLEAR:
        return probabilities
    if len(distinct_confident_routes(clause_probabilities, min_confidence=min_confidence)) < 2:
        return probabilities
    shifted = probabilities * (1.0 - weight)
    shifted[UNCLEAR] += weight
    return shifted

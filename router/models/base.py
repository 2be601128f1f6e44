"""The one contract every decision-model backend fulfils."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from router.contracts import RouteScores


@runtime_checkable
class DecisionModel(Protocol):
    """Scores a customer message over the four routes.

    `name` identifies the exact model (backend, version, artifact hash prefix) and is
    what `RouteScores.model`, the decision log and the policy artifact record.
    Implementations raise `router.errors.ModelUnavailable` when they cannot answer.
    """

    @property
    def name(self) -> str: ...

    def score(self, text: str) -> RouteScores: ...

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]: ...

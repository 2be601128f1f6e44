"""Scoring one request with one decision model (a message, or an answer to our question)."""

from __future__ import annotations

from router.contracts import RouteScores
from router.models.base import DecisionModel
from router.routing.rules import RouteRequest


def score_request(model: DecisionModel, request: RouteRequest) -> RouteScores:
    """The message's scores; for an answer to our clarifying question, the surer of the
    answer alone and the answer read after the messages it answers.

    "It's order O-1001." says nothing alone but completes "my teapot arrived broken, I'd
    like a refund"; a clear second message after a vague "I need help" is clearer alone.
    Both are the model's own scores, so the threshold still decides.
    """
    scores = model.score(request.text)
    if not request.earlier_texts:
        return scores
    together = model.score("\n".join([*request.earlier_texts, request.text]))
    return together if together.confidence > scores.confidence else scores

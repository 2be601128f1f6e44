"""`score_request`: how the router scores a message, alone or as an answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.app.training import TrainResult
from router.models.local.model import LocalRouteModel
from router.routing.rules import RouteRequest
from router.routing.service import score_request


@pytest.fixture(scope="module")
def model(trained: TrainResult) -> LocalRouteModel:
    return LocalRouteModel.load(Path(trained.model_path))


def test_a_new_message_is_scored_alone(model: LocalRouteModel) -> None:
    text = "Please stop the marketing e-mails."
    assert score_request(model, RouteRequest(text=text)) == model.score(text)


@pytest.mark.parametrize(
    ("earlier", "text"),
    [
        ("My teapot arrived broken, I'd like a refund.", "It's order O-1001."),
        ("Hi, I need some help please.", "Please refund my broken teapot, order O-1001."),
    ],
)
def test_an_answer_gets_the_surer_of_alone_and_with_what_it_answers(
    model: LocalRouteModel, earlier: str, text: str
) -> None:
    scores = score_request(model, RouteRequest(text=text, earlier_texts=(earlier,)))
    alone, together = model.score(text), model.score(f"{earlier}\n{text}")
    assert alone != together
    assert scores == max(alone, together, key=lambda s: s.confidence)

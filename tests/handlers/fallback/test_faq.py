"""The FAQ retrieval: data files, the id-hash split, threshold choice and held-out precision."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from handlers.fallback.faq import (
    HANDOFF,
    FaqIndex,
    choose_threshold,
    evaluate,
    fit_threshold,
    load_questions,
    load_sections,
    predict,
    split_questions,
)
from router.errors import InvalidInput


@pytest.fixture(scope="module")
def index() -> FaqIndex:
    return FaqIndex().fit(load_sections())


def test_faq_covers_the_shops_topics_and_its_rules() -> None:
    sections = load_sections()
    assert {s.topic for s in sections} >= {"shipping", "returns", "payments", "passwords",
                                           "warranties", "stores", "contact"}
    refunds = next(s for s in sections if s.id == "refund-policy").answer
    assert "30 days after delivery" in refunds and "$200" in refunds


def test_labelled_questions_are_many_multilingual_and_name_known_sections() -> None:
    questions = load_questions()
    assert len(questions) >= 80
    assert len({q.lang for q in questions}) >= 6
    assert sum(q.answer == HANDOFF for q in questions) >= 15
    assert len({q.id for q in questions}) == len(questions)
    _, test = split_questions(questions)
    assert 10 <= len(test) < len(questions) / 2


def test_held_out_precision_of_direct_answers_is_at_least_95_percent(index: FaqIndex) -> None:
    questions = load_questions()
    threshold = fit_threshold(index, questions)
    _, test = split_questions(questions)
    result = evaluate(index, test, threshold=threshold)
    assert result.precision_score >= 0.95, result.as_dict()
    assert result.answered >= 5, result.as_dict()  # not "precise" by answering nothing


def test_threshold_ignores_the_test_part(index: FaqIndex) -> None:
    questions = load_questions()
    fit, test = split_questions(questions)
    wrong_test = [q.model_copy(update={"answer": HANDOFF}) for q in test]
    assert fit_threshold(index, fit + wrong_test) == fit_threshold(index, questions)


def test_questions_about_an_order_are_never_answered_from_the_faq(index: FaqIndex) -> None:
    assert predict(index, "How can I track my parcel?", threshold=0.3)[0] == "tracking"
    assert predict(index, "How can I track my parcel O-1004?", threshold=0.0)[0] == HANDOFF


@pytest.mark.parametrize(("scores", "correct", "target", "expected"), [
    ([0.9, 0.8, 0.7, 0.6], [True, True, True, False], 0.95, 0.7),
    ([0.9, 0.8, 0.7, 0.6], [True, True, True, False], 0.75, 0.6),
    ([0.9, 0.8, 0.8, 0.6], [True, True, False, True], 0.95, 0.9),  # ties go together
    ([0.9, 0.8, 0.7, 0.6], [False, True, True, True], 0.75, 0.6),
])
def test_choose_threshold_by_hand(scores: list[float], correct: list[bool], target: float,
                                  expected: float) -> None:
    assert choose_threshold(scores, correct, target_precision=target) == pytest.approx(expected)


def test_choose_threshold_hands_everything_off_when_nothing_qualifies() -> None:
    assert choose_threshold([0.5, 0.4], [False, False]) > 0.5
    assert choose_threshold([], []) == 1.0
    with pytest.raises(InvalidInput, match="length"):
        choose_threshold([0.5], [])


@pytest.mark.parametrize(("faq", "questions", "match"), [
    ("not json", "", "not a readable FAQ"),
    (json.dumps({"sections": []}), "", "unique, non-empty"),
    (json.dumps({"sections": [{"id": "a", "topic": "t", "title": "T", "answer": "x"}]}),
     json.dumps({"id": "q1", "text": "hi", "answer": "b"}), "unknown answer 'b'"),
    (json.dumps({"sections": [{"id": "a", "topic": "t", "title": "T", "answer": "x"}]}),
     json.dumps({"id": "q1", "text": "", "answer": "a"}), "questions.jsonl:1"),
])
def test_bad_faq_files_are_named(tmp_path: Path, faq: str, questions: str, match: str) -> None:
    (tmp_path / "faq.json").write_text(faq, encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text(questions, encoding="utf-8")
    with pytest.raises(InvalidInput, match=match):
        load_questions(tmp_path)


def test_a_question_scores_as_the_fitted_vectorizer_would(index: FaqIndex) -> None:
    """The serving path scores without scikit-learn's `transform`: on every labelled
    question (and text that shares no n-gram with the FAQ) it must agree with it."""
    texts = [q.text for q in load_questions()] + ["", "zzzz qqqq", "Wo ist mein Paket?"]
    for text in texts:
        expected = (index.matrix_ @ index.vectorizer_.transform([text]).T).toarray().ravel()
        np.testing.assert_allclose(index.similarities(text), expected, rtol=1e-12, atol=1e-12)

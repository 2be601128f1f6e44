"""The shop's FAQ and the retrieval over it: TF-IDF, a threshold, and its evaluation.

`datasets/faq/faq.json` holds the sections (id, title, answer, typical questions in
several languages). `FaqIndex` indexes each section's title and questions with
character n-gram TF-IDF (scikit-learn, `char_wb` 3–5 grams, so German, French or Polish
questions match without stemmers) and scores a question by its cosine similarity to the
closest indexed text of each section.

The threshold that turns a match into a direct answer is chosen on labelled questions
(`datasets/faq/questions.jsonl`: `{id, text, lang, answer: <section id> | "handoff"}`),
never on their test part: rows are split by the hash of their id exactly as
`calibration.data` splits routing data, and `choose_threshold` takes the lowest
similarity at which the direct answers on the non-test rows reach the target precision
(95% by default). The test part only reports (`support-router faq-eval`). Below the
threshold the question goes to a person.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sklearn.feature_extraction.text import TfidfVectorizer

from calibration.data import split_of
from handlers.extract import find_order_ids
from router.errors import InvalidInput
from router.packaged import data_path

DEFAULT_FAQ_DIR = data_path("faq")  # the shipped FAQ (router/packaged.py)
HANDOFF = "handoff"
TARGET_PRECISION = 0.95


class FaqSection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1)
    topic: str
    title: str
    answer: str
    questions: list[str] = Field(default_factory=list)


class FaqQuestion(BaseModel):
    """One labelled customer question: the section that answers it, or `handoff`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    lang: str = "en"
    answer: str


@dataclass(frozen=True)
class FaqHit:
    section: FaqSection
    score: float


@dataclass(frozen=True)
class FaqEvaluation:
    """How the responder's FAQ path does on labelled questions at one threshold."""

    threshold: float
    n: int
    answered: int
    correct: int
    handed_off_correctly: int

    @property
    def precision_score(self) -> float:
        """Share of direct answers that give the labelled section (1.0 when none)."""
        return self.correct / self.answered if self.answered else 1.0

    @property
    def handoff_rate(self) -> float:
        return (self.n - self.answered) / self.n if self.n else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"threshold": self.threshold, "n": self.n, "answered": self.answered,
                "correct": self.correct, "handed_off": self.n - self.answered,
                "handed_off_correctly": self.handed_off_correctly,
                "precision": self.precision_score, "handoff_rate": self.handoff_rate}


def load_sections(faq_dir: Path = DEFAULT_FAQ_DIR) -> list[FaqSection]:
    path = Path(faq_dir) / "faq.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        sections = [FaqSection.model_validate(s) for s in raw["sections"]]
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise InvalidInput(f"{path}: not a readable FAQ ({exc})", code="bad_faq") from exc
    ids = [s.id for s in sections]
    if not sections or len(set(ids)) != len(ids) or HANDOFF in ids:
        raise InvalidInput(f"{path}: section ids must be unique, non-empty and not "
                           f"{HANDOFF!r}", code="bad_faq")
    return sections


def load_questions(faq_dir: Path = DEFAULT_FAQ_DIR, *,
                   sections: Sequence[FaqSection] | None = None) -> list[FaqQuestion]:
    """The labelled questions; an answer naming no known section is an error."""
    path = Path(faq_dir) / "questions.jsonl"
    known = {s.id for s in sections or load_sections(faq_dir)} | {HANDOFF}
    rows: list[FaqQuestion] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = FaqQuestion.model_validate_json(line)
        except ValidationError as exc:
            raise InvalidInput(f"{path}:{number}: {exc.errors()[0]['msg']}",
                               code="bad_faq_question") from exc
        if row.answer not in known:
            raise InvalidInput(f"{path}:{number}: unknown answer {row.answer!r}",
                               code="bad_faq_question")
        rows.append(row)
    return rows


def split_questions(questions: Sequence[FaqQuestion]) -> tuple[list[FaqQuestion],
                                                               list[FaqQuestion]]:
    """(non-test, test) by the id hash of `calibration.data`."""
    test = [q for q in questions if split_of(q.id) == "test"]
    return [q for q in questions if split_of(q.id) != "test"], test


class FaqIndex:
    """Character n-gram TF-IDF over each section's title and typical questions.

    Fitted with scikit-learn; a question is scored without it: its n-grams (the fitted
    vectorizer's own analyzer), sublinear tf × idf, L2-normalised, dotted with the indexed
    texts through the matrix's columns. That is the vectorizer's `transform` less its
    per-call validation and sparse-matrix building, which cost a millisecond a question,
    more than all the other work of a message together.
    """

    def __init__(self, *, ngram_range: tuple[int, int] = (3, 5)) -> None:
        self.ngram_range = ngram_range

    def fit(self, sections: Sequence[FaqSection]) -> FaqIndex:
        texts, owners = [], []
        for position, section in enumerate(sections):
            for text in (section.title, *section.questions):
                texts.append(text)
                owners.append(position)
        self.sections_ = list(sections)
        self.vectorizer_ = TfidfVectorizer(analyzer="char_wb", ngram_range=self.ngram_range,
                                           lowercase=True, sublinear_tf=True)
        self.matrix_ = self.vectorizer_.fit_transform(texts)
        self.owners_ = np.asarray(owners)
        self._analyze = self.vectorizer_.build_analyzer()
        self._vocabulary: dict[str, int] = self.vectorizer_.vocabulary_
        self._idf = self.vectorizer_.idf_
        self._columns = self.matrix_.tocsc()
        return self

    def similarities(self, text: str) -> np.ndarray:
        """Cosine similarity of `text` to every indexed text (as the fitted vectorizer's
        `transform` would give it)."""
        counts: dict[int, int] = {}
        for gram in self._analyze(text):
            column = self._vocabulary.get(gram)
            if column is not None:
                counts[column] = counts.get(column, 0) + 1
        n_texts = self.matrix_.shape[0]
        if not counts:
            return np.zeros(n_texts)
        columns = np.fromiter(counts, dtype=np.intp, count=len(counts))
        weights = (1.0 + np.log(np.fromiter(counts.values(), dtype=float, count=len(counts)))
                   ) * self._idf[columns]
        weights /= np.sqrt(weights @ weights)
        # Every stored entry of those columns at once: column j's entries are
        # indptr[j]:indptr[j + 1] of (indices, data).
        indptr = self._columns.indptr
        starts, lengths = indptr[columns], indptr[columns + 1] - indptr[columns]
        ends = np.cumsum(lengths)
        entries = np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1])
        return np.bincount(self._columns.indices[entries],
                           weights=np.repeat(weights, lengths) * self._columns.data[entries],
                           minlength=n_texts)

    def search(self, text: str, *, k: int = 3) -> list[FaqHit]:
        """The `k` best sections for a question, best first (score = max cosine)."""
        similarities = self.similarities(text)
        best = np.zeros(len(self.sections_))
        np.maximum.at(best, self.owners_, similarities)
        order = np.argsort(-best, kind="stable")[:k]
        return [FaqHit(self.sections_[i], float(best[i])) for i in order]

    def best(self, text: str) -> FaqHit:
        return self.search(text, k=1)[0]


def predict(index: FaqIndex, text: str, *, threshold: float) -> tuple[str, float]:
    """The section to answer with, or `handoff`, and the best similarity.

    A question naming an order is about that order, not the FAQ: it is never answered
    from the FAQ (the responder answers it from the store when the order is the
    customer's own).
    """
    hit = index.best(text)
    if find_order_ids(text) or hit.score < threshold:
        return HANDOFF, hit.score
    return hit.section.id, hit.score


def choose_threshold(scores: Sequence[float], correct: Sequence[bool], *,
                     target_precision: float = TARGET_PRECISION) -> float:
    """The lowest threshold whose direct answers reach `target_precision` (pure).

    `scores` are best similarities, `correct` whether the best section is the labelled
    answer. Candidate thresholds are the scores themselves (ties taken together); the
    lowest candidate at which the rows scoring at or above it are at least
    `target_precision` correct wins. With none, the threshold is just above the top
    score (hand everything off).
    """
    if len(scores) != len(correct):
        raise InvalidInput("scores and correct differ in length", code="invalid_input")
    if not len(scores):
        return 1.0
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    ranked = np.asarray(scores, dtype=float)[order]
    hits = np.cumsum(np.asarray(correct, dtype=float)[order])
    precision = hits / np.arange(1, len(ranked) + 1)
    chosen = float(np.nextafter(ranked[0], np.inf))
    for position, score in enumerate(ranked):
        last_of_tie = position + 1 == len(ranked) or ranked[position + 1] < score
        if last_of_tie and precision[position] >= target_precision:
            chosen = float(score)
    return chosen


def fit_threshold(index: FaqIndex, questions: Sequence[FaqQuestion], *,
                  target_precision: float = TARGET_PRECISION) -> float:
    """Choose the threshold on the non-test part of the labelled questions."""
    fit_rows, _ = split_questions(questions)
    fit_rows = [q for q in fit_rows if not find_order_ids(q.text)]
    hits = [index.best(q.text) for q in fit_rows]
    return choose_threshold([h.score for h in hits],
                            [h.section.id == q.answer for h, q in zip(hits, fit_rows,
                                                                      strict=True)],
                            target_precision=target_precision)


def evaluate(index: FaqIndex, questions: Sequence[FaqQuestion], *,
             threshold: float) -> FaqEvaluation:
    """Precision of direct answers and hand-off rate on the given questions."""
    answered = correct = handed_off_correctly = 0
    for question in questions:
        label, _ = predict(index, question.text, threshold=threshold)
        if label == HANDOFF:
            handed_off_correctly += question.answer == HANDOFF
            continue
        answered += 1
        correct += label == question.answer
    return FaqEvaluation(threshold=threshold, n=len(questions), answered=answered,
                         correct=correct, handed_off_correctly=handed_off_correctly)

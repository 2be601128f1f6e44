"""The labelled routing data meets the bar in the router issue and the labelling guide."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from calibration.data import LabelledRow, load_labelled, load_steering_segments, split_of
from tests.paths import DATASETS

ROUTES_DIR = DATASETS / "routes"
REQUIRED_LANGS = {"es", "ru", "de", "pt", "fr", "it"}


@pytest.fixture(scope="module")
def rows() -> list[LabelledRow]:
    return load_labelled(ROUTES_DIR)


def _normalise(text: str) -> str:
    text = text.lower()
    text = re.sub(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", " EMAIL ", text)
    text = re.sub(r"\b[a-z]-?\d{3,}\b", " ORDERID ", text)
    text = re.sub(r"\d+([.,]\d+)?", " NUM ", text)
    return re.sub(r"\s+", " ", text).strip()


def test_ids_are_unique(rows: list[LabelledRow]) -> None:
    duplicated = [i for i, n in Counter(r.id for r in rows).items() if n > 1]
    assert not duplicated


def test_size_and_balance(rows: list[LabelledRow]) -> None:
    assert len(rows) >= 1200
    per_label = Counter(r.label for r in rows)
    assert min(per_label.values()) >= 250, per_label


def test_languages(rows: list[LabelledRow]) -> None:
    langs = Counter(r.lang for r in rows)
    assert REQUIRED_LANGS <= set(langs), langs
    assert sum(n for lang, n in langs.items() if lang != "en") >= 0.2 * len(rows)


def test_required_kinds_of_message(rows: list[LabelledRow]) -> None:
    tags = Counter(tag for r in rows for tag in r.tags)
    assert tags["injection"] >= 60
    assert sum(1 for r in rows if r.label == "unclear" and "multi_request" in r.tags) >= 150
    assert sum(1 for r in rows if r.label == "unclear" and "vague" in r.tags) >= 100
    assert sum(1 for r in rows if len(r.text) > 400) >= 20
    assert sum(1 for r in rows if len(r.text.split()) == 1) >= 15


def test_every_unclear_row_is_tagged_with_why(rows: list[LabelledRow]) -> None:
    """The local model fits `unclear` as two classes, split by the `multi_request` tag
    (router/models/local/classes.py): an untagged two-request row trains the vague class
    and pulls clear requests towards `unclear`. A steering-only message asks for nothing
    (LABELLING.md rule 2) and carries `injection`."""
    why = {"multi_request", "vague", "injection"}
    untagged = [r.id for r in rows if r.label == "unclear" and not why & set(r.tags)]
    both = [r.id for r in rows if {"multi_request", "vague"} <= set(r.tags)]
    off_route = [r.id for r in rows
                 if r.label != "unclear" and {"multi_request", "vague"} & set(r.tags)]
    assert not untagged and not both and not off_route, (untagged[:10], both[:10], off_route[:10])


def test_no_templated_near_duplicates(rows: list[LabelledRow]) -> None:
    texts = [_normalise(r.text) for r in rows]
    matrix = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit_transform(texts)
    pairs = []
    # In blocks of rows: the whole similarity matrix of 17,000 rows would take 2.3 GB.
    for start in range(0, len(texts), 2_000):
        block = (matrix[start : start + 2_000] @ matrix.T).toarray()
        i, j = np.nonzero(block > 0.9)
        i += start
        pairs += [
            (rows[a].id, rows[b].id, rows[a].text, rows[b].text)
            for a, b in zip(i, j, strict=True)
            if a < b
        ]
    assert not pairs, pairs[:10]


def test_split_is_about_60_20_20(rows: list[LabelledRow]) -> None:
    counts = Counter(split_of(r.id) for r in rows)
    for name, share in (("train", 0.6), ("calibration", 0.2), ("test", 0.2)):
        assert abs(counts[name] / len(rows) - share) < 0.05, counts


def test_marked_steering_is_verbatim_and_only_on_injection_rows(rows: list[LabelledRow]) -> None:
    marked = [r for r in rows if r.steering is not None]
    assert len(marked) >= 800
    for row in marked:
        assert "injection" in row.tags, row.id
        assert all(span and span in row.text for span in row.steering), row.id


def test_steering_segments_have_both_kinds_in_every_language() -> None:
    segments = load_steering_segments(DATASETS / "steering")
    assert len({s.id for s in segments}) == len(segments)
    assert len({s.text.strip().lower() for s in segments}) == len(segments)
    kinds = Counter((s.lang, s.steering) for s in segments)
    for lang in {s.lang for s in segments}:
        assert kinds[lang, True] >= 100 and kinds[lang, False] >= 30, lang

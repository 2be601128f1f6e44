"""The style-shifted development sets stay held out: nothing `train` reads is (nearly) one
of their rows, so their figures measure text the model never saw."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from calibration.data import LabelledRow, load_labelled
from tests.datasets.test_routes_data import _normalise
from tests.paths import DATASETS

DEV_FILES = sorted((DATASETS / "dev").glob("*.jsonl"))


@pytest.fixture(scope="module")
def dev_rows() -> list[LabelledRow]:
    return [row for path in DEV_FILES for row in load_labelled(path)]


def test_every_set_the_readme_names_is_there(dev_rows: list[LabelledRow]) -> None:
    readme = (DATASETS / "dev" / "README.md").read_text()
    assert len(DEV_FILES) >= 3
    for path in DEV_FILES:
        assert f"`{path.name}`" in readme, path.name
    ids = Counter(row.id for row in dev_rows)
    assert [i for i, n in ids.items() if n > 1] == []


def test_no_dev_row_is_a_near_copy_of_a_training_row(dev_rows: list[LabelledRow]) -> None:
    training = load_labelled(DATASETS / "routes")
    dev_texts = [_normalise(r.text) for r in dev_rows]
    train_texts = [_normalise(r.text) for r in training]
    vectoriser = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit(
        dev_texts + train_texts)
    similarity = vectoriser.transform(dev_texts) @ vectoriser.transform(train_texts).T
    best = np.asarray(similarity.max(axis=1).todense()).ravel()
    copies = [(dev_rows[i].id, dev_rows[i].text) for i in np.nonzero(best > 0.9)[0]]
    assert copies == []

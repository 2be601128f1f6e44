"""The shared cross-fit helper gives the folds and out-of-fold scores of the loop it
replaced (the loop `train_artifact` and `train_e5_artifact` each carried)."""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest
from joblib import Parallel, delayed
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from router.models.crossfit import CROSS_FIT_FOLDS, cross_fit, parallel_jobs, stratified_folds


def _synthetic(seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(240, 6))
    y = np.argmax(x[:, :3] + rng.normal(scale=0.8, size=(240, 3)), axis=1)
    y[:7] = 3  # a rare class, as the unclear classes are
    return x, y


def _fold_probabilities(
    x: np.ndarray, y: np.ndarray, fit_rows: np.ndarray, held_rows: np.ndarray
) -> np.ndarray:
    model = LogisticRegression(C=0.5, max_iter=1000).fit(x[fit_rows], y[fit_rows])
    return model.predict_proba(x[held_rows])


def _replaced_loop(x: np.ndarray, y: np.ndarray) -> tuple[list, np.ndarray]:
    """The loop as it was written out in each trainer."""
    texts = [f"row {i}" for i in range(len(y))]  # the trainers split their texts
    folds = list(StratifiedKFold(CROSS_FIT_FOLDS, shuffle=True, random_state=0).split(texts, y))

    def job(fit_rows: np.ndarray, held_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return held_rows, _fold_probabilities(x, y, fit_rows, held_rows)

    out = np.zeros((len(y), 4))
    results = Parallel(n_jobs=min(CROSS_FIT_FOLDS, os.cpu_count() or 1), backend="threading")(
        delayed(job)(fit_rows, held_rows) for fit_rows, held_rows in folds
    )
    for held_rows, part in results:
        out[held_rows] = part
    return folds, out


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_helper_equals_the_loop_it_replaced(n_jobs: int) -> None:
    x, y = _synthetic()
    old_folds, old_out = _replaced_loop(x, y)
    folds = stratified_folds(y)
    assert len(folds) == len(old_folds) == CROSS_FIT_FOLDS
    for (fit, held), (old_fit, old_held) in zip(folds, old_folds, strict=True):
        np.testing.assert_array_equal(fit, old_fit)
        np.testing.assert_array_equal(held, old_held)
    out = cross_fit(partial(_fold_probabilities, x, y), folds, n_rows=len(y), n_jobs=n_jobs)
    np.testing.assert_array_equal(out, old_out)


def test_every_row_is_held_out_once_and_scored_by_a_model_that_never_saw_it() -> None:
    x, y = _synthetic()
    folds = stratified_folds(y)
    held = np.concatenate([h for _, h in folds])
    assert sorted(held.tolist()) == list(range(len(y)))
    for fit, h in folds:
        assert not set(fit.tolist()) & set(h.tolist())
        assert np.bincount(y[h], minlength=4).min() >= 1  # stratified: the rare class too
    seen = cross_fit(lambda fit, h: np.isin(h, fit)[:, None].astype(float), folds, n_rows=len(y))
    assert seen.sum() == 0


def test_parallel_jobs_are_bounded_by_tasks_and_cores() -> None:
    assert parallel_jobs(1) == 1
    assert 1 <= parallel_jobs(CROSS_FIT_FOLDS) <= min(CROSS_FIT_FOLDS, os.cpu_count() or 1)

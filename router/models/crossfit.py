"""Cross-fitting: every row scored by a model fitted on the other folds.

The local and the e5 trainers (and the local model's second stage) get their
out-of-fold features here, so both backends split rows and assemble held-out scores
the same way. Training only: it imports scikit-learn and joblib.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import StratifiedKFold

CROSS_FIT_FOLDS = 5

Fold = tuple[np.ndarray, np.ndarray]
"""(fit_rows, held_rows): indices of the rows a fold's model is fitted on and scores."""


def stratified_folds(targets: np.ndarray, n_folds: int = CROSS_FIT_FOLDS) -> list[Fold]:
    """`n_folds` shuffled folds stratified by `targets`, the same for the same targets."""
    splitter = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    return list(splitter.split(np.zeros(len(targets)), targets))


def parallel_jobs(tasks: int) -> int:
    """Worker processes for `tasks` independent fits: one per core, no more than tasks."""
    return max(1, min(tasks, os.cpu_count() or 1))


def cross_fit(
    score_fold: Callable[[np.ndarray, np.ndarray], np.ndarray],
    folds: Sequence[Fold],
    *,
    n_rows: int,
    n_jobs: int = 1,
) -> np.ndarray:
    """Out-of-fold scores of all `n_rows` rows, shape (n_rows, ...).

    `score_fold(fit_rows, held_rows)` fits on `fit_rows` and returns the scores of
    `held_rows` (one row of output per held row). With `n_jobs > 1` the folds run in
    that many worker processes, so `score_fold` must pickle (a module-level function,
    or a `functools.partial` of one); the result is the same either way.
    """
    parts = Parallel(n_jobs=n_jobs)(delayed(score_fold)(fit, held) for fit, held in folds)
    if not parts:
        raise ValueError("cross_fit needs at least one fold")
    out = np.zeros((n_rows, *np.shape(parts[0])[1:]))
    for (_, held), part in zip(folds, parts, strict=True):
        out[held] = part
    return out

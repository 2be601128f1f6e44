"""Which labelled rows the calibration tooling may use, and for what.

1. Rows the decision model was fitted on are never used: a row is dropped when its id
   or its exact text belongs to the routing data's `train` split (the weights) or its
   `calibration` split (the model's own temperature, two-request setting and default
   threshold) — see `calibration.data`.
   This applies whatever the backend, so two routers are always judged on the same rows.
2. The remaining rows are split by their own salted id hash into **fit** (fits the
   calibrator), **certify** (chooses the threshold) and **test** (reported only). The
   salt differs from the training split's, so the parts are independent of it, and a
   row's part depends only on its id: adding rows never moves existing ones.

With `--recalibrate none` nothing is fitted, and the fit part joins the certify part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from calibration.data import LabelledRow, id_fraction, split_of
from router.storage.decision_log import text_sha

Part = Literal["fit", "certify", "test"]
PART_SALT = "calibrate-v1"
MODEL_FIT_SPLITS = frozenset({"train", "calibration"})
PART_BOUNDS: tuple[tuple[Part, float], ...] = (("fit", 0.3), ("certify", 0.7), ("test", 1.0))


@dataclass(frozen=True)
class PartIndex:
    """Row indices of each part, into the rows that survived the train-split filter."""

    fit: np.ndarray
    certify: np.ndarray
    test: np.ndarray
    n_excluded_train: int

    def sizes(self) -> dict[str, int]:
        return {"fit": len(self.fit), "certify": len(self.certify), "test": len(self.test)}


def part_of(row_id: str, *, salt: str = PART_SALT) -> Part:
    """The calibration part of one row id (fit 30%, certify 40%, test 30%)."""
    fraction = id_fraction(row_id, salt=salt)
    for name, upper in PART_BOUNDS:
        if fraction < upper:
            return name
    return "test"


def model_train_mask(
    ids: Sequence[str] | np.ndarray, texts: Sequence[str] | None,
    routing_rows: Sequence[LabelledRow],
) -> np.ndarray:
    """True where a row was (or duplicates) a row the decision model was fitted on.

    Parameters
    ----------
    ids : sequence of str, shape (n,)
    texts : sequence of str, shape (n,), optional
        Compared by hash with the training texts (a relabelled copy is still seen data).
    routing_rows : sequence of LabelledRow
        The routing data the model was trained from; its `train` and `calibration`
        splits are excluded.
    """
    train = [row for row in routing_rows if split_of(row.id) in MODEL_FIT_SPLITS]
    train_ids = {row.id for row in train}
    train_texts = {text_sha(row.text) for row in train}
    mask = np.fromiter((row_id in train_ids for row_id in ids), dtype=bool, count=len(ids))
    if texts is not None:
        mask |= np.fromiter((text_sha(t) in train_texts for t in texts), dtype=bool,
                            count=len(ids))
    return mask


def assign_parts(
    ids: Sequence[str] | np.ndarray,
    *,
    excluded: np.ndarray | None = None,
    use_fit: bool = True,
    salt: str = PART_SALT,
) -> PartIndex:
    """Indices of the fit, certify and test parts.

    Parameters
    ----------
    ids : sequence of str, shape (n,)
    excluded : ndarray of bool, shape (n,), optional
        Rows to leave out entirely (the model's training rows).
    use_fit : bool
        False when no calibrator is fitted: the fit part joins the certify part.
    salt : str
        Salt of the id hash.

    Returns
    -------
    PartIndex
    """
    parts = np.array([part_of(str(row_id), salt=salt) for row_id in ids], dtype=object)
    keep = np.ones(len(ids), dtype=bool) if excluded is None else ~excluded
    if not use_fit:
        parts[parts == "fit"] = "certify"
    return PartIndex(
        fit=np.flatnonzero(keep & (parts == "fit")),
        certify=np.flatnonzero(keep & (parts == "certify")),
        test=np.flatnonzero(keep & (parts == "test")),
        n_excluded_train=int((~keep).sum()),
    )

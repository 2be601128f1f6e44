"""`support-router agreement`: how far two annotators agree, and what to resolve.

Cohen's kappa (scikit-learn) corrects raw agreement for the agreement two annotators
would reach by chance with their own label frequencies: κ = (p_o − p_e) / (1 − p_e).
Roughly, κ < 0.6 means the labelling guide needs work before labels are trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from calibration.data import LabelledRow
from router.contracts import ROUTES
from router.errors import CalibrationError


@dataclass(frozen=True)
class Disagreement:
    id: str
    text: str
    label_a: str
    label_b: str


@dataclass(frozen=True)
class Agreement:
    n: int
    observed: float
    kappa: float | None
    """None when undefined (both annotators used one and the same label)."""
    confusion: np.ndarray
    """Counts, shape (4, 4): rows annotator A, columns annotator B, in `ROUTES` order."""
    disagreements: list[Disagreement]
    only_a: int
    only_b: int


def compare_annotators(a: Sequence[LabelledRow], b: Sequence[LabelledRow]) -> Agreement:
    """Agreement on the requests both annotators labelled (matched by id).

    Parameters
    ----------
    a, b : sequence of LabelledRow
        Each annotator's labels (resolved: one per id).

    Returns
    -------
    Agreement

    Raises
    ------
    CalibrationError
        When the two files share no id.
    """
    by_id_b = {row.id: row for row in b}
    common = [row for row in a if row.id in by_id_b]
    if not common:
        raise CalibrationError("the two label files share no request id; nothing to compare",
                               code="no_common_rows")
    labels_a = [row.label for row in common]
    labels_b = [by_id_b[row.id].label for row in common]
    same_single = len(set(labels_a) | set(labels_b)) == 1
    kappa = None if same_single else float(cohen_kappa_score(labels_a, labels_b,
                                                             labels=list(ROUTES)))
    return Agreement(
        n=len(common),
        observed=float(np.mean(np.asarray(labels_a) == np.asarray(labels_b))),
        kappa=kappa,
        confusion=confusion_matrix(labels_a, labels_b, labels=list(ROUTES)),
        disagreements=[Disagreement(row.id, row.text, la, lb)
                       for row, la, lb in zip(common, labels_a, labels_b, strict=True)
                       if la != lb],
        only_a=len(a) - len(common),
        only_b=len(b) - len(common),
    )


def format_agreement(result: Agreement, *, name_a: str = "A", name_b: str = "B") -> str:
    """Kappa, the confusion between annotators, and the disagreements to resolve."""
    kappa = "undefined (one label only)" if result.kappa is None else f"{result.kappa:.3f}"
    lines = [f"{result.n} requests labelled by both; raw agreement {result.observed:.3f}; "
             f"Cohen's kappa {kappa}"]
    if result.only_a or result.only_b:
        lines.append(f"labelled by only one: {name_a} {result.only_a}, {name_b} {result.only_b}")
    width = max(len(r) for r in ROUTES) + 2
    lines.append(f"{name_a + chr(92) + name_b:<{width}}" + "".join(f"{r:>{width}}" for r in ROUTES))
    for route, counts in zip(ROUTES, result.confusion, strict=True):
        lines.append(f"{route:<{width}}" + "".join(f"{int(c):>{width}}" for c in counts))
    if result.disagreements:
        lines.append(f"{len(result.disagreements)} disagreements to resolve:")
        for d in result.disagreements:
            lines.append(f"  {d.id}: {name_a}={d.label_a} {name_b}={d.label_b}  {d.text[:100]}")
    return "\n".join(lines)

from __future__ import annotations

import pytest
from sklearn.metrics import cohen_kappa_score

from calibration.agreement import compare_annotators, format_agreement
from calibration.data import LabelledRow
from router.errors import CalibrationError


def _rows(labels: list[str], prefix: str = "r") -> list[LabelledRow]:
    return [LabelledRow(id=f"{prefix}{i}", text=f"text {i}", label=label)
            for i, label in enumerate(labels)]


def test_kappa_by_hand_and_against_scikit_learn() -> None:
    a = ["refund", "refund", "account", "other", "unclear", "refund"]
    b = ["refund", "account", "account", "other", "refund", "refund"]
    result = compare_annotators(_rows(a), _rows(b))
    # p_o = 4/6; p_e = sum_k p_a(k) p_b(k) = (3*3 + 1*2 + 1*1 + 1*0) / 36 = 12/36
    expected = (4 / 6 - 12 / 36) / (1 - 12 / 36)
    assert result.kappa == pytest.approx(expected)
    assert result.kappa == pytest.approx(cohen_kappa_score(a, b))
    assert result.observed == pytest.approx(4 / 6)
    assert result.confusion[0].tolist() == [2, 1, 0, 0]  # A said refund: B refund 2, account 1
    assert [(d.id, d.label_a, d.label_b) for d in result.disagreements] == [
        ("r1", "refund", "account"), ("r4", "unclear", "refund")]
    text = format_agreement(result, name_a="ana", name_b="bo")
    assert "Cohen's kappa 0.500" in text and "r4: ana=unclear bo=refund" in text


def test_only_common_ids_count_and_kappa_can_be_undefined() -> None:
    a = _rows(["refund", "refund", "refund"])
    b = _rows(["refund", "refund"]) + _rows(["other"], prefix="x")
    result = compare_annotators(a, b)
    assert (result.n, result.only_a, result.only_b) == (2, 1, 1)
    assert result.kappa is None and "undefined" in format_agreement(result)
    with pytest.raises(CalibrationError, match="share no request id"):
        compare_annotators(_rows(["refund"], "p"), _rows(["refund"], "q"))

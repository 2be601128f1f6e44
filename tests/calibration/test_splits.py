from __future__ import annotations

import numpy as np
import pytest

from calibration.data import LabelledRow, split_of
from calibration.splits import assign_parts, model_train_mask, part_of


def test_parts_are_deterministic_and_near_30_40_30() -> None:
    ids = [f"req-{i}" for i in range(20_000)]
    parts = assign_parts(ids)
    sizes = parts.sizes()
    assert sizes["fit"] / 20_000 == pytest.approx(0.3, abs=0.015)
    assert sizes["certify"] / 20_000 == pytest.approx(0.4, abs=0.015)
    assert sizes["test"] / 20_000 == pytest.approx(0.3, abs=0.015)
    again = assign_parts(list(reversed(ids)))
    assert {ids[i] for i in parts.test} == {ids[::-1][i] for i in again.test}
    assert part_of("req-1") == part_of("req-1")


def test_the_parts_do_not_follow_the_training_split() -> None:
    ids = [f"r{i}" for i in range(6000)]
    train = np.array([split_of(i) == "train" for i in ids])
    parts = np.array([part_of(i) for i in ids])
    # independent salts: the share of fit rows is the same inside and outside train
    assert np.mean(parts[train] == "fit") == pytest.approx(np.mean(parts[~train] == "fit"),
                                                           abs=0.03)


def test_without_a_calibrator_the_fit_part_joins_certify() -> None:
    ids = [f"q{i}" for i in range(1000)]
    with_fit, without = assign_parts(ids), assign_parts(ids, use_fit=False)
    assert len(without.fit) == 0
    assert sorted(without.certify) == sorted([*with_fit.fit, *with_fit.certify])
    assert np.array_equal(without.test, with_fit.test)


def test_rows_the_model_was_fitted_on_are_never_used() -> None:
    routing = [LabelledRow(id=f"enc-{i:04d}", text=f"message number {i}", label="refund")
               for i in range(200)]
    train = [r for r in routing if split_of(r.id) == "train"]
    calibration = [r for r in routing if split_of(r.id) == "calibration"]
    test = [r for r in routing if split_of(r.id) == "test"]
    ids = [train[0].id, test[0].id, "new-1", "new-2", calibration[0].id]
    # new-1 copies a train text; the calibration row fitted the model's temperature
    texts = ["other text", test[0].text, train[1].text, "fresh text", calibration[0].text]
    mask = model_train_mask(ids, texts, routing)
    assert mask.tolist() == [True, False, True, False, True]
    parts = assign_parts(ids, excluded=mask)
    used = {*parts.fit, *parts.certify, *parts.test}
    assert used == {1, 3} and parts.n_excluded_train == 3

"""The drift reference on real decisions: quiet on the test split, firing on shifted traffic.

The reference is built as `calibrate` builds one (`calibration.drift.reference_for`), from
the trained model's decisions on one half of the test split; the other half is a second
sample of the same traffic, and `tests/fixtures/shifted_traffic.jsonl` is traffic unlike
it. Run with `-s` to print both reports (the figures in docs/model.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from calibration.drift import drift_weights, reference_for
from calibration.label import Item, select_items
from router.app.training import TrainResult
from router.contracts import DriftReference
from router.errors import InvalidInput
from router.models.local.model import LocalRouteModel
from router.routing.drift import compare, format_report, reference_from_decisions
from tests.traffic import shifted_texts, split_halves


@pytest.fixture(scope="module")
def model(trained: TrainResult) -> LocalRouteModel:
    return LocalRouteModel.load(trained.model_path)


def summarise(model: LocalRouteModel, trained: TrainResult, texts: Sequence[str],
              source: str) -> DriftReference:
    return reference_for(trained.policy, model.score_batch(list(texts)), texts, source=source)


def test_quiet_on_the_test_split_and_firing_on_shifted_traffic(
        model: LocalRouteModel, trained: TrainResult) -> None:
    first, second = split_halves()
    reference = summarise(model, trained, [r.text for r in first], "test split, first half")
    quiet = compare(reference, summarise(model, trained, [r.text for r in second], "second"))
    shifted = compare(reference, summarise(model, trained, shifted_texts(), "shifted"))
    print("\ntest split, second half:\n" + format_report(quiet))
    print("\nshifted sample:\n" + format_report(shifted))

    assert quiet.verdict == "ok", format_report(quiet)
    assert all(f.psi < 0.05 for f in quiet.features), format_report(quiet)
    assert shifted.fires, format_report(shifted)
    status = {f.feature: f.status for f in shifted.features}
    assert status["length"] == "drift" and status["language"] == "drift", status


def test_a_small_shifted_share_stays_below_drift(model: LocalRouteModel,
                                                  trained: TrainResult) -> None:
    """A tenth of shifted traffic in the test split's mix moves the figures, but a
    threshold tuned to the noise of a few hundred rows is not crossed by it."""
    first, second = split_halves()
    reference = summarise(model, trained, [r.text for r in first], "test split, first half")
    mixed = [r.text for r in second[:900]] + shifted_texts()
    report = compare(reference, summarise(model, trained, mixed, "mixed"))
    assert report.verdict in ("ok", "warn"), format_report(report)


def english_reference(n: int = 400) -> DriftReference:
    return reference_from_decisions(
        confidences=[0.9] * n, routed=[True] * n, choices=["refund"] * n,
        text_chars=[60 + i % 80 for i in range(n)], languages=["en"] * n)


def test_drifted_sampling_puts_what_the_reference_lacked_first() -> None:
    usual = [Item(id=f"u{i}", text=f"Please refund my order O-{1000 + i}, it arrived broken "
                                   "and I would like my money back.") for i in range(60)]
    new = [Item(id=f"n{i}", text="注文した商品が届きません。返金してください。" * 3)
           for i in range(10)]
    first = select_items([*usual, *new], sample="drifted", n=10, seed=1,
                         reference=english_reference())
    assert sum(item.id.startswith("n") for item in first) >= 8
    again = select_items([*usual, *new], sample="drifted", n=10, seed=1,
                         reference=english_reference())
    assert again == first  # a resumed session continues the same sample
    weights = drift_weights([usual[0].text, new[0].text], english_reference())
    assert weights[1] > 100 * weights[0]


def test_drifted_sampling_needs_a_reference() -> None:
    with pytest.raises(InvalidInput) as caught:
        select_items([Item(id="a", text="hello")], sample="drifted", n=None)
    assert caught.value.code == "sample_needs_reference"


def test_the_reference_train_writes_is_quiet_on_the_test_split(
        model: LocalRouteModel, trained: TrainResult) -> None:
    """The reference `train` records (out-of-fold decisions on the train and calibration
    rows) against the final model's decisions on the whole test split, and on shifted
    traffic."""
    if os.environ.get("SUPPORT_ROUTER_TEST_TRAINED_DIR") and trained.policy.reference is None:
        pytest.skip("the reused model folder was trained before policies carried a reference")
    reference = trained.policy.reference
    assert reference is not None
    first, second = split_halves()
    test_texts = [r.text for r in first + second]
    quiet = compare(reference, summarise(model, trained, test_texts, "test split"))
    shifted = compare(reference, summarise(model, trained, shifted_texts(), "shifted"))
    print("\ntest split against train's reference:\n" + format_report(quiet))
    print("\nshifted sample against train's reference:\n" + format_report(shifted))
    assert quiet.verdict == "ok", format_report(quiet)
    assert shifted.fires, format_report(shifted)

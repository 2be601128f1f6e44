"""The drift core: binning, PSI, the homogeneity test, statuses and the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.stats import norm

from router.contracts import CONFIDENCE_EDGES, LENGTH_EDGES, DriftReference, Policy
from router.routing.drift import (
    MIN_RECENT,
    NO_REFERENCE,
    PSI_DRIFT,
    PSI_WARN,
    compare,
    format_report,
    homogeneity_p,
    psi,
    reference_from_decisions,
    status_of,
)


def summary(n: int, *, confidence: float = 0.9, routed_every: int = 1, chars: int = 100,
            languages: tuple[str, ...] = ("en",), choice: str = "refund",
            seed: int = 0) -> DriftReference:
    """n decisions; with a seed > 0, confidences and lengths vary around the given ones."""
    rng = np.random.default_rng(seed)
    spread = seed > 0
    confidences = (np.clip(rng.normal(confidence, 0.15, n), 0, 1) if spread
                   else np.full(n, confidence))
    lengths = (np.exp(rng.normal(math.log(chars), 0.8, n)).astype(int) if spread
               else np.full(n, chars))
    return reference_from_decisions(
        confidences=confidences.tolist(),
        routed=[i % routed_every == 0 for i in range(n)],
        choices=[choice] * n,
        text_chars=lengths.tolist(),
        languages=[languages[i % len(languages)] for i in range(n)],
    )


def test_bins_are_fixed_and_edges_fall_in_the_upper_bin() -> None:
    ref = reference_from_decisions(
        confidences=[0.0, 0.1, 0.95, 1.0], routed=[True, False, True, True],
        choices=["refund", "unclear", "other", "other"], text_chars=[0, 15, 16, 5000],
        languages=["en", "de", "en", "und"])
    assert ref.confidence_edges == list(CONFIDENCE_EDGES)
    assert ref.confidence == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]  # 1.0 is in the top bin
    assert ref.length == [2, 1, 0, 0, 0, 0, 0, 0, 1]  # 5000 in the open last bin
    assert len(ref.length) == len(LENGTH_EDGES)
    assert ref.routed == 3 and ref.n == 4
    assert ref.languages == {"en": 2, "de": 1, "und": 1}
    assert ref.predicted == {"refund": 1, "account": 0, "other": 2, "unclear": 1}


def test_psi_is_zero_on_equal_shares_and_finite_on_empty_bins() -> None:
    assert psi([10, 20, 30], [1, 2, 3]) == pytest.approx(0.0)
    expected = (0.5 - 0.25) * math.log(0.5 / 0.25) + (0.5 - 0.75) * math.log(0.5 / 0.75)
    assert psi([25, 75], [50, 50]) == pytest.approx(expected)
    assert math.isfinite(psi([100, 0], [0, 100]))
    assert psi([100, 0], [0, 100]) > PSI_DRIFT


def test_the_two_by_two_test_is_the_two_proportion_z_test() -> None:
    a, n_a, b, n_b = 80, 100, 60, 100
    pooled = (a + b) / (n_a + n_b)
    z = (a / n_a - b / n_b) / math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    assert homogeneity_p([a, n_a - a], [b, n_b - b]) == pytest.approx(2 * norm.sf(abs(z)))
    assert homogeneity_p([5, 0, 3], [4, 0, 2]) > 0.05  # the empty bin is dropped
    assert homogeneity_p([5, 0], [7, 0]) == 1.0


@pytest.mark.parametrize(("value", "p", "status"), [
    (0.3, 0.001, "drift"), (0.3, 0.03, "warn"), (0.3, 0.2, "ok"),
    (0.15, 0.001, "warn"), (0.05, 1e-9, "ok"), (PSI_WARN, 0.049, "warn"),
])
def test_status_needs_both_the_size_and_the_evidence(value: float, p: float,
                                                     status: str) -> None:
    assert status_of(value, p) == status


def test_no_reference_and_too_little_traffic_never_fire() -> None:
    none = compare(None, summary(500))
    assert none.verdict == "no_reference" and none.message == NO_REFERENCE
    few = compare(summary(1000), summary(MIN_RECENT - 1, chars=5000, languages=("und",)))
    assert few.verdict == "not_enough_traffic" and not few.fires and not few.features
    assert compare(summary(1000), None).verdict == "not_enough_traffic"


def test_same_traffic_is_quiet_and_shifted_traffic_fires() -> None:
    reference = summary(4000, languages=("en", "de", "fr", "ru"), routed_every=4, seed=1)
    same = compare(reference, summary(600, languages=("en", "de", "fr", "ru"),
                                      routed_every=4, seed=2))
    assert same.verdict == "ok", format_report(same)
    shifted = compare(reference, summary(600, chars=900, languages=("und", "en"),
                                         routed_every=4, seed=3))
    assert shifted.fires
    status = {f.feature: f.status for f in shifted.features}
    assert status["length"] == "drift" and status["language"] == "drift"
    assert status["routed"] == "ok"
    assert "length" in shifted.message


def test_a_tiny_shift_on_a_large_window_is_not_drift() -> None:
    """Significant (p tiny) but small: PSI keeps it at ok."""
    reference = summary(100_000, routed_every=2)
    recent = reference.model_copy(update={"n": 100_000, "routed": 51_500})
    report = compare(reference, recent)
    routed = next(f for f in report.features if f.feature == "routed")
    assert routed.p_value < 1e-6 and routed.psi < PSI_WARN and routed.status == "ok"


def test_languages_counted_by_another_guesser_are_not_compared() -> None:
    """A policy certified before the language guess changed: its language counts would
    read as drift that traffic never made, so the feature is left out and says why."""
    reference = summary(4000, languages=("en", "de"), seed=1)
    recent = summary(600, languages=("und", "cs"), seed=2).model_copy(
        update={"language_guesser": "py3langid"})
    report = compare(reference, recent)
    assert "language" not in [f.feature for f in report.features]
    assert report.absent == {"language": "no_reference"}
    assert report.verdict == "ok" and "recalibrate" in report.message
    assert "language" in format_report(report)
    same = compare(reference.model_copy(update={"language_guesser": "py3langid"}), recent)
    assert {f.feature: f.status for f in same.features}["language"] == "drift"


def test_report_lists_every_feature_with_shares() -> None:
    report = compare(summary(1000, seed=1), summary(300, seed=2))
    assert [f.feature for f in report.features] == [
        "confidence", "routed", "length", "language", "predicted"]
    data = report.as_dict()
    assert data["thresholds"]["psi_drift"] == PSI_DRIFT
    lengths = data["features"][2]
    assert sum(lengths["reference"].values()) == pytest.approx(1.0)
    assert "verdict: ok" in format_report(report)


def test_the_reference_contract_refuses_inconsistent_counts() -> None:
    good = summary(10).model_dump()
    DriftReference.model_validate(good)
    for field, bad in (("confidence", [10]), ("routed", 11),
                       ("languages", {"en": 9}), ("length", [10] + [0] * 3),
                       ("length_edges", [0, 10, 100]), ("confidence_edges", [])):
        with pytest.raises(ValidationError):
            DriftReference.model_validate({**good, field: bad})
    with pytest.raises(ValidationError):
        DriftReference.model_validate({**good, "texts": ["no"]})


def test_policies_load_with_and_without_a_reference() -> None:
    body = {"version": "v1", "model": {"backend": "local", "name": "local-x"},
            "threshold": 0.5}
    assert Policy.model_validate(body).reference is None
    with_ref = Policy.model_validate({**body, "reference": summary(20).model_dump()})
    assert Policy.model_validate_json(with_ref.model_dump_json()) == with_ref

"""The experiment report's pure parts: sample-ratio check, horizon, per-variant figures."""

from __future__ import annotations

import json

import pytest

from calibration.ab_report import ab_report, format_ab_report, horizon_status, sample_ratio_check


def test_sample_ratio_check_is_the_hand_computed_chi_square() -> None:
    # expected 500/500: (540 − 500)²/500 + (460 − 500)²/500 = 6.4, df 1, p ≈ 0.0114
    result = sample_ratio_check({"a": 540, "b": 460}, {"a": 0.5, "b": 0.5})
    assert result["statistic"] == pytest.approx(6.4)
    assert result["p_value"] == pytest.approx(0.011412, rel=1e-3)
    assert result["mismatch"] is False  # flagged only below 0.001
    assert sample_ratio_check({"a": 600, "b": 400}, {"a": 0.5, "b": 0.5})["mismatch"] is True


def test_horizon_warns_until_the_planned_size_is_reached() -> None:
    assert "inflates false positives" in horizon_status(10, 100)["warning"]
    assert horizon_status(100, 100)["reached"] is True
    assert "no sample size was pre-registered" in horizon_status(5, None)["warning"]


def _row(i: int, variant: str, route: str, shadow_route: str) -> dict:
    shadow = {"choice": "refund", "variants": {"s": {
        "route": shadow_route, "choice": "refund", "confidence": 0.9, "reason": "confident",
        "policy_version": "s1", "model": "local-x", "threshold": 0.5}}}
    return {"request_id": f"r{i}", "experiment": "e", "variant": variant, "route": route,
            "reason": "confident" if route != "clarify" else "below_threshold",
            "choice": "refund", "confidence": 0.8, "threshold": 0.5, "policy_version": "p1",
            "model": "local-x", "outcome": "resolved", "shadow": json.dumps(shadow)}


def test_report_counts_routes_agreement_and_labelled_subset() -> None:
    rows = ([_row(i, "a", "refund", "refund") for i in range(6)]
            + [_row(i, "b", "clarify", "refund") for i in range(6, 10)]
            + [{**_row(99, "a", "refund", "refund"), "experiment": "other"}])
    labels = {f"r{i}": "refund" for i in range(10)}
    report = ab_report(rows, experiment="e", expected_shares={"a": 0.5, "b": 0.5},
                       planned_requests=100, labels=labels, n_boot=50)
    assert report["n"] == 10
    assert report["traffic"]["counts"] == {"a": 6, "b": 4}
    assert report["variants"]["b"]["routes"] == {"refund": 0, "account": 0, "other": 0,
                                                  "clarify": 4}
    assert report["variants"]["a"]["shadow_agreement"]["s"]["route_agreement"] == 1.0
    assert report["variants"]["b"]["shadow_agreement"]["s"]["route_agreement"] == 0.0
    assert report["variants"]["a"]["outcomes"]["resolved"] == 6
    paired = report["labelled"]["shadow_vs_live"]["s"]
    assert (paired["mcnemar"]["a_only"], paired["mcnemar"]["b_only"]) == (0, 4)
    assert (len(paired["fixes"]), len(paired["breaks"])) == (4, 0)
    assert "experiment e: 10 requests" in format_ab_report(report)
    assert report["horizon"]["reached"] is False

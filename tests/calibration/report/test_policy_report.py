from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from calibration.report.policy_report import DECISIONS, report_figures, write_report
from router.contracts import Calibrator, Guarantee, Policy, PolicyModel

POLICY = Policy(
    version="v-report", model=PolicyModel(backend="local", name="m", artifact_sha="s"),
    threshold=0.5, calibrator=Calibrator(kind="temperature", params={"temperature": 1.5}),
    guarantee=Guarantee(alpha=0.1, delta=0.05, n_certify=300, misroutes=4, upper_bound=0.07),
)
# confidence 0.8 -> p_max 0.85; 0.2 -> p_max 0.4 (before temperature; 1.5 softens both)
HIGH, LOW = [0.85, 0.05, 0.05, 0.05], [0.4, 0.2, 0.2, 0.2]
LABELS = np.array(["refund", "refund", "account", "unclear", "other", "refund"])
PROBS = np.array([HIGH, LOW, HIGH[1:2] + HIGH[:1] + HIGH[2:], HIGH, LOW[::-1], LOW])


def test_figures_by_hand() -> None:
    figures = report_figures(LABELS, PROBS, POLICY, n_boot=50)
    scored = figures["scored"]
    assert scored.routed.tolist() == [True, False, True, True, False, False]
    # rows: refund→refund, refund→clarify, account→account, unclear→refund (misroute),
    # other→clarify, refund→clarify
    confusion = dict(zip(["refund", "account", "other", "unclear"], figures["confusion"],
                         strict=True))
    assert dict(zip(DECISIONS, confusion["refund"], strict=True)) == {
        "refund": 1, "account": 0, "other": 0, "clarify": 2}
    assert confusion["unclear"].tolist() == [1, 0, 0, 0]
    assert figures["per_route"]["refund"] == {"routed": 2, "labelled": 3,
                                              "precision": 0.5, "recall": pytest.approx(1 / 3)}
    assert figures["routing"]["misroute_rate_routed"]["value"] == pytest.approx(1 / 3)
    after, before = figures["calibration_after"], figures["calibration_before"]
    assert after["nll"]["value"] != before["nll"]["value"]
    for entry in (*after.values(), *before.values()):
        low, high = entry["ci95"]
        assert low <= entry["value"] + 1e-12 and entry["value"] <= high + 1e-12


def test_report_is_offline_html_with_plots(tmp_path: Path) -> None:
    texts = ["a", "b", "c", "refund my <script>alert(1)</script> kettle", "e", "f"]
    path = write_report(tmp_path / "out", ids=np.array([f"id{i}" for i in range(6)]),
                        texts=texts, labels=LABELS, probabilities=PROBS, policy=POLICY,
                        rows_note="test part", n_boot=20)
    page = path.read_text()
    for name in ("reliability", "risk_coverage", "confusion", "confidence"):
        png = tmp_path / "out" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'src="{name}.png"' in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # no external assets
    assert "15 equal-width bins" in page and "15 equal-mass bins" in page
    assert "Misrouted: 1" in page and "Needlessly clarified: 3" in page


def test_figures_and_page_per_true_route_and_per_language(tmp_path: Path) -> None:
    languages = np.array(["en", "de", "en", "de", "en", "<i>x</i>"])
    figures = report_figures(LABELS, PROBS, POLICY, languages=languages, n_boot=20)
    # rows 1 (refund, clarified) and 3 (unclear, misrouted to refund) are German
    assert figures["per_language"]["de"] == {
        "n": 2, "routed": 1, "misroute": 1, "coverage": 0.0, "misroute_rate_routed": 1.0,
        "correct_outcome_rate": 0.0}
    assert figures["per_label"]["refund"]["n"] == 3
    assert figures["per_label"]["refund"]["coverage"] == pytest.approx(1 / 3)
    path = write_report(tmp_path / "out", ids=np.array([f"id{i}" for i in range(6)]),
                        texts=list("abcdef"), labels=LABELS, probabilities=PROBS,
                        policy=POLICY, languages=languages, rows_note="test part", n_boot=20)
    page = path.read_text()
    assert "<h2>Per language</h2>" in page and "<i>x</i>" not in page
    assert "&lt;i&gt;x&lt;/i&gt;" in page

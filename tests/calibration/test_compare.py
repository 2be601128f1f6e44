"""The offline comparison of two routers: paired tests, intervals, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import SquareTable, mcnemar
from typer.testing import CliRunner

from calibration.compare import (
    compare_routers,
    cost_per_row,
    mcnemar_exact,
    paired_bootstrap,
    run_router,
    stuart_maxwell,
)
from router.cli.main import app
from router.contracts import ROUTES, Guarantee, Policy, PolicyModel
from router.models.typesafe import question_sha
from router.settings import Settings, get_settings
from tests.calibration.test_calibrate import synthetic

MODEL = f"typesafe:jev-test@{question_sha()[:8]}"


def _policy(threshold: float, *, alpha: float | None = None, name: str = MODEL) -> Policy:
    guarantee = (
        Guarantee(alpha=alpha, delta=0.05, n_certify=1000, misroutes=10, upper_bound=alpha * 0.9)
        if alpha is not None
        else None
    )
    return Policy(
        version=f"p-{threshold}",
        model=PolicyModel(backend="typesafe", name=name),
        threshold=threshold,
        guarantee=guarantee,
    )


def _paired(right_a: list[int], right_b: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(right_a, bool), np.asarray(right_b, bool)


def test_exact_mcnemar_matches_statsmodels_and_the_hand_computed_value() -> None:
    # 10 both right, 2 only A right, 8 only B right, 5 both wrong
    a = [1] * 10 + [1] * 2 + [0] * 8 + [0] * 5
    b = [1] * 10 + [0] * 2 + [1] * 8 + [0] * 5
    result = mcnemar_exact(*_paired(a, b))
    assert result["table"] == [[10, 2], [8, 5]]
    assert (result["a_only"], result["b_only"]) == (2, 8)
    # two-sided binomial: 2 · P(Bin(10, ½) ≤ 2) = 2 · 56 / 1024
    assert result["p_value"] == pytest.approx(112 / 1024)
    expected = mcnemar(np.array([[10, 2], [8, 5]]), exact=True)
    assert result["p_value"] == pytest.approx(expected.pvalue)
    assert result["statistic"] == pytest.approx(expected.statistic)


@pytest.mark.parametrize(
    "table",
    [
        [[20, 5, 3], [2, 30, 4], [6, 1, 25]],
        [[50, 12, 0], [3, 40, 7], [9, 2, 11]],
        [[5, 1, 2, 0], [3, 8, 1, 2], [0, 4, 9, 1], [2, 0, 3, 7]],
    ],
)
def test_stuart_maxwell_matches_statsmodels_on_known_tables(table: list[list[int]]) -> None:
    expected = SquareTable(np.array(table), shift_zeros=False).homogeneity()
    result = stuart_maxwell(np.array(table))
    assert result["statistic"] == pytest.approx(expected.statistic)
    assert result["p_value"] == pytest.approx(expected.pvalue)
    assert result["df"] == expected.df


def test_stuart_maxwell_on_two_categories_is_uncorrected_mcnemar() -> None:
    # (b − c)² / (b + c) = (2 − 8)² / 10
    assert stuart_maxwell(np.array([[10, 2], [8, 5]]))["statistic"] == pytest.approx(3.6)


def test_stuart_maxwell_drops_a_category_without_discordant_pairs() -> None:
    with_idle = np.array([[20, 5, 0], [2, 30, 0], [0, 0, 9]])
    assert stuart_maxwell(with_idle)["statistic"] == pytest.approx(
        stuart_maxwell(np.array([[20, 5], [2, 30]]))["statistic"]
    )
    assert stuart_maxwell(np.diag([4, 5, 6])) == {"statistic": 0.0, "df": 0, "p_value": 1.0}


def test_cost_per_row_counts_misroutes_and_needless_clarifications() -> None:
    outcome = np.array(["correct", "misroute", "clarify_needed", "clarify_unneeded"])
    assert cost_per_row(outcome, cost_misroute=10, cost_clarify=1).tolist() == [0, 10, 0, 1]


def test_router_compared_with_itself_has_no_fixes_breaks_or_cost_difference() -> None:
    ids, labels, probs = synthetic(2000)
    a = run_router("A", labels, probs, _policy(0.6))
    b = run_router("B", labels, probs, _policy(0.6))
    result = compare_routers(ids, labels, a, b, n_boot=200)
    assert result["fixes"] == [] and result["breaks"] == []
    low, high = result["metrics"]["cost_difference"]["ci95"]
    assert low <= 0.0 <= high
    assert result["mcnemar"]["p_value"] == 1.0 and result["stuart_maxwell"]["p_value"] == 1.0
    assert result["agreement"]["decisions"]["rate"] == 1.0
    assert result["metrics"]["A"] == result["metrics"]["B"]


def test_a_stricter_threshold_trades_misroutes_for_clarifications() -> None:
    ids, labels, probs = synthetic(3000, seed=1)
    a = run_router("A", labels, probs, _policy(0.2, alpha=0.2))
    b = run_router("B", labels, probs, _policy(0.9, alpha=0.05))
    result = compare_routers(ids, labels, a, b, n_boot=200, certified_on_rows={"B": True})
    m = result["metrics"]
    assert m["B"]["clarify_rate"]["value"] > m["A"]["clarify_rate"]["value"]
    assert m["B"]["misroute_rate_routed"]["value"] < m["A"]["misroute_rate_routed"]["value"]
    assert len(result["fixes"]) == result["mcnemar"]["b_only"]
    assert len(result["breaks"]) == result["mcnemar"]["a_only"]
    assert all(f["a"]["outcome"] not in ("correct", "clarify_needed") for f in result["fixes"])
    assert np.sum(result["stuart_maxwell"]["table"]) == 3000
    assert result["certified_coverage"]["available"]
    assert result["certified_coverage"]["B"]["alpha"] == 0.05
    assert any("certified on these same rows" in note for note in result["notes"])
    for name in ("A", "B"):
        for entry in m[name].values():
            assert entry["ci95"][0] <= entry["value"] + 1e-12 <= entry["ci95"][1] + 2e-12


def test_paired_bootstrap_is_reproducible_with_a_seed() -> None:
    ids, labels, probs = synthetic(500, seed=2)
    a = run_router("A", labels, probs, _policy(0.3))
    b = run_router("B", labels, probs, _policy(0.7))
    kwargs = {"cost_misroute": 10.0, "cost_clarify": 1.0, "n_boot": 300}
    first = paired_bootstrap(labels, a, b, seed=5, **kwargs)
    assert first == paired_bootstrap(labels, a, b, seed=5, **kwargs)
    assert first != paired_bootstrap(labels, a, b, seed=6, **kwargs)
    cost_a = cost_per_row(a.outcome, cost_misroute=10, cost_clarify=1).mean()
    assert first["A"]["cost_per_request"]["value"] == pytest.approx(cost_a)


RUNNER = CliRunner()


@pytest.fixture
def cli_env(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """No typesafe policy file, whatever the machine has."""
    monkeypatch.setenv("SUPPORT_ROUTER_TYPESAFE_POLICY_PATH", str(cli_env.var_dir / "none.json"))
    get_settings.cache_clear()
    return cli_env


def _files(tmp_path: Path, n: int) -> tuple[Path, Path, Path]:
    ids, labels, probs = synthetic(n, seed=3)
    noisy = probs + np.random.default_rng(4).uniform(0, 0.3, size=probs.shape)
    paths = tmp_path / "labels.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    paths[0].write_text(
        "".join(
            json.dumps({"id": i, "text": f"request {i}", "label": y}) + "\n"
            for i, y in zip(ids, labels, strict=True)
        )
    )
    for path, p in ((paths[1], probs), (paths[2], noisy / noisy.sum(axis=1, keepdims=True))):
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "id": i,
                        "probabilities": dict(zip(ROUTES, row.tolist(), strict=True)),
                        "model": MODEL,
                        "question_sha": question_sha(),
                    }
                )
                + "\n"
                for i, row in zip(ids, p, strict=True)
            )
        )
    return paths


def test_compare_cli_prints_json_and_writes_the_page(cli_env: Settings, tmp_path: Path) -> None:
    labels, a, b = _files(tmp_path, 600)
    policies = []
    for name, threshold in (("pa", 0.4), ("pb", 0.6)):
        policies.append(tmp_path / f"{name}.json")
        policies[-1].write_text(_policy(threshold, alpha=0.1).model_dump_json())
    args = [
        "compare",
        "--a",
        a,
        "--b",
        b,
        "--labels",
        labels,
        "--policy-a",
        policies[0],
        "--policy-b",
        policies[1],
        "--n-boot",
        100,
    ]
    result = RUNNER.invoke(app, [str(x) for x in [*args, "--json", "--out", tmp_path / "html"]])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["n"] == 600
    assert set(figures["metrics"]) == {"A", "B", "cost_difference"}
    assert (tmp_path / "html" / "index.html").read_text().count("<table>") >= 4
    assert (tmp_path / "html" / "transitions.png").stat().st_size > 1000
    text = RUNNER.invoke(app, [str(x) for x in args])
    assert text.exit_code == 0 and "McNemar (exact)" in text.stdout


def test_compare_cli_without_a_policy_for_the_backend_fails_clearly(
    cli_env: Settings, tmp_path: Path
) -> None:
    labels, a, b = _files(tmp_path, 100)
    result = RUNNER.invoke(app, ["compare", "--a", str(a), "--b", str(b), "--labels", str(labels)])
    assert result.exit_code == 1
    assert "--policy-a" in result.output


def test_figures_per_true_route_and_per_language_match_the_rows_by_hand() -> None:
    ids, labels, probs = synthetic(1200, seed=3)
    languages = np.where(np.arange(1200) % 3 == 0, "de", "en")
    a = run_router("A", labels, probs, _policy(0.5))
    b = run_router("B", labels, probs, _policy(0.9))
    result = compare_routers(ids, labels, a, b, n_boot=50, languages=languages)
    assert set(result["per_language"]["A"]) == {"de", "en"}
    assert set(result["per_label"]["B"]) == set(labels)
    for name, run in (("A", a), ("B", b)):
        german = languages == "de"
        routed = run.routed[german]
        wrong = routed & (run.choices[german] != labels[german])
        figures = result["per_language"][name]["de"]
        assert figures["n"] == german.sum() and figures["routed"] == routed.sum()
        assert figures["misroute_rate_routed"] == pytest.approx(wrong.sum() / routed.sum())
    assert (result["per_language"]["B"]["en"]["coverage"]
            < result["per_language"]["A"]["en"]["coverage"])


def test_the_page_escapes_ids_labels_notes_and_versions_and_shows_each_language(
    tmp_path: Path,
) -> None:
    from calibration.report.compare_page import write_comparison

    ids, labels, probs = synthetic(300, seed=4)
    ids = np.array([f'<img src=x onerror="alert({n})">' for n in range(300)], dtype=object)
    languages = np.where(np.arange(300) % 2 == 0, "<b>xx</b>", "en")
    evil = _policy(0.6).model_copy(update={"version": "v1", "model": PolicyModel(
        backend="typesafe", name="<script>alert(1)</script>")})
    a = run_router("A", labels, probs, _policy(0.3))
    b = run_router("B", labels, probs, evil)
    result = compare_routers(ids, labels, a, b, n_boot=20, languages=languages)
    page = write_comparison(tmp_path / "out", result).read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert "<b>xx</b>" not in page and "&lt;b&gt;xx&lt;/b&gt;" in page
    assert "<h2>Per language</h2>" in page and "<h2>Per true route</h2>" in page

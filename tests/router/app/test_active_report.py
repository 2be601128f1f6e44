"""The console's calibration report is `support-router report`'s: the same rows, figures
and plots (byte for byte), with the plots inline and every text escaped."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibration.data import load_labelled, split_of
from calibration.splits import part_of
from router.app.active_report import ReportCache, render_policy_report
from router.app.training import TrainResult
from router.cli.main import app
from router.contracts import RouteScores
from router.errors import ModelUnavailable
from router.models.local.model import LocalRouteModel
from router.settings import Settings
from tests.paths import DATASETS

N_BOOT = 50
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    """Rows of the routing data's test split (the model never saw them); one in the report's
    test part has markup for text and a label the model will not give it, so the report
    lists it among its examples."""
    rows = [r for r in load_labelled(DATASETS / "routes") if split_of(r.id) == "test"][:400]
    first = next(i for i, r in enumerate(rows) if part_of(r.id) == "test")
    rows[first] = rows[first].model_copy(update={"text": HOSTILE, "label": "account"})
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_report_is_the_clis(cli_env: Settings, trained: TrainResult, labelled: Path,
                                tmp_path: Path) -> None:
    runner = CliRunner()
    predictions, out = tmp_path / "pred.jsonl", tmp_path / "report"
    for args in (["score", "--data", labelled, "--out", predictions, "--no-cache"],
                 ["report", "--predictions", predictions, "--labels", labelled, "--policy",
                  trained.policy_path, "--out", out, "--n-boot", N_BOOT]):
        result = runner.invoke(app, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    cli_rows = int(re.search(r"\((\d+) rows\)", result.output).group(1))  # type: ignore[union-attr]

    page = render_policy_report(LocalRouteModel.load(trained.model_path), trained.policy,
                                labelled, training_data=DATASETS / "routes", n_boot=N_BOOT)

    assert page.n_rows == cli_rows > 50
    inline = dict(re.findall(r'<img src="data:image/png;base64,([^"]+)" alt="([^"]+)"',
                             page.html))
    assert len(inline) == 4
    cli_plots = {name: (out / f"{name}.png").read_bytes() for name in (
        "reliability", "risk_coverage", "confusion", "confidence")}
    assert sorted(base64.b64decode(b) for b in inline) == sorted(cli_plots.values())
    assert re.findall(r'src="(?!data:)', page.html) == []  # no other request, no CDN
    cli_html = (out / "index.html").read_text(encoding="utf-8")
    for figure in re.findall(r'<td class="num">[^<]+</td>', cli_html):
        assert figure in page.html
    assert "<script" not in page.html and "<img src=x" not in page.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x" in page.html


def test_the_cache_renders_again_only_when_the_policy_changes(trained: TrainResult,
                                                              labelled: Path) -> None:
    model = LocalRouteModel.load(trained.model_path)
    cache = ReportCache(labelled, n_boot=N_BOOT)
    first = cache.page(model, trained.policy)
    assert cache.page(model, trained.policy) is first
    stricter = trained.policy.model_copy(update={"version": "stricter", "threshold": 0.99})
    second = cache.page(model, stricter)
    assert second is not first and second.policy_version == "stricter"
    assert json.dumps(second.html) != json.dumps(first.html)


class _AwayModel:
    """A remote model that does not answer (the `DecisionModel` interface)."""

    name = "typesafe:away@0"

    def score(self, text: str) -> RouteScores:
        raise ModelUnavailable("the model server does not answer")

    def score_batch(self, texts: Sequence[str]) -> list[RouteScores]:
        raise ModelUnavailable("the model server does not answer")


def test_ready_never_waits_and_a_failed_render_is_said_once(trained: TrainResult,
                                                           labelled: Path) -> None:
    cache = ReportCache(labelled, n_boot=N_BOOT)
    model = LocalRouteModel.load(trained.model_path)
    assert cache.ready(model, trained.policy) is None  # started, not awaited
    page = cache.page(model, trained.policy)
    assert cache.ready(model, trained.policy) is page

    away = trained.policy.model_copy(update={"version": "away"})
    assert cache.ready(_AwayModel(), away) is None
    with pytest.raises(ModelUnavailable, match="does not answer"):
        cache.page(_AwayModel(), away)
    assert cache.ready(_AwayModel(), away) is None  # asked again: rendered again

"""`support-router compare --out DIR`: the comparison as an offline HTML page with a
paired transition plot (no external assets), from `templates/comparison.html`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from calibration.compare import PER_ROUTER_METRICS, THREE_OUTCOMES
from calibration.report.pages import render_page
from calibration.report.plots import plot_transitions

MAX_LISTED = 200


def render_comparison(result: dict[str, Any]) -> str:
    """The comparison page; every value is escaped."""
    agreement = result["agreement"]
    return render_page(
        "comparison.html", result=result, metrics=PER_ROUTER_METRICS, max_listed=MAX_LISTED,
        matrices=[
            ("Outcomes (rows A, columns B)", list(THREE_OUTCOMES),
             result["stuart_maxwell"]["table"]),
            ("Decisions at the policies", agreement["decisions"]["categories"],
             agreement["decisions"]["matrix"]),
            ("Model choices", agreement["choices"]["categories"],
             agreement["choices"]["matrix"])],
        lists=[("Fixes (A not right, B right)", result["fixes"]),
               ("Breaks (A right, B not right)", result["breaks"])])


def write_comparison(out_dir: Path, result: dict[str, Any]) -> Path:
    """Write `out_dir/index.html`, `transitions.png` and `comparison.json`; return the page."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_transitions(np.asarray(result["stuart_maxwell"]["table"]), list(THREE_OUTCOMES),
                     out_dir / "transitions.png")
    (out_dir / "comparison.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    path = out_dir / "index.html"
    path.write_text(render_comparison(result), encoding="utf-8")
    return path

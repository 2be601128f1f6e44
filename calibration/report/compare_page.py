"""`support-router compare --out DIR`: the comparison as an offline HTML page with a
paired transition plot (no external assets)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from calibration.compare import PER_ROUTER_METRICS, THREE_OUTCOMES
from calibration.report.plots import plot_transitions

MAX_LISTED = 200


def _cell(entry: dict[str, Any]) -> str:
    low, high = entry["ci95"]
    return f"{entry['value']:.4f} <span class=ci>[{low:.4f}, {high:.4f}]</span>"


def _matrix_html(title: str, categories: list[str], matrix: list[list[int]]) -> str:
    head = "".join(f"<th>B {html.escape(c)}</th>" for c in categories)
    body = "".join(
        f"<tr><th>A {html.escape(c)}</th>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>"
        for c, row in zip(categories, matrix, strict=True))
    return f"<h2>{title}</h2><table><tr><th></th>{head}</tr>{body}</table>"


def _list_html(title: str, rows: list[dict[str, Any]]) -> str:
    shown = rows[:MAX_LISTED]
    body = "".join(
        f"<tr><td>{html.escape(r['id'])}</td><td>{r['label']}</td>"
        f"<td>{r['a']['decision']} ({r['a']['confidence']:.3f})</td><td>{r['a']['outcome']}</td>"
        f"<td>{r['b']['decision']} ({r['b']['confidence']:.3f})</td><td>{r['b']['outcome']}</td>"
        "</tr>" for r in shown)
    more = f" (showing {len(shown)})" if len(rows) > len(shown) else ""
    return (f"<h2>{title}: {len(rows)}{more}</h2><table><tr><th>id</th><th>label</th>"
            "<th>A decision (confidence)</th><th>A outcome</th><th>B decision (confidence)</th>"
            f"<th>B outcome</th></tr>{body}</table>")


def render_comparison(result: dict[str, Any]) -> str:
    """The comparison page; every value is escaped."""
    a, b = result["routers"]
    routers = "".join(
        f"<li>{name}: <b>{html.escape(r['model'])}</b>, policy "
        f"{html.escape(r['policy_version'])}, threshold {r['threshold']:.2f}</li>"
        for name, r in result["routers"].items())
    metrics = "".join(
        f"<tr><td>{m}</td><td>{_cell(result['metrics'][a][m])}</td>"
        f"<td>{_cell(result['metrics'][b][m])}</td></tr>" for m in PER_ROUTER_METRICS)
    mc, sm = result["mcnemar"], result["stuart_maxwell"]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result["notes"])
    cc = result["certified_coverage"]
    coverage = html.escape(cc["note"])
    if cc["available"]:
        coverage = "".join(f"{name}: α={cc[name]['alpha']:g} → coverage "
                           f"{_cell(cc[name]['coverage'])}<br>" for name in (a, b)) + coverage
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Router comparison</title>
<style>
body {{ font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }}
.ci {{ color: #666; font-size: 90%; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>Router comparison on {result['n']} labelled requests</h1>
<ul>{routers}</ul>
<p>Costs: misroute {result['costs']['misroute']:g}, needless clarify
{result['costs']['clarify']:g}. Intervals are 95% paired bootstrap intervals (request ids
resampled, both routers on the same resample).</p>
<ul>{notes}</ul>
<h2>Per router</h2><table><tr><th>metric</th><th>A</th><th>B</th></tr>{metrics}
<tr><td>cost difference B − A</td><td colspan=2>{_cell(result['metrics']['cost_difference'])}
</td></tr></table>
<h2>Paired tests</h2>
<p>Exact McNemar on right vs not right: A right only {mc['a_only']}, B right only
{mc['b_only']}, p = {mc['p_value']:.4g}.<br>Stuart–Maxwell on correct / misroute / clarify:
χ² = {sm['statistic']:.3f}, df {sm['df']}, p = {sm['p_value']:.4g}.</p>
<h2>Coverage at each router's certified α</h2><p>{coverage}</p>
<h2>Outcome transitions A → B</h2><img src="transitions.png" alt="outcome transitions">
<p>Left bar: router A's outcomes; right bar: router B's. Each band joins the requests with
outcome X under A and Y under B; faint bands are unchanged outcomes.</p>
{_matrix_html("Outcomes (rows A, columns B)", list(THREE_OUTCOMES), sm["table"])}
{_matrix_html("Decisions at the policies", result["agreement"]["decisions"]["categories"],
              result["agreement"]["decisions"]["matrix"])}
{_matrix_html("Model choices", result["agreement"]["choices"]["categories"],
              result["agreement"]["choices"]["matrix"])}
{_list_html("Fixes (A not right, B right)", result["fixes"])}
{_list_html("Breaks (A right, B not right)", result["breaks"])}
</body></html>
"""


def write_comparison(out_dir: Path, result: dict[str, Any]) -> Path:
    """Write `out_dir/index.html`, `transitions.png` and `comparison.json`; return the page."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_transitions(np.asarray(result["stuart_maxwell"]["table"]), list(THREE_OUTCOMES),
                     out_dir / "transitions.png")
    (out_dir / "comparison.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    path = out_dir / "index.html"
    path.write_text(render_comparison(result), encoding="utf-8")
    return path

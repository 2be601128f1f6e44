"""`support-router report`: an offline HTML page with PNG plots about one policy.

`report_figures` computes every number (pure); `write_report` draws the plots
(`draw_plots`, `calibration.report.plots`) and renders `index.html` from
`templates/policy_report.html` with no external assets, so the folder can be zipped,
mailed and opened anywhere. `render_fragment` renders the same sections without the page
around them (`templates/policy_report_body.html`), for a page that embeds the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from calibration.calibrate import PolicyScores, score_with_policy
from calibration.certify import THRESHOLD_GRID, threshold_curve
from calibration.intervals import bootstrap_calibration, bootstrap_routing
from calibration.metrics import outcomes, routing_by_group
from calibration.recalibrate import choices_and_confidence, label_indices
from calibration.report.pages import render_page
from calibration.report.plots import (
    plot_confidence_histograms,
    plot_confusion,
    plot_reliability,
    plot_risk_coverage,
)
from router.contracts import ROUTES, Policy

DECISIONS = ["refund", "account", "other", "clarify"]
MAX_EXAMPLES = 50
CALIBRATION_NAMES = {
    "ece_15_equal_width": "ECE, top label, 15 equal-width bins",
    "ece_15_equal_mass": "ECE, top label, 15 equal-mass bins",
    "classwise_ece_15_equal_width": "classwise-ECE, 15 equal-width bins per route",
    "brier": "Brier score (multi-class)",
    "nll": "negative log-likelihood",
}
PLOT_TEXT = {
    "reliability": (
        "Reliability diagram, before (left) and after (right) the policy's recalibration. "
        "Requests are grouped into 15 equal-width bins of the model's top probability; each "
        "blue bar is how often the top choice was right in that bin, and the orange part is "
        "the gap to the bin's mean top probability. Bars on the dashed diagonal mean the "
        "probabilities can be read as frequencies; bars below it mean over-confidence."
    ),
    "risk_coverage": (
        "Risk–coverage curve on the report rows: every point is one threshold of the fixed grid "
        "(strict on the left, loose on the right); x is the share of clear requests that are "
        "routed, y the misroute rate among routed requests. The red line is the promised α; "
        "the black point is the policy's threshold on these rows, and its bar reaches the "
        "upper bound certified on the certify rows."
    ),
    "confusion": (
        "Confusion matrix at the policy: rows are the labels, columns what the router did "
        "(route to refund, account, other, or ask to clarify). The diagonal of the first three "
        "columns is correct routing; the clarify column splits into needed (label unclear) "
        "and unneeded clarifications; everything else routed is a misroute."
    ),
    "confidence": (
        "Confidence histograms per true label: the model's choice confidence for requests of "
        "each label, green where the choice was right and red where it was wrong, with the "
        "policy threshold dashed. Red mass to the right of the line is what gets misrouted."
    ),
}


def report_figures(labels: np.ndarray, probabilities: np.ndarray, policy: Policy, *,
                   languages: np.ndarray | None = None, n_boot: int = 1000,
                   seed: int = 0) -> dict[str, Any]:
    """Every number the report shows, computed on the given rows.

    Parameters
    ----------
    labels : ndarray of str, shape (n,)
    probabilities : ndarray of shape (n, 4)
        Raw model probabilities; the policy's calibrator is applied for "after".
    policy : Policy
    languages : ndarray of str, shape (n,), optional
        Each row's language, for the figures per language.
    n_boot, seed
        Bootstrap resamples and seed for the intervals.

    Returns
    -------
    dict
        Calibration before/after with intervals, routing rates with intervals, the
        confusion matrix (labels × decisions), per-route precision/recall at the policy,
        the routing figures per true route and per language, the risk–coverage curve,
        and per-row arrays for the plots.
    """
    labels = np.asarray(labels)
    y = label_indices(labels)
    raw = probabilities / probabilities.sum(axis=1, keepdims=True)
    scored = score_with_policy(raw, policy)
    outcome = outcomes(labels, scored.choices, scored.routed)
    decisions = np.where(scored.routed, scored.choices, "clarify")
    confusion = np.array([[int(np.sum((labels == r) & (decisions == d))) for d in DECISIONS]
                          for r in ROUTES])
    per_route = {}
    for j, route in enumerate(DECISIONS[:3]):
        routed_here = int(confusion[:, j].sum())
        right = int(confusion[ROUTES.index(route), j])
        labelled = int((labels == route).sum())
        per_route[route] = {"routed": routed_here, "labelled": labelled,
                            "precision": right / routed_here if routed_here else 0.0,
                            "recall": right / labelled if labelled else 0.0}
    curve = threshold_curve(labels, scored.choices, scored.confidences, grid=THRESHOLD_GRID,
                            margins=scored.margins, min_margin=policy.min_margin)
    raw_choices, _, _ = choices_and_confidence(raw)
    return {
        "n": len(labels),
        "calibration_before": bootstrap_calibration(y, raw, n_boot=n_boot, seed=seed),
        "calibration_after": bootstrap_calibration(y, scored.probabilities, n_boot=n_boot,
                                                   seed=seed),
        "routing": bootstrap_routing(labels, outcome, n_boot=n_boot, seed=seed),
        "confusion": confusion,
        "per_route": per_route,
        "per_label": routing_by_group(labels, outcome, labels),
        "per_language": (routing_by_group(labels, outcome, languages)
                         if languages is not None else {}),
        "curve": curve,
        "outcome": outcome,
        "scored": scored,
        "raw_top": raw.max(axis=1),
        "raw_correct": raw_choices == labels,
    }


PLOT_NAMES = ("reliability", "risk_coverage", "confusion", "confidence")
"""The report's plots; each is `<name>.png` in the report's folder."""


def draw_plots(figures: dict[str, Any], *, labels: np.ndarray, policy: Policy,
               out_dir: Path) -> dict[str, Path]:
    """Draw the report's PNG plots into `out_dir`; plot name → file (`PLOT_NAMES`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = np.asarray(labels)
    scored = figures["scored"]
    paths = {name: out_dir / f"{name}.png" for name in PLOT_NAMES}
    plot_reliability(
        {f"before: raw {policy.model.name}": (figures["raw_top"], figures["raw_correct"]),
         ("after: no recalibration" if policy.calibrator.kind == "none"
          else f"after: {policy.calibrator.kind} recalibration"): (
             scored.probabilities.max(axis=1), scored.choices == labels)},
        paths["reliability"],
    )
    curve = figures["curve"]
    chosen = None
    if len(labels):
        routing = figures["routing"]
        chosen = (routing["coverage"]["value"], routing["misroute_rate_routed"]["value"])
    guarantee = policy.guarantee
    plot_risk_coverage(curve.coverage, curve.misroute_rate_routed, curve.thresholds,
                       alpha=guarantee.alpha if guarantee else float("nan"), chosen=chosen,
                       certified_bound=guarantee.upper_bound if guarantee else None,
                       path=paths["risk_coverage"])
    plot_confusion(figures["confusion"], list(ROUTES), DECISIONS, paths["confusion"])
    plot_confidence_histograms(labels, scored.confidences, scored.choices == labels,
                               threshold=policy.threshold, path=paths["confidence"])
    return paths


def write_report(out_dir: Path, *, ids: np.ndarray, texts: list[str], labels: np.ndarray,
                 probabilities: np.ndarray, policy: Policy, rows_note: str,
                 languages: np.ndarray | None = None, n_boot: int = 1000,
                 seed: int = 0) -> Path:
    """Write `out_dir/index.html` and its PNG plots; return the HTML path."""
    figures = report_figures(labels, probabilities, policy, languages=languages,
                             n_boot=n_boot, seed=seed)
    draw_plots(figures, labels=labels, policy=policy, out_dir=out_dir)
    page = render_html(figures, policy=policy, ids=ids, texts=texts, labels=np.asarray(labels),
                       rows_note=rows_note)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def _examples(title: str, mask: np.ndarray, ids: np.ndarray, texts: list[str],
              labels: np.ndarray, scored: PolicyScores) -> dict[str, Any]:
    rows = np.flatnonzero(mask)
    order = rows[np.argsort(-scored.confidences[rows], kind="stable")][:MAX_EXAMPLES]
    return {"title": title, "total": len(rows), "rows": [
        {"id": str(ids[i]), "text": texts[i], "label": str(labels[i]),
         "choice": str(scored.choices[i]), "confidence": float(scored.confidences[i])}
        for i in order]}


def _context(figures: dict[str, Any], *, policy: Policy, ids: np.ndarray, texts: list[str],
             labels: np.ndarray, rows_note: str,
             plot_sources: dict[str, str] | None) -> dict[str, Any]:
    g = policy.guarantee
    guarantee = (
        f"misroute rate among routed ≤ {g.alpha:g} with probability ≥ {1 - g.delta:g} "
        f"({g.method}); certified on {g.n_certify} rows with {g.misroutes} "
        f"misroutes, upper bound {g.upper_bound:.4f}" if g else "none (uncertified policy)"
    )
    thresholds = (", ".join(f"{r} {t:.2f}" for r, t in policy.per_route_thresholds.items())
                  if policy.per_route_thresholds else f"{policy.threshold:.2f}")
    sources = plot_sources or {name: f"{name}.png" for name in PLOT_NAMES}
    scored, outcome = figures["scored"], figures["outcome"]
    return dict(
        policy=policy, figures=figures, guarantee=guarantee,
        thresholds=thresholds, rows_note=rows_note, calibration_names=CALIBRATION_NAMES,
        plots=[{"name": name, "title": title, "text": PLOT_TEXT[name], "src": sources[name]}
               for name, title in (
                   ("reliability", "Reliability before and after recalibration"),
                   ("risk_coverage", "Risk–coverage"),
                   ("confusion", "Confusion at the policy"),
                   ("confidence", "Confidence per true label"))],
        examples=[
            _examples("Misrouted", outcome == "misroute", ids, texts, labels, scored),
            _examples("Needlessly clarified", outcome == "clarify_unneeded", ids, texts,
                      labels, scored)])


def render_html(figures: dict[str, Any], *, policy: Policy, ids: np.ndarray, texts: list[str],
                labels: np.ndarray, rows_note: str) -> str:
    """The report page; every value is escaped, every asset is a file next to it."""
    return render_page("policy_report.html", **_context(
        figures, policy=policy, ids=ids, texts=texts, labels=labels, rows_note=rows_note,
        plot_sources=None))


def render_fragment(figures: dict[str, Any], *, policy: Policy, ids: np.ndarray,
                    texts: list[str], labels: np.ndarray, rows_note: str,
                    plot_sources: dict[str, str]) -> str:
    """The report's content without the page around it, for embedding in another page
    (the console's): the same sections, the plots from `plot_sources` (plot name → URL,
    a `data:` URL to ship them inline); every value escaped."""
    return render_page("policy_report_body.html", **_context(
        figures, policy=policy, ids=ids, texts=texts, labels=labels, rows_note=rows_note,
        plot_sources=plot_sources))

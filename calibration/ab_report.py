"""`support-router ab-report`: what an online experiment's decision-log rows say.

Pure over decision-log rows (`DecisionLog.rows(experiment=...)`): the CLI reads them.
Per live variant — traffic and the sample-ratio-mismatch check, route distribution,
clarify rate, confidence distribution, live-vs-shadow agreement and the handlers'
downstream outcomes; on the labelled subset, routing rates per variant and the paired
offline comparison (`calibration.compare`) of each shadow against the live decision.

The report is a **fixed-horizon** analysis: its p-values are valid once, at the
pre-registered sample size (`planned_requests`). Looking repeatedly and stopping at the
first small p-value inflates the false-positive rate well above the nominal level.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import chi2_contingency, chisquare

from calibration.compare import DECISIONS, RouterRun, compare_routers
from calibration.intervals import bootstrap_routing
from calibration.metrics import outcomes
from router.contracts import Backend, Policy, PolicyModel

SRM_P = 0.001
"""Sample-ratio mismatch is flagged below this p-value (the usual, strict, SRM level)."""
CONFIDENCE_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
OUTCOME_NAMES = ("resolved", "awaiting_customer", "awaiting_approval", "handed_off")


def sample_ratio_check(observed: dict[str, int], expected_shares: dict[str, float]
                       ) -> dict[str, Any]:
    """Chi-square goodness-of-fit of the traffic split against the configured weights.

    Parameters
    ----------
    observed : dict
        Variant name → requests.
    expected_shares : dict
        Variant name → expected share (sums to 1).

    Returns
    -------
    dict
        ``statistic``, ``df``, ``p_value`` and ``mismatch`` (p < 0.001: the split is
        broken — find out why before reading any other figure).
    """
    names = list(expected_shares)
    counts = np.array([observed.get(n, 0) for n in names], dtype=float)
    total = counts.sum()
    if len(names) < 2 or total == 0:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0, "mismatch": False}
    result = chisquare(counts, f_exp=np.array([expected_shares[n] for n in names]) * total)
    return {"statistic": float(result.statistic), "df": len(names) - 1,
            "p_value": float(result.pvalue), "mismatch": bool(result.pvalue < SRM_P)}


def _shadow(row: dict[str, Any]) -> dict[str, Any]:
    try:
        data = json.loads(row.get("shadow") or "{}")
    except json.JSONDecodeError:
        return {}
    variants = data.get("variants") if isinstance(data, dict) else None
    return variants if isinstance(variants, dict) else {}


def _confidence(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    arr = np.asarray(values, dtype=float)
    hist, _ = np.histogram(arr, bins=10, range=(0.0, 1.0))
    return {"n": len(arr), "mean": float(arr.mean()),
            "quantiles": {str(q): float(np.quantile(arr, q)) for q in CONFIDENCE_QUANTILES},
            "histogram_10_bins": hist.tolist()}


def _variant_figures(rows: list[dict[str, Any]], shadow_names: list[str]) -> dict[str, Any]:
    n = len(rows)
    routes = Counter(r["route"] for r in rows)
    agreement = {}
    for name in shadow_names:
        pairs = [(r["route"], _shadow(r)[name].get("route")) for r in rows
                 if name in _shadow(r) and "route" in _shadow(r)[name]]
        agreement[name] = {"n_scored": len(pairs), "n_missing": n - len(pairs),
                           "route_agreement": (sum(a == b for a, b in pairs) / len(pairs)
                                               if pairs else None)}
    outcomes_seen = Counter(r.get("outcome") or "pending" for r in rows)
    return {
        "n": n,
        "routes": {d: routes.get(d, 0) for d in DECISIONS},
        "clarify_rate": routes.get("clarify", 0) / n if n else 0.0,
        "rule_decisions": sum(1 for r in rows if str(r["reason"]).startswith("rule:")),
        "confidence": _confidence([r["confidence"] for r in rows
                                   if r.get("confidence") is not None]),
        "shadow_agreement": agreement,
        "outcomes": {**{o: outcomes_seen.get(o, 0) for o in OUTCOME_NAMES},
                     **{o: c for o, c in outcomes_seen.items() if o not in OUTCOME_NAMES}},
    }


def _stub_policy(version: str, model: str, threshold: float) -> Policy:
    """A policy record rebuilt from the log (for labelling a compare; no guarantee).

    Not validated: it labels rows a gateway already decided, and the log keeps whatever
    version and model name those rows were decided under.
    """
    backend: Backend = "typesafe" if model.startswith("typesafe:") else (
        "e5" if model.startswith("e5") else "local")
    return Policy.model_construct(
        version=version, model=PolicyModel.model_construct(backend=backend, name=model),
        threshold=threshold)


def _labelled(rows: list[dict[str, Any]], labels: Mapping[str, str], shadow_names: list[str], *,
              cost_misroute: float, cost_clarify: float, n_boot: int, seed: int) -> dict[str, Any]:
    """Routing rates per live variant and live-vs-shadow paired comparisons."""
    scored = [r for r in rows if r["request_id"] in labels and r.get("choice") is not None]
    out: dict[str, Any] = {
        "n": len(scored), "note": "model decisions only (rule decisions left out)",
        "variants": {}, "shadow_vs_live": {}}
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for r in scored:
        by_variant.setdefault(r["variant"], []).append(r)
    for name, subset in sorted(by_variant.items()):
        y = np.asarray([labels[r["request_id"]] for r in subset])
        outcome = outcomes(y, [r["choice"] for r in subset],
                           np.asarray([r["route"] != "clarify" for r in subset]))
        out["variants"][name] = {"n": len(subset), **bootstrap_routing(
            y, outcome, n_boot=n_boot, seed=seed)}
    for name in shadow_names:
        paired = [r for r in scored if _shadow(r).get(name, {}).get("choice") is not None]
        if not paired:
            continue
        y = np.asarray([labels[r["request_id"]] for r in paired])
        runs = []
        for run_name, get in (("live", lambda r: r),
                              (name, lambda r, n=name: {**_shadow(r)[n],
                                                        "variant": n})):
            picked = [get(r) for r in paired]
            choices = np.asarray([p["choice"] for p in picked])
            routed = np.asarray([p["route"] != "clarify" for p in picked])
            first = picked[0]
            policy = _stub_policy(str(first["policy_version"]), str(first["model"]),
                                  float(first["threshold"]))
            runs.append(RouterRun(run_name, policy, choices,
                                  np.asarray([p["confidence"] for p in picked], dtype=float),
                                  routed, outcomes(y, choices, routed)))
        out["shadow_vs_live"][name] = compare_routers(
            np.asarray([r["request_id"] for r in paired]), y, runs[0], runs[1],
            cost_misroute=cost_misroute, cost_clarify=cost_clarify, n_boot=n_boot, seed=seed)
    return out


def horizon_status(n: int, planned: int | None) -> dict[str, Any]:
    """Where the experiment stands against its pre-registered (fixed) sample size."""
    warning = ("fixed-horizon test: p-values are valid once, at the planned sample size; "
               "looking repeatedly and stopping at the first small p-value inflates false "
               "positives")
    if planned is None:
        return {"planned_requests": None, "n": n, "reached": False,
                "warning": "no sample size was pre-registered (planned_requests); " + warning}
    return {"planned_requests": planned, "n": n, "reached": n >= planned,
            "progress": n / planned,
            "warning": (warning if n < planned else
                        "planned sample size reached: read the tests now, once")}


def ab_report(rows: list[dict[str, Any]], *, experiment: str,
              expected_shares: dict[str, float] | None, planned_requests: int | None = None,
              labels: Mapping[str, str] | None = None,
              cost_misroute: float = 10.0, cost_clarify: float = 1.0, n_boot: int = 1000,
              seed: int = 0) -> dict[str, Any]:
    """Every figure of the experiment report.

    Parameters
    ----------
    rows : list of dict
        Decision-log rows of this experiment (oldest first).
    experiment : str
    expected_shares : dict, optional
        Live variant → configured share; None when the database has no config for this
        experiment's (then equal shares over the variants seen are assumed, and said so).
    planned_requests : int, optional
        The pre-registered sample size.
    labels : dict, optional
        Request id → label, for the labelled subset.
    cost_misroute, cost_clarify, n_boot, seed
        As in `calibration.compare.compare_routers`.

    Returns
    -------
    dict
        ``experiment``, ``n``, ``traffic`` (counts, shares, ``srm``), ``variants``
        (per variant figures), ``route_homogeneity`` (chi-square of routes × variant),
        ``labelled`` (when labels are given), ``horizon`` and ``notes``.
    """
    notes = []
    rows = [r for r in rows if r.get("experiment") == experiment]
    variant_rows: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        variant_rows.setdefault(r.get("variant") or "(none)", []).append(r)
    if expected_shares is None:
        seen = sorted(variant_rows)
        expected_shares = {v: 1 / len(seen) for v in seen} if seen else {}
        notes.append("no config for this experiment in the database: equal shares assumed")
    counts = {v: len(variant_rows.get(v, [])) for v in expected_shares}
    n = len(rows)
    shadow_names = sorted({name for r in rows for name in _shadow(r)})
    srm = sample_ratio_check(counts, expected_shares)
    if srm["mismatch"]:
        notes.append(f"sample-ratio mismatch (p = {srm['p_value']:.2g}): the split does not "
                     "follow the weights; do not trust the comparison until it is explained")
    table = np.array([[sum(1 for r in variant_rows.get(v, []) if r["route"] == d)
                       for d in DECISIONS] for v in expected_shares])
    keep = table.sum(axis=0) > 0
    homogeneity = None
    if table.shape[0] >= 2 and keep.sum() >= 2 and (table.sum(axis=1) > 0).all():
        chi2, p, dof, _ = chi2_contingency(table[:, keep])
        homogeneity = {"statistic": float(chi2), "df": int(dof), "p_value": float(p)}
    report = {
        "experiment": experiment,
        "n": n,
        "traffic": {"counts": counts,
                    "shares": {v: c / n if n else 0.0 for v, c in counts.items()},
                    "expected_shares": expected_shares, "srm": srm},
        "variants": {v: _variant_figures(variant_rows.get(v, []), shadow_names)
                     for v in expected_shares},
        "shadows": shadow_names,
        "route_homogeneity": homogeneity,
        "horizon": horizon_status(n, planned_requests),
        "notes": notes,
    }
    if labels is not None:
        report["labelled"] = _labelled(rows, labels, shadow_names, cost_misroute=cost_misroute,
                                       cost_clarify=cost_clarify, n_boot=n_boot, seed=seed)
    return report


def format_ab_report(report: dict[str, Any]) -> str:
    """The report as plain text for the terminal."""
    t = report["traffic"]
    lines = [f"experiment {report['experiment']}: {report['n']} requests",
             f"{'variant':<16}{'n':>8}{'share':>9}{'expected':>10}{'clarify':>9}"
             f"{'mean conf':>11}  routes / outcomes"]
    for v, fig in report["variants"].items():
        conf = fig["confidence"].get("mean", float("nan"))
        lines.append(f"{v:<16}{fig['n']:>8}{t['shares'][v]:>9.3f}{t['expected_shares'][v]:>10.3f}"
                     f"{fig['clarify_rate']:>9.3f}{conf:>11.3f}"
                     f"  {fig['routes']} {fig['outcomes']}")
        for s, a in fig["shadow_agreement"].items():
            rate = a["route_agreement"]
            lines.append(f"{'':<16}shadow {s}: agreement "
                         f"{'n/a' if rate is None else f'{rate:.3f}'} on {a['n_scored']} "
                         f"({a['n_missing']} not scored)")
    srm = t["srm"]
    lines.append(f"sample ratio: chi2 = {srm['statistic']:.3f}, df {srm['df']}, "
                 f"p = {srm['p_value']:.3g}{'  MISMATCH' if srm['mismatch'] else ''}")
    if report["route_homogeneity"]:
        h = report["route_homogeneity"]
        lines.append(f"routes × variant: chi2 = {h['statistic']:.3f}, df {h['df']}, "
                     f"p = {h['p_value']:.3g}")
    labelled = report.get("labelled")
    if labelled:
        lines.append(f"labelled subset: {labelled['n']} requests ({labelled['note']})")
        for v, fig in labelled["variants"].items():
            lines.append(f"  {v}: n {fig['n']}, misroute among routed "
                         f"{fig['misroute_rate_routed']['value']:.4f}, coverage "
                         f"{fig['coverage']['value']:.4f}")
        for s, cmp in labelled["shadow_vs_live"].items():
            d = cmp["metrics"]["cost_difference"]
            lines.append(f"  shadow {s} vs live: cost difference {d['value']:+.4f} "
                         f"[{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}], McNemar p = "
                         f"{cmp['mcnemar']['p_value']:.3g}")
    h = report["horizon"]
    lines.append(f"horizon: {h['n']} of {h['planned_requests'] or 'unplanned'} — {h['warning']}")
    lines.extend(f"note: {note}" for note in report["notes"])
    return "\n".join(lines)

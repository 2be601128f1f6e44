"""`support-router compare`: two routers on the same labelled requests, paired.

Each router is scored at its own policy (calibrator + thresholds), giving one outcome per
request (`calibration.metrics.outcomes`). Everything here is pure over arrays; the CLI
reads the files.

Definitions used below:

- **right** — a correct outcome: routed to the labelled route, or a clarifying question
  for a request labelled unclear (`correct` or `clarify_needed`). McNemar's test and the
  fixes/breaks lists use right vs not right.
- **three outcomes** — `correct`, `misroute`, `clarify` (both kinds of clarify): the
  categories of the Stuart–Maxwell test of marginal homogeneity.
- **cost per request** — ``cost_misroute · 1[misroute] + cost_clarify · 1[needless
  clarify]``, averaged over requests (as `calibration.certify.expected_cost`).
- **paired bootstrap** — request ids are resampled with replacement, and *both* routers
  are evaluated on the same resample, so the interval of a difference keeps the pairing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from statsmodels.stats.contingency_tables import SquareTable, mcnemar

from calibration.calibrate import score_with_policy
from calibration.metrics import (
    OUTCOME_CELLS,
    outcome_cells,
    outcomes,
    routing_by_group,
    routing_rates,
)
from router.contracts import ROUTES, Policy

THREE_OUTCOMES = ("correct", "misroute", "clarify")
DECISIONS = ("refund", "account", "other", "clarify")
RIGHT_OUTCOMES = ("correct", "clarify_needed")
_BATCH_VALUES = 4_000_000


@dataclass(frozen=True)
class RouterRun:
    """One router's answers at its own policy, arrays of shape (n,)."""

    name: str
    policy: Policy
    choices: np.ndarray
    confidences: np.ndarray
    routed: np.ndarray
    outcome: np.ndarray

    @property
    def decisions(self) -> np.ndarray:
        """What the router did: the route, or ``clarify``."""
        return np.where(self.routed, self.choices, "clarify")

    @property
    def right(self) -> np.ndarray:
        return np.isin(self.outcome, RIGHT_OUTCOMES)

    @property
    def three(self) -> np.ndarray:
        """Index into `THREE_OUTCOMES` per request."""
        return np.select([self.outcome == "correct", self.outcome == "misroute"], [0, 1], 2)


def run_router(name: str, labels: np.ndarray, probabilities: np.ndarray,
               policy: Policy) -> RouterRun:
    """Apply a policy to raw probabilities and score each request.

    Parameters
    ----------
    name : str
        How reports call this router (``"A"``, ``"B"``).
    labels : ndarray of str, shape (n,)
    probabilities : ndarray of shape (n, 4)
        Raw model probabilities in `ROUTES` order; the policy's calibrator is applied.
    policy : Policy
    """
    labels = np.asarray(labels)
    scored = score_with_policy(probabilities / probabilities.sum(axis=1, keepdims=True), policy)
    return RouterRun(name, policy, scored.choices, scored.confidences, scored.routed,
                     outcomes(labels, scored.choices, scored.routed))


def mcnemar_exact(right_a: np.ndarray, right_b: np.ndarray) -> dict[str, Any]:
    """Exact McNemar test on paired right/not-right outcomes.

    Parameters
    ----------
    right_a, right_b : ndarray of bool, shape (n,)

    Returns
    -------
    dict
        ``table`` (2×2: rows A right/wrong, columns B right/wrong), ``a_only`` (A right,
        B wrong), ``b_only``, ``statistic`` (min of the discordant counts) and ``p_value``
        (two-sided binomial test of the discordant pairs, statsmodels ``exact=True``).
    """
    right_a, right_b = np.asarray(right_a, bool), np.asarray(right_b, bool)
    table = np.array([[np.sum(right_a & right_b), np.sum(right_a & ~right_b)],
                      [np.sum(~right_a & right_b), np.sum(~right_a & ~right_b)]])
    result = mcnemar(table, exact=True)
    return {"table": table.tolist(), "a_only": int(table[0, 1]), "b_only": int(table[1, 0]),
            "statistic": float(result.statistic), "p_value": float(result.pvalue)}


def stuart_maxwell(table: np.ndarray) -> dict[str, float]:
    """Stuart–Maxwell test that a square table's row and column margins are equal.

    Parameters
    ----------
    table : ndarray of shape (k, k)
        Paired counts: rows are router A's category, columns router B's.

    Returns
    -------
    dict
        ``statistic``, ``df`` and ``p_value`` (statsmodels ``SquareTable.homogeneity``).
        Categories with no discordant pair carry no information and would make the
        covariance singular; they are dropped first (the statistic does not change). With
        no discordant pair at all the statistic is 0 and the p-value 1.
    """
    table = np.asarray(table, dtype=float)
    off = table - np.diag(np.diag(table))
    keep = (off.sum(axis=0) + off.sum(axis=1)) > 0
    if keep.sum() < 2:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0}
    result = SquareTable(table[np.ix_(keep, keep)], shift_zeros=False).homogeneity()
    return {"statistic": float(result.statistic), "df": int(result.df),
            "p_value": float(result.pvalue)}


def cost_per_row(outcome: np.ndarray, *, cost_misroute: float, cost_clarify: float
                 ) -> np.ndarray:
    """Cost of each request, shape (n,): misroutes and needless clarifications."""
    outcome = np.asarray(outcome)
    cost: np.ndarray = (cost_misroute * (outcome == "misroute")
                        + cost_clarify * (outcome == "clarify_unneeded")).astype(float)
    return cost


def _resample_batches(n: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Bootstrap weights (b, n): how often each request id was drawn, in batches."""
    rng = np.random.default_rng(seed)
    batch = max(1, min(n_boot, _BATCH_VALUES // max(n, 1)))
    for start in range(0, n_boot, batch):
        size = min(batch, n_boot - start)
        draws = rng.integers(0, n, size=(size, n))
        yield np.stack([np.bincount(row, minlength=n) for row in draws]).astype(float)


def _interval(draws: np.ndarray, value: float, level: float) -> dict[str, float | list[float]]:
    tail = (1.0 - level) / 2 * 100
    return {"value": float(value), "ci95": [float(np.percentile(draws, tail)),
                                            float(np.percentile(draws, 100 - tail))]}


def _columns(run: RouterRun, labels: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Per-request columns (n, 7): one-hot outcome cells, choice correct, cost."""
    cells = np.eye(len(OUTCOME_CELLS))[outcome_cells(labels, run.outcome)]
    return np.column_stack([cells, run.choices == labels, cost])


def _figures(sums: np.ndarray, n: np.ndarray | float) -> dict[str, np.ndarray]:
    """Metrics from column sums (..., 7) over n rows."""
    rates = routing_rates(sums[..., :5])
    return {"accuracy": sums[..., 5] / n, **rates, "cost_per_request": sums[..., 6] / n}


PER_ROUTER_METRICS = ("accuracy", "misroute_rate_routed", "coverage", "clarify_rate",
                      "unclear_recall", "correct_outcome_rate", "cost_per_request")


def paired_bootstrap(labels: np.ndarray, a: RouterRun, b: RouterRun, *, cost_misroute: float,
                     cost_clarify: float, n_boot: int = 1000, level: float = 0.95,
                     seed: int = 0) -> dict[str, Any]:
    """Per-router metrics and the B − A cost difference, with paired bootstrap intervals.

    Parameters
    ----------
    labels : ndarray of str, shape (n,)
    a, b : RouterRun
        Both routers on the same n requests, in the same order.
    cost_misroute, cost_clarify : float
        Cost of one misroute and of one needless clarifying question.
    n_boot, level, seed
        Resamples of the request ids, interval level (key ``"ci95"``), and seed.

    Returns
    -------
    dict
        ``{"A": {metric: {"value", "ci95"}}, "B": {...}, "cost_difference": {...}}`` with
        metrics `PER_ROUTER_METRICS`; ``cost_difference`` is B's cost per request minus A's.
    """
    labels = np.asarray(labels)
    n = len(labels)
    cols = [_columns(r, labels, cost_per_row(r.outcome, cost_misroute=cost_misroute,
                                             cost_clarify=cost_clarify)) for r in (a, b)]
    points = [_figures(c.sum(axis=0), float(max(n, 1))) for c in cols]
    draws: list[list[dict[str, np.ndarray]]] = [[], []]
    if n:
        for weights in _resample_batches(n, n_boot, seed):
            for k, c in enumerate(cols):
                draws[k].append(_figures(weights @ c, np.full(len(weights), float(n))))
    out: dict[str, Any] = {}
    for k, run in enumerate((a, b)):
        out[run.name] = {
            m: _interval(np.concatenate([d[m] for d in draws[k]]) if n else np.zeros(1),
                         float(points[k][m]), level) for m in PER_ROUTER_METRICS}
    diff = (np.concatenate([db["cost_per_request"] - da["cost_per_request"]
                            for da, db in zip(draws[0], draws[1], strict=True)])
            if n else np.zeros(1))
    out["cost_difference"] = _interval(
        diff, float(points[1]["cost_per_request"] - points[0]["cost_per_request"]), level)
    return out


def _matrix(first: np.ndarray, second: np.ndarray, categories: Sequence[object]
            ) -> list[list[int]]:
    return [[int(np.sum((first == r) & (second == c))) for c in categories] for r in categories]


def _differences(ids: np.ndarray, labels: np.ndarray, a: RouterRun, b: RouterRun,
                 mask: np.ndarray) -> list[dict[str, Any]]:
    return [{"id": str(ids[i]), "label": str(labels[i]),
             "a": {"decision": str(a.decisions[i]), "choice": str(a.choices[i]),
                   "confidence": float(a.confidences[i]), "outcome": str(a.outcome[i])},
             "b": {"decision": str(b.decisions[i]), "choice": str(b.choices[i]),
                   "confidence": float(b.confidences[i]), "outcome": str(b.outcome[i])}}
            for i in np.flatnonzero(mask)]


def _certified_coverage(a: RouterRun, b: RouterRun, boot: dict[str, Any]) -> dict[str, Any]:
    """Coverage at each router's own certified α, when both policies carry a guarantee."""
    guarantees = {r.name: r.policy.guarantee for r in (a, b)}
    if any(g is None for g in guarantees.values()):
        missing = [name for name, g in guarantees.items() if g is None]
        return {"available": False,
                "note": f"no guarantee in the policy of {', '.join(missing)}"}
    out: dict[str, Any] = {"available": True}
    for run in (a, b):
        g = run.policy.guarantee
        assert g is not None
        out[run.name] = {"alpha": g.alpha, "delta": g.delta, "upper_bound": g.upper_bound,
                         "coverage": boot[run.name]["coverage"]}
    same = out[a.name]["alpha"] == out[b.name]["alpha"]
    out["note"] = ("both certified at the same α: the router with more coverage routes more "
                   "at the same promise" if same else
                   "the routers promise different α: compare coverage knowing that")
    return out


def compare_routers(ids: np.ndarray, labels: np.ndarray, a: RouterRun, b: RouterRun, *,
                    cost_misroute: float = 10.0, cost_clarify: float = 1.0,
                    certified_on_rows: dict[str, bool] | None = None,
                    languages: np.ndarray | None = None, n_boot: int = 1000,
                    seed: int = 0) -> dict[str, Any]:
    """Every figure of the offline comparison of router A and router B.

    Parameters
    ----------
    ids : ndarray of str, shape (n,)
    labels : ndarray of str, shape (n,)
    a, b : RouterRun
        From `run_router` on the same rows, in the same order.
    cost_misroute, cost_clarify : float
    certified_on_rows : dict, optional
        Router name → whether its thresholds were certified on (part of) these rows.
    languages : ndarray of str, shape (n,), optional
        Each row's language, for ``per_language``.
    n_boot, seed
        Bootstrap resamples and seed.

    Returns
    -------
    dict
        ``n``, ``routers`` (name, model, policy version, threshold), ``metrics`` (paired
        bootstrap), ``mcnemar``, ``stuart_maxwell`` (with its 3×3 ``table`` of outcomes),
        ``certified_coverage``, ``per_label`` and ``per_language`` (router name →
        group → coverage, misroutes among routed, correct outcome), ``fixes`` (A not
        right, B right), ``breaks``, ``agreement`` (decision × decision, and choice ×
        choice), ``notes``.
    """
    ids, labels = np.asarray(ids), np.asarray(labels)
    boot = paired_bootstrap(labels, a, b, cost_misroute=cost_misroute,
                            cost_clarify=cost_clarify, n_boot=n_boot, seed=seed)
    transitions = np.array(_matrix(a.three, b.three, (0, 1, 2)))
    notes = []
    for name, certified in (certified_on_rows or {}).items():
        if certified:
            notes.append(f"router {name}'s thresholds were certified on these same rows "
                         "(its certify part): its figures here are optimistic; compare on "
                         "rows neither policy saw")
    diff = boot["cost_difference"]
    low, high = diff["ci95"]
    verdict = ("B costs less" if high < 0 else "B costs more" if low > 0
               else "no difference in cost shown")
    notes.append(f"cost difference B − A {diff['value']:+.4f} per request, 95% interval "
                 f"[{low:+.4f}, {high:+.4f}]: {verdict}")
    return {
        "n": int(len(labels)),
        "costs": {"misroute": cost_misroute, "clarify": cost_clarify},
        "routers": {r.name: {"model": r.policy.model.name, "policy_version": r.policy.version,
                             "threshold": r.policy.threshold,
                             "per_route_thresholds": r.policy.per_route_thresholds}
                    for r in (a, b)},
        "metrics": boot,
        "mcnemar": mcnemar_exact(a.right, b.right),
        "stuart_maxwell": {"categories": list(THREE_OUTCOMES), "table": transitions.tolist(),
                           **stuart_maxwell(transitions)},
        "certified_coverage": _certified_coverage(a, b, boot),
        "per_label": {r.name: routing_by_group(labels, r.outcome, labels) for r in (a, b)},
        "per_language": ({r.name: routing_by_group(labels, r.outcome, languages)
                          for r in (a, b)} if languages is not None else {}),
        "fixes": _differences(ids, labels, a, b, ~a.right & b.right),
        "breaks": _differences(ids, labels, a, b, a.right & ~b.right),
        "agreement": {
            "decisions": {"categories": list(DECISIONS),
                          "matrix": _matrix(a.decisions, b.decisions, DECISIONS),
                          "rate": float(np.mean(a.decisions == b.decisions)) if len(ids) else 0.0},
            "choices": {"categories": list(ROUTES),
                        "matrix": _matrix(a.choices, b.choices, ROUTES),
                        "rate": float(np.mean(a.choices == b.choices)) if len(ids) else 0.0},
        },
        "notes": notes,
    }


def _group_lines(what: str, a: dict[str, dict[str, float]],
                 b: dict[str, dict[str, float]]) -> list[str]:
    """Coverage and misroutes among routed of A and B, one line per group."""
    lines = [f"{what:<10}{'n':>6}{'A coverage':>13}{'A misroutes':>13}"
             f"{'B coverage':>13}{'B misroutes':>13}"]
    for group, fa in a.items():
        fb = b[group]
        lines.append(f"{group:<10}{int(fa['n']):>6}{fa['coverage']:>13.3f}"
                     f"{fa['misroute_rate_routed']:>13.3f}{fb['coverage']:>13.3f}"
                     f"{fb['misroute_rate_routed']:>13.3f}")
    return lines


def format_comparison(result: dict[str, Any]) -> str:
    """The comparison as plain text for the terminal."""
    a, b = result["routers"]
    lines = [f"{result['n']} labelled requests; costs: misroute {result['costs']['misroute']:g}, "
             f"needless clarify {result['costs']['clarify']:g}"]
    for name in (a, b):
        r = result["routers"][name]
        lines.append(f"  {name}: {r['model']}  policy {r['policy_version']}  "
                     f"threshold {r['threshold']:.2f}")
    lines.append(f"{'metric':<24}{a:>28}{b:>28}")
    for m in PER_ROUTER_METRICS:
        cells = []
        for name in (a, b):
            e = result["metrics"][name][m]
            cells.append(f"{e['value']:.4f} [{e['ci95'][0]:.4f}, {e['ci95'][1]:.4f}]")
        lines.append(f"{m:<24}{cells[0]:>28}{cells[1]:>28}")
    mc, sm = result["mcnemar"], result["stuart_maxwell"]
    lines.append(f"McNemar (exact): A right only {mc['a_only']}, B right only {mc['b_only']}, "
                 f"p = {mc['p_value']:.4g}")
    lines.append(f"Stuart–Maxwell (correct/misroute/clarify): chi2 = {sm['statistic']:.3f}, "
                 f"df {sm['df']}, p = {sm['p_value']:.4g}")
    cc = result["certified_coverage"]
    if cc["available"]:
        for name in (a, b):
            e = cc[name]
            lines.append(f"coverage of {name} at its certified α={e['alpha']:g}: "
                         f"{e['coverage']['value']:.4f} [{e['coverage']['ci95'][0]:.4f}, "
                         f"{e['coverage']['ci95'][1]:.4f}]")
    lines.append(f"{cc['note']}")
    agreement = result["agreement"]["decisions"]
    for key, what in (("per_label", "label"), ("per_language", "language")):
        if result[key]:
            lines.extend(_group_lines(what, result[key][a], result[key][b]))
    lines.append(f"fixes (A wrong, B right): {len(result['fixes'])}; breaks: "
                 f"{len(result['breaks'])}; same decision on {agreement['rate']:.1%}")
    lines.extend(f"note: {note}" for note in result["notes"])
    return "\n".join(lines)

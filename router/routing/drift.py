"""Drift: does recent traffic still look like the rows a policy was certified on?

Pure functions over counts. `reference_from_decisions` summarises decisions (the model's
confidence, routed or not, its choice, the message's length and guessed language) into a
`DriftReference`; `compare` sets a recent window's summary beside it, feature by feature.

Each feature gets two numbers:

- the population stability index, PSI = sum over bins of (q - p) * ln(q / p), p the
  reference share and q the recent share of a bin (shares floored at `PSI_FLOOR`, so an
  empty bin costs a large but finite amount). The usual reading, which we follow:
  below 0.1 no shift, 0.1 to 0.25 a moderate shift worth a look, 0.25 and above a
  shift large enough to distrust figures measured on the reference;
- the p-value of a chi-squared test of homogeneity on the 2 x k table of counts
  (`scipy.stats.chi2_contingency`; for the routed share the 2 x 2 table, the same test
  as a two-proportion z-test).

For an e5 policy the reference also holds an embedding summary
(`router.routing.embedding_drift`): each principal direction is a feature
`embedding.<i>` compared the same way, over the window's e5-scored decisions, with its
p-value multiplied by the number of directions (Bonferroni: k tests must not fire k
times as often as one). The feature `embedding` is the summary figure: the direction
with the worst status (ties: the largest PSI), its PSI and adjusted p-value. Below
`MIN_RECENT` e5-scored decisions (a cascade's fast stage answers many) the embedding
features are left out and `absent` says why.

Status per feature: `drift` when PSI >= `PSI_DRIFT` and p < `P_DRIFT`, `warn` when PSI >=
`PSI_WARN` and p < `P_WARN`, else `ok`. Both must agree because each fails alone: PSI of
a small window is noisy (a few hundred rows spread over a dozen bins reach 0.1 by chance),
and a test on a large window finds shifts too small to matter. Below `MIN_RECENT`
decisions the verdict is `not_enough_traffic` and nothing fires.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from router.contracts import (
    CONFIDENCE_EDGES,
    LENGTH_EDGES,
    ROUTES,
    DriftReference,
    EmbeddingSummary,
)
from router.routing.embedding_drift import bin_labels, component_name

Status = Literal["ok", "warn", "drift"]
Verdict = Literal["ok", "warn", "drift", "not_enough_traffic", "no_reference"]
FEATURES = ("confidence", "routed", "length", "language", "predicted")
"""Every feature compared for any policy, in report order."""
LANGUAGE_FEATURE = "language"
"""Left out (`absent`) when the policy's reference counted languages with another guesser."""
EMBEDDING_FEATURE = "embedding"
"""The embedding summary's feature (an e5 policy's), after `FEATURES` and before its
per-direction features `embedding.1`, ..."""

PSI_WARN = 0.1
PSI_DRIFT = 0.25
P_WARN = 0.05
P_DRIFT = 0.01
PSI_FLOOR = 1e-4
MIN_RECENT = 100
"""Fewest recent decisions a verdict is given on; fewer say `not_enough_traffic`."""

STATUS_VALUES: dict[Verdict, int] = {"ok": 0, "warn": 1, "drift": 2, "not_enough_traffic": -1,
                                     "no_reference": -2}
"""The number each status or verdict is exported as (`support_router_drift_status`)."""

NO_REFERENCE = "no reference; run calibrate to record one"


def _bin(values: Iterable[float], lower_edges: Sequence[float], *, closed_top: bool
         ) -> list[int]:
    """Counts per bin: bin i holds lower_edges[i] <= v < lower_edges[i + 1]; with
    `closed_top` the last edge is the top of the last bin (and included), else the last
    bin is open above."""
    array = np.asarray(list(values), dtype=float)
    edges = np.asarray(lower_edges, dtype=float)
    n_bins = len(edges) - 1 if closed_top else len(edges)
    index = np.searchsorted(edges, array, side="right") - 1
    index = np.clip(index, 0, n_bins - 1)
    return [int(c) for c in np.bincount(index, minlength=n_bins)]


def _mix(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def reference_from_decisions(
    *,
    confidences: Sequence[float],
    routed: Sequence[bool],
    choices: Sequence[str],
    text_chars: Sequence[int],
    languages: Sequence[str],
    source: str = "",
    language_guesser: str = "",
    embedding: EmbeddingSummary | None = None,
) -> DriftReference:
    """The summary of n decisions (one entry per decision in every argument), with the
    embedding summary of those of them an e5 model scored, if given.

    The same function summarises the certification rows (stored in the policy) and a
    recent window of the decision log, so both are binned alike.
    """
    n = len(confidences)
    if not n or any(len(s) != n for s in (routed, choices, text_chars, languages)):
        raise ValueError("one value per decision in every argument, at least one decision")
    predicted = {route: 0 for route in ROUTES} | _mix(choices)
    return DriftReference(
        n=n,
        confidence=_bin(confidences, CONFIDENCE_EDGES, closed_top=True),
        routed=int(sum(bool(r) for r in routed)),
        length=_bin(text_chars, LENGTH_EDGES, closed_top=False),
        languages=_mix(languages),
        predicted=predicted,
        source=source,
        language_guesser=language_guesser,
        embedding=embedding,
    )


def psi(reference: Sequence[int], recent: Sequence[int]) -> float:
    """Population stability index between two count vectors over the same bins."""
    p = np.asarray(reference, dtype=float)
    q = np.asarray(recent, dtype=float)
    p = np.maximum(p / p.sum(), PSI_FLOOR)
    q = np.maximum(q / q.sum(), PSI_FLOOR)
    return float(np.sum((q - p) * np.log(q / p)))


def homogeneity_p(reference: Sequence[int], recent: Sequence[int]) -> float:
    """p-value of the chi-squared test that both count vectors come from one distribution.

    Bins empty in both are dropped (they carry no information and break the test).
    """
    from scipy.stats import chi2_contingency

    table = np.asarray([reference, recent], dtype=float)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0
    # No Yates correction: the 2 x 2 case is then exactly the two-proportion z-test.
    result = chi2_contingency(table, correction=False)
    return float(result.pvalue)


@dataclass(frozen=True)
class FeatureDrift:
    feature: str
    psi: float
    p_value: float
    status: Status
    reference_shares: dict[str, float]
    recent_shares: dict[str, float]


@dataclass(frozen=True)
class DriftReport:
    verdict: Verdict
    n_recent: int
    n_reference: int
    features: list[FeatureDrift] = field(default_factory=list)
    message: str = ""
    absent: dict[str, Verdict] = field(default_factory=dict)
    """Features left out of a report that has a verdict, and why: `embedding` when the
    window holds fewer than `MIN_RECENT` e5-scored decisions (`not_enough_traffic`). A
    policy without an embedding summary has no embedding features and nothing here."""

    @property
    def fires(self) -> bool:
        return self.verdict == "drift"

    def as_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict, "n_recent": self.n_recent,
            "n_reference": self.n_reference, "message": self.message,
            "absent": self.absent,
            "thresholds": {"psi_warn": PSI_WARN, "psi_drift": PSI_DRIFT, "p_warn": P_WARN,
                           "p_drift": P_DRIFT, "min_recent": MIN_RECENT},
            "features": [
                {"feature": f.feature, "psi": f.psi, "p_value": f.p_value, "status": f.status,
                 "reference": f.reference_shares, "recent": f.recent_shares}
                for f in self.features
            ],
        }


def status_of(psi_value: float, p_value: float) -> Status:
    if psi_value >= PSI_DRIFT and p_value < P_DRIFT:
        return "drift"
    if psi_value >= PSI_WARN and p_value < P_WARN:
        return "warn"
    return "ok"


def _bin_labels(edges: Sequence[float], *, closed_top: bool) -> list[str]:
    if closed_top:
        return [f"{lo:g}-{hi:g}" for lo, hi in zip(edges, edges[1:], strict=False)]
    return [f"{lo:g}-{hi:g}" for lo, hi in zip(edges, edges[1:], strict=False)] + [
        f">={edges[-1]:g}"]


def _aligned(reference: dict[str, int], recent: dict[str, int]
             ) -> tuple[list[str], list[int], list[int]]:
    keys = sorted(set(reference) | set(recent))
    return keys, [reference.get(k, 0) for k in keys], [recent.get(k, 0) for k in keys]


def _feature_counts(reference: DriftReference, recent: DriftReference
                    ) -> list[tuple[str, list[str], list[int], list[int]]]:
    if (reference.confidence_edges != recent.confidence_edges
            or reference.length_edges != recent.length_edges):
        raise ValueError("the reference and the recent window are binned differently")
    predicted = _aligned(reference.predicted, recent.predicted)
    features = [
        ("confidence", _bin_labels(reference.confidence_edges, closed_top=True),
         reference.confidence, recent.confidence),
        ("routed", ["routed", "clarified"], [reference.routed, reference.n - reference.routed],
         [recent.routed, recent.n - recent.routed]),
        ("length", _bin_labels(reference.length_edges, closed_top=False), reference.length,
         recent.length),
        ("predicted", *predicted),
    ]
    if reference.language_guesser == recent.language_guesser:
        features.insert(3, (LANGUAGE_FEATURE, *_aligned(reference.languages, recent.languages)))
    return features


def _shares(labels: list[str], counts: list[int]) -> dict[str, float]:
    total = sum(counts)
    return {label: (c / total if total else math.nan) for label, c in
            zip(labels, counts, strict=True)}


def _feature(name: str, labels: list[str], ref_counts: list[int], recent_counts: list[int],
             *, tests: int = 1) -> FeatureDrift:
    value = psi(ref_counts, recent_counts)
    p_value = min(1.0, homogeneity_p(ref_counts, recent_counts) * tests)
    return FeatureDrift(name, value, p_value, status_of(value, p_value),
                        _shares(labels, ref_counts), _shares(labels, recent_counts))


_RANK: dict[Status, int] = {"ok": 0, "warn": 1, "drift": 2}


def embedding_features(reference: EmbeddingSummary, recent: EmbeddingSummary
                       ) -> list[FeatureDrift]:
    """The summary feature `embedding`, then one feature per direction."""
    if reference.edges != recent.edges or reference.embedder != recent.embedder:
        raise ValueError("the window is binned on other directions than the reference")
    k = len(reference.directions)
    components = [
        _feature(component_name(i), bin_labels(reference.edges[i]), reference.counts[i],
                 recent.counts[i], tests=k)
        for i in range(k)
    ]
    worst = max(components, key=lambda f: (_RANK[f.status], f.psi))
    summary = FeatureDrift(EMBEDDING_FEATURE, worst.psi, worst.p_value, worst.status,
                           worst.reference_shares, worst.recent_shares)
    return [summary, *components]


def _embedding_part(reference: DriftReference, recent: DriftReference
                    ) -> tuple[list[FeatureDrift], Verdict | None]:
    """The embedding features, or why there are none (None: the policy has no summary
    to compare with, so nothing is missing)."""
    if reference.embedding is None:
        return [], None
    window = recent.embedding
    if window is None or window.n < MIN_RECENT:
        return [], "not_enough_traffic"
    return embedding_features(reference.embedding, window), None


def compare(reference: DriftReference | None, recent: DriftReference | None) -> DriftReport:
    """Recent traffic beside the reference, feature by feature, and the overall verdict:
    the worst feature status, `not_enough_traffic` below `MIN_RECENT` recent decisions,
    `no_reference` when the policy carries none. `recent` None is an empty window."""
    n_recent = 0 if recent is None else recent.n
    if reference is None:
        return DriftReport("no_reference", n_recent, 0, message=NO_REFERENCE)
    if recent is None or recent.n < MIN_RECENT:
        return DriftReport("not_enough_traffic", n_recent, reference.n,
                           message=f"{n_recent} decisions in the window; a verdict needs at "
                                   f"least {MIN_RECENT}")
    features = [_feature(*counts) for counts in _feature_counts(reference, recent)]
    embedding, missing = _embedding_part(reference, recent)
    features += embedding
    absent: dict[str, Verdict] = {}
    if reference.language_guesser != recent.language_guesser:
        absent[LANGUAGE_FEATURE] = "no_reference"
    if missing is not None:
        absent[EMBEDDING_FEATURE] = missing
    # The summary stands for its directions in the verdict and the message.
    headline = [f for f in features if not f.feature.startswith(EMBEDDING_FEATURE + ".")]
    statuses = {f.status for f in headline}
    verdict: Verdict = ("drift" if "drift" in statuses else
                        "warn" if "warn" in statuses else "ok")
    drifted = [f.feature for f in headline if f.status != "ok"]
    message = ("traffic looks like the certification rows" if not drifted else
               f"{verdict} in {', '.join(drifted)}")
    if LANGUAGE_FEATURE in absent:
        message += (f"; language: {LANGUAGE_FEATURE} counts of another language guesser "
                    "in the policy's reference (recalibrate to compare them)")
    if missing is not None:
        n_embedded = 0 if recent.embedding is None else recent.embedding.n
        message += (f"; embedding: {n_embedded} e5-scored decisions in the window, a "
                    f"verdict needs at least {MIN_RECENT}")
    return DriftReport(verdict, recent.n, reference.n, features, message, absent)


def format_report(report: DriftReport) -> str:
    """The report as a terminal table: one line per feature, then the verdict."""
    lines = [f"recent decisions: {report.n_recent}; reference rows: {report.n_reference}"]
    if report.features:
        lines.append(f"{'feature':<12}{'PSI':>9}{'p-value':>11}  status")
        for f in report.features:
            lines.append(f"{f.feature:<12}{f.psi:>9.4f}{f.p_value:>11.3g}  {f.status}")
        for name, why in report.absent.items():
            lines.append(f"{name:<12}{'-':>9}{'-':>11}  {why}")
    lines.append(f"verdict: {report.verdict} ({report.message})")
    return "\n".join(lines)

"""The drift reference a policy carries: its certification rows, decided as the gateway
decides them and summarised as the decision log records them.

`train` and `calibrate` call `reference_for` on the held-out rows they already score;
the monitor (`router.app.drift`) compares recent traffic with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from router.contracts import DriftReference, Policy, RouteScores
from router.routing.drift import reference_from_decisions
from router.routing.policy import decide
from router.storage.message_features import guess_language, text_chars


def reference_for(policy: Policy, scores: Sequence[RouteScores], texts: Sequence[str], *,
                  source: str) -> DriftReference:
    """The summary of `policy`'s decisions on the rows with these (uncalibrated) scores
    and texts; the texts are read for their length and language guess only."""
    if len(scores) != len(texts):
        raise ValueError(f"{len(scores)} scores but {len(texts)} texts")
    decisions = [decide(s, policy, request_id="reference") for s in scores]
    return reference_from_decisions(
        confidences=[d.scores.confidence if d.scores else 0.0 for d in decisions],
        routed=[d.route != "clarify" for d in decisions],
        choices=[d.scores.choice if d.scores else "unclear" for d in decisions],
        text_chars=[text_chars(t) for t in texts],
        languages=[guess_language(t) for t in texts],
        source=source,
    )


def with_reference(policy: Policy, scores: Sequence[RouteScores], texts: Sequence[str], *,
                   source: str) -> Policy:
    """`policy` carrying the reference of these rows (none when there are no rows)."""
    if not scores:
        return policy
    reference = reference_for(policy, scores, texts, source=source)
    return policy.model_copy(update={"reference": reference})

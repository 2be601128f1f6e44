"""The drift reference a policy carries: its certification rows, decided as the gateway
decides them and summarised as the decision log records them.

`train` and `calibrate` call `reference_for` on the held-out rows they already score;
the monitor (`router.app.drift`) compares recent traffic with it. Given the e5 model
(an e5 policy, or a cascade's e5 stage), the reference also holds the embedding summary
of the rows that model answered: those rows are embedded once more here, by the model
itself, so their embeddings are the ones serving computes (the scores read from a
prediction file carry none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from router.contracts import DriftReference, EmbeddingSummary, Policy, RouteScores
from router.routing.drift import PSI_FLOOR, reference_from_decisions
from router.routing.embedding_drift import summarise_embeddings
from router.routing.policy import decide
from router.storage.message_features import LANGUAGE_GUESSER, guess_language, text_chars


class EmbeddingModel(Protocol):
    """An e5 route model as the reference reads it (`router.models.e5.model.E5RouteModel`)."""

    @property
    def name(self) -> str: ...

    @property
    def embedder_name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def embedding_reference(e5: EmbeddingModel, scores: Sequence[RouteScores],
                        texts: Sequence[str]) -> EmbeddingSummary | None:
    """The embedding summary of the rows `e5` answered (scores named after it); None with
    fewer than two such rows."""
    answered = [t for s, t in zip(scores, texts, strict=True) if s.model == e5.name]
    if len(answered) < 2:
        return None
    return summarise_embeddings(e5.embed(answered), embedder=e5.embedder_name)


def reference_for(policy: Policy, scores: Sequence[RouteScores], texts: Sequence[str], *,
                  source: str, e5: EmbeddingModel | None = None) -> DriftReference:
    """The summary of `policy`'s decisions on the rows with these (uncalibrated) scores
    and texts; the texts are read for their length and language guess only, and, with
    `e5`, embedded by it (those it answered)."""
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
        language_guesser=LANGUAGE_GUESSER,
        embedding=None if e5 is None else embedding_reference(e5, scores, texts),
    )


def with_reference(policy: Policy, scores: Sequence[RouteScores], texts: Sequence[str], *,
                   source: str, e5: EmbeddingModel | None = None) -> Policy:
    """`policy` carrying the reference of these rows (none when there are no rows); with
    the e5 model that scored (some of) them, its embedding summary too."""
    if not scores:
        return policy
    reference = reference_for(policy, scores, texts, source=source, e5=e5)
    return policy.model_copy(update={"reference": reference})


def drift_weights(texts: Sequence[str], reference: DriftReference) -> list[float]:
    """How over-represented each text's form is in these texts against the reference.

    A text's weight is (recent share / reference share) of its length bin, times the same
    ratio for its guessed language: 1 where the texts look like the certification rows,
    large where they hold what those rows lacked (the shares of the reference floored at
    `PSI_FLOOR`, as PSI floors them). What a drifted window adds gets the labels first.
    """
    if not texts:
        return []
    lengths = [text_chars(t) for t in texts]
    languages = [guess_language(t) for t in texts]
    recent = reference_from_decisions(
        confidences=[0.0] * len(texts), routed=[False] * len(texts),
        choices=["unclear"] * len(texts), text_chars=lengths, languages=languages,
        language_guesser=LANGUAGE_GUESSER)
    bins = np.clip(np.searchsorted(np.asarray(reference.length_edges, dtype=float),
                                   np.asarray(lengths, dtype=float), side="right") - 1,
                   0, len(reference.length_edges) - 1)

    def ratio(recent_count: int, recent_n: int, ref_count: int) -> float:
        return (recent_count / recent_n) / max(ref_count / reference.n, PSI_FLOOR)

    return [
        ratio(recent.length[b], recent.n, reference.length[b])
        * ratio(recent.languages[lang], recent.n, reference.languages.get(lang, 0))
        for b, lang in zip(bins.tolist(), languages, strict=True)
    ]

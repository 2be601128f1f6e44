"""Drift in e5 embedding space: pure functions over embeddings and their projections.

The drift features of `router.routing.drift` read a message's form (length, language)
and the model's answer; a change of content that keeps the form, and leaves the model's
answers about as they were, passes them. The embedding summary reads the content: the
top principal directions of the certification rows' e5 embeddings
(`summarise_embeddings`), and each direction's projections counted in bins at the
reference's deciles. Serving projects each e5-scored message on those
directions (`project`: a k x dim dot product on the embedding the model computed to
score it) and logs the k numbers; a window of them is counted in the same bins
(`window_summary`) and compared direction by direction with PSI and the chi-squared
test, as the other features are.

Why principal directions rather than, say, the mean embedding's distance: they are where
the certification rows differ most from one another (topic, register, language), so a
shift along them is what moves the model's inputs; each is a one-dimensional
distribution, binned and tested like every other feature; and k x dim numbers keep the
policy file small (k = 6, dim 384: about 8 KB of JSON with the bins and counts, the
directions float16 in base64).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from router.contracts import DIRECTION_DTYPE, EMBEDDING_COMPONENTS, EmbeddingSummary

EMBEDDING_BINS = 10
"""Bins per direction: at the reference projections' deciles."""
EDGE_DECIMALS = 6
PROJECTION_DECIMALS = 6
"""Decimals a logged projection keeps (far below any bin's width)."""


def component_name(index: int) -> str:
    """The feature name of direction `index` (0-based): `embedding.1`, `embedding.2`, ..."""
    return f"embedding.{index + 1}"


def _counts(values: np.ndarray, edges: np.ndarray) -> list[int]:
    """Rows per bin: bin i holds edges[i - 1] <= v < edges[i] (open at both ends)."""
    index = np.searchsorted(edges, values, side="right")
    return [int(c) for c in np.bincount(index, minlength=len(edges) + 1)]


def summarise_embeddings(embeddings: np.ndarray, *, embedder: str,
                         k: int = EMBEDDING_COMPONENTS,
                         bins: int = EMBEDDING_BINS) -> EmbeddingSummary:
    """The summary of these rows' embeddings (n, dim): top-k principal directions of the
    centred rows (each signed so its largest entry is positive: the same rows give the
    same summary), the rows' projections' deciles as bin edges, and the counts."""
    x = np.asarray(embeddings, dtype=float)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError("an embedding summary needs at least two embeddings (n, dim)")
    k = min(k, len(x) - 1, x.shape[1])
    _, _, vt = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    directions = vt[:k]
    largest = np.abs(directions).argmax(axis=1)
    directions = directions * np.sign(directions[np.arange(k), largest])[:, None]
    # The policy file keeps float16 entries (`DIRECTION_DTYPE`): the reference is
    # counted on those, as serving projects on them, so no row changes bin in between.
    directions = directions.astype(DIRECTION_DTYPE).astype(float)
    # Uncentred projections, as serving computes them: a shift common to both sides
    # moves no row between bins.
    projections = x @ directions.T
    quantiles = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    edges = np.round(np.quantile(projections, quantiles, axis=0).T, EDGE_DECIMALS)
    return EmbeddingSummary(
        embedder=embedder,
        n=len(x),
        directions=directions.tolist(),
        edges=edges.tolist(),
        counts=[_counts(projections[:, i], edges[i]) for i in range(k)],
    )


_matrices: dict[int, tuple[weakref.ref[EmbeddingSummary], np.ndarray]] = {}
_MAX_CACHED = 32


def direction_matrix(summary: EmbeddingSummary) -> np.ndarray:
    """The summary's directions as a (k, dim) array, built once per summary: every
    decision under a policy projects on it. (Kept here, not on the contract, so that
    policies compare by their fields alone.)"""
    key = id(summary)
    cached = _matrices.get(key)
    if cached is not None and cached[0]() is summary:
        return cached[1]
    matrix = np.asarray(summary.directions, dtype=float)
    if len(_matrices) >= _MAX_CACHED:  # a few policies live at once; forget the old ones
        _matrices.clear()
    _matrices[key] = (weakref.ref(summary), matrix)
    return matrix


def project(summary: EmbeddingSummary, embedding: Sequence[float]) -> list[float]:
    """One message's projections on the summary's directions (k floats)."""
    values = direction_matrix(summary) @ np.asarray(embedding, dtype=float)
    return [round(v, PROJECTION_DECIMALS) for v in values.tolist()]


def window_summary(reference: EmbeddingSummary, projections: Sequence[Sequence[float]]
                   ) -> EmbeddingSummary | None:
    """A window's projections counted in the reference's bins (None: no projections).

    Rows of another width (projected on other directions) are left out."""
    k = len(reference.directions)
    rows = [p for p in projections if len(p) == k]
    if not rows:
        return None
    values = np.asarray(rows, dtype=float)
    counts = [_counts(values[:, i], np.asarray(reference.edges[i], dtype=float))
              for i in range(k)]
    # Same directions and edges as the reference; only the counts are the window's.
    return reference.model_copy(update={"n": len(rows), "counts": counts})


def bin_labels(edges: Sequence[float]) -> list[str]:
    """Labels of the bins around these inner edges, by rank: `q1` (below the first edge)
    to `q<len(edges) + 1>` (at or above the last); the reference holds about a tenth of
    its rows in each."""
    return [f"q{i + 1}" for i in range(len(edges) + 1)]

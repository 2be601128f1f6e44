"""The embedding summary's core on synthetic unit vectors: directions, bins, the window's
counts, the per-direction features and the summary feature, and the projection `decide`
attaches. The same on a real e5 model: tests/router/app/test_e5_drift.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from router.contracts import (
    EMBEDDING_COMPONENTS,
    DriftReference,
    EmbeddingSummary,
    Policy,
    RouteScores,
)
from router.routing.drift import MIN_RECENT, compare, format_report, reference_from_decisions
from router.routing.embedding_drift import (
    EMBEDDING_BINS,
    direction_matrix,
    project,
    summarise_embeddings,
    window_summary,
)
from router.routing.policy import decide

DIM = 32
SCALES = 0.75 ** np.arange(DIM)  # distinct variances: the principal axes are the axes


def unit_rows(n: int, *, seed: int, shift: float = 0.0) -> np.ndarray:
    """n unit vectors spread most along the first axes; `shift` moves them along axis 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM)) * SCALES
    x[:, 1] += shift
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def decisions(n: int, embedding: EmbeddingSummary | None) -> DriftReference:
    """n decisions alike in every feature but the embedding."""
    return reference_from_decisions(
        confidences=[0.9] * n, routed=[True] * n, choices=["refund"] * n,
        text_chars=[100] * n, languages=["en"] * n, embedding=embedding)


def with_embedding(reference_rows: np.ndarray, recent_rows: np.ndarray, *,
                   n_recent: int | None = None) -> tuple[DriftReference, DriftReference]:
    """A reference and a window alike in every other feature, with these embeddings (the
    window of `n_recent` decisions, of which the recent rows were e5-scored)."""
    summary = summarise_embeddings(reference_rows, embedder="test-weights")
    projections = [project(summary, row) for row in recent_rows]
    return (decisions(len(reference_rows), summary),
            decisions(n_recent or len(recent_rows), window_summary(summary, projections)))


def test_the_summary_keeps_k_unit_directions_and_decile_bins() -> None:
    rows = unit_rows(2000, seed=1)
    summary = summarise_embeddings(rows, embedder="test-weights")
    matrix = direction_matrix(summary)
    assert matrix.shape == (EMBEDDING_COMPONENTS, DIM)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    # Largest variance first: the first direction is the first axis (up to rounding).
    assert abs(matrix[0, 0]) > 0.95
    for counts in summary.counts:
        assert len(counts) == EMBEDDING_BINS and sum(counts) == 2000
        assert max(counts) - min(counts) <= 2  # deciles of the reference itself
    stored = json.loads(summary.model_dump_json())
    assert all(isinstance(d, str) for d in stored["directions"])  # float16, base64
    again = EmbeddingSummary.model_validate_json(summary.model_dump_json())
    assert again == summary
    with pytest.raises(ValidationError, match="float16"):
        EmbeddingSummary.model_validate({**summary.model_dump(),
                                         "directions": (matrix + 1e-6).tolist()})
    with pytest.raises(ValidationError, match="sum to n"):
        EmbeddingSummary.model_validate({**summary.model_dump(), "n": 1999})


def test_same_embeddings_are_quiet_and_a_shift_along_a_direction_fires() -> None:
    reference, same = with_embedding(unit_rows(2000, seed=1), unit_rows(500, seed=2))
    quiet = compare(reference, same)
    assert quiet.verdict == "ok", format_report(quiet)
    names = [f.feature for f in quiet.features]
    assert names[5:] == ["embedding", *(f"embedding.{i + 1}" for i in
                                        range(EMBEDDING_COMPONENTS))]

    reference, shifted = with_embedding(unit_rows(2000, seed=1),
                                        unit_rows(500, seed=3, shift=2.0))
    report = compare(reference, shifted)
    status = {f.feature: f for f in report.features}
    assert report.fires and report.message.startswith("drift in embedding")
    assert status["embedding"].status == "drift"
    assert status["length"].status == "ok"  # the form did not change, the content did
    worst = max((f for f in report.features if f.feature.startswith("embedding.")),
                key=lambda f: f.psi)
    assert status["embedding"].psi == worst.psi
    assert all(f.p_value <= 1.0 for f in report.features)
    assert "embedding" in report.as_dict()["features"][5]["feature"]


def test_too_few_projections_leave_the_embedding_out_and_say_why() -> None:
    reference, recent = with_embedding(unit_rows(2000, seed=1),
                                       unit_rows(MIN_RECENT - 1, seed=2), n_recent=400)
    report = compare(reference, recent)
    assert report.verdict == "ok"
    assert not any(f.feature.startswith("embedding") for f in report.features)
    assert report.absent == {"embedding": "not_enough_traffic"}
    assert f"{MIN_RECENT - 1} e5-scored decisions" in report.message
    assert "not_enough_traffic" in format_report(report)


def test_a_reference_without_an_embedding_summary_compares_as_before() -> None:
    _, recent = with_embedding(unit_rows(200, seed=1), unit_rows(300, seed=2))
    plain = recent.model_copy(update={"embedding": None})
    report = compare(plain, recent)
    assert [f.feature for f in report.features] == [
        "confidence", "routed", "length", "language", "predicted"]
    assert report.absent == {}


def test_decide_projects_an_e5_embedding_on_the_policy_summary_only() -> None:
    rows = unit_rows(300, seed=1)
    reference, _ = with_embedding(rows, rows[:10])
    policy = Policy(version="e5-v1", model={"backend": "e5", "name": "e5-x"},
                    threshold=0.5, reference=reference)
    assert Policy.model_validate_json(policy.model_dump_json()) == policy
    probabilities = {"refund": 0.7, "account": 0.1, "other": 0.1, "unclear": 0.1}
    embedded = RouteScores.from_probabilities("e5-x", probabilities,
                                              embedding=tuple(rows[0].tolist()))
    decision = decide(embedded, policy, request_id="r")
    assert reference.embedding is not None
    expected = direction_matrix(reference.embedding) @ rows[0]
    assert decision.projections == pytest.approx(expected.tolist(), abs=1e-6)
    # Never part of what the API returns or a prediction file holds.
    assert "projections" not in json.loads(decision.model_dump_json())
    assert "embedding" not in embedded.model_dump()

    plain = RouteScores.from_probabilities("local-x", probabilities)
    assert decide(plain, policy, request_id="r").projections is None
    no_summary = policy.model_copy(update={"reference": None})
    assert decide(embedded, no_summary, request_id="r").projections is None

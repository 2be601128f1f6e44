"""Training the steering detector (`router.models.local.steering`) from marked spans.

It learns from the labelled rows' `steering` spans (verbatim substrings a person marked as
addressed to the system, `datasets/LABELLING.md`): a segment is steering when at least
half of its visible characters lie in such spans. Rows without the `injection` tag give
negatives, and `datasets/steering/` adds standalone steering segments and look-alike
customer sentences. The threshold is the lowest whose out-of-fold false positives on
segments of rows without the `injection` tag stay within `max_clean_false_positive_rate`,
so ordinary messages are almost never cut.

Training only: scikit-learn fits both stages, `_spec` turns them into the plain numbers
`SteeringDetector` scores with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from joblib import Parallel, delayed
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import StandardScaler

from router.models.crossfit import parallel_jobs
from router.models.local.fitted import blocks_from_union
from router.models.local.steering import (
    CONTEXT_FEATURES,
    SteeringCut,
    SteeringDetector,
    context_features,
    cut_segments,
    segment_bounds,
    segment_text,
    uncut,
)

STEERING_SHARE = 0.5  # a segment is steering when this share of its characters is marked
MAX_CLEAN_FALSE_POSITIVE_RATE = 0.001
# The loose cut, for clause features only. Below the strict budget the detector's scores
# still find most of the steering it leaves, but cutting that loosely would cost ordinary
# messages their words; so the clauses (where missed steering reads as a second request)
# are read from the loosely cut text, and the whole message from the strictly cut one.
# Chosen out of fold on the train and calibration splits, against a 0.3% budget and
# against reading the whole message through the loose cut as well.
LOOSE_CLEAN_FALSE_POSITIVE_RATE = 0.01
FOLDS = 5
# The highest out-of-fold recall on the marked segments of the train and calibration
# splits, at the same 0.1% clean false-positive budget, among C 3–100, 2–5- and
# 2–6-grams and min_df 1–2.
SEGMENT_C = 30.0
SEGMENT_NGRAMS = (2, 6)
CONTEXT_C = 1.0


def segment_targets(text: str, spans: Sequence[str]) -> list[int]:
    """1 for each segment mostly made of marked steering characters, else 0."""
    marked = np.zeros(len(text), dtype=bool)
    for span in spans:
        start = text.find(span)
        while start >= 0:
            marked[start : start + len(span)] = True
            start = text.find(span, start + 1)
    visible = np.array([not c.isspace() for c in text], dtype=bool)
    targets = []
    for start, end in segment_bounds(text):
        shown = visible[start:end]
        share = marked[start:end][shown].mean() if shown.any() else 0.0
        targets.append(int(share >= STEERING_SHARE))
    return targets


def fit_steering_detector(
    texts: Sequence[str],
    steering: Sequence[Sequence[str] | None],
    *,
    extra_segments: Sequence[tuple[str, bool]] = (),
    max_clean_false_positive_rate: float = MAX_CLEAN_FALSE_POSITIVE_RATE,
) -> tuple[dict | None, list[SteeringCut]]:
    """The detector's artifact part, and every text's `SteeringCut` out of fold.

    `steering[i]` is row i's marked spans, `[]` for a row with nothing to mark, or None
    for an `injection` row nobody marked (its segments are left out). `extra_segments`
    are standalone (segment, is_steering) examples for stage 1, used in every fold.
    The texts come back cut by detectors that never saw them, so the route model trains
    on what the detector really leaves. Without enough marked segments there is no
    detector: (None, the texts uncut).
    """
    rows: list[int] = []
    segments: list[str] = []
    targets: list[int] = []
    counts: list[int] = []
    included: list[int] = []
    for row, (text, spans) in enumerate(zip(texts, steering, strict=True)):
        if spans is None:
            continue
        included.append(row)
        bounds = segment_bounds(text)
        marks = segment_targets(text, spans) if spans else [0] * len(bounds)
        rows.extend([row] * len(bounds))
        segments.extend(text[a:b] for a, b in bounds)
        targets.extend(marks)
        counts.append(len(bounds))
    y = np.asarray(targets, dtype=int)
    if y.sum() < FOLDS or (1 - y).sum() < FOLDS:
        return None, uncut(texts)
    row_of = np.asarray(rows)
    extra_text = [text for text, _ in extra_segments]
    extra_y = np.asarray([int(target) for _, target in extra_segments], dtype=int)

    # Stage 1, cross-fitted by whole rows (a row's segments never score each other), the
    # folds and the final fit in parallel.
    held_out = [row_of % FOLDS == fold for fold in range(FOLDS)]
    fits = Parallel(n_jobs=parallel_jobs(FOLDS + 1))(
        delayed(_segment_model)([*_pick(segments, keep), *extra_text], np.r_[y[keep], extra_y])
        for keep in [*(~held for held in held_out), np.ones(len(y), dtype=bool)]
    )
    stage_one = np.zeros(len(y))
    for held, model in zip(held_out, fits, strict=False):
        stage_one[held] = SteeringDetector(_spec(model)).segment_probabilities(
            _pick(segments, held)
        )
    features = context_features(stage_one, counts)
    # Stage 2 on stage 1's out-of-fold scores, cross-fitted again over other folds.
    stage_two = np.zeros(len(y))
    second_folds = (row_of // FOLDS) % FOLDS
    for fold in range(FOLDS):
        held = second_folds == fold
        context = _context_model(features[~held], y[~held])
        stage_two[held] = context.predict_proba(features[held])[:, 1]
    clean_rows = {row for row, spans in enumerate(steering) if spans == []}
    clean = np.array([row in clean_rows for row in rows], dtype=bool)
    threshold = pick_threshold(stage_two[clean], max_clean_false_positive_rate)
    loose_threshold = min(
        threshold, pick_threshold(stage_two[clean], LOOSE_CLEAN_FALSE_POSITIVE_RATE)
    )
    flagged = stage_two >= threshold

    spec = _spec(
        fits[-1],
        _context_model(features, y),
        threshold=threshold,
        loose_threshold=loose_threshold,
    )
    spec["training"] = {
        "segments": len(y),
        "steering_segments": int(y.sum()),
        "extra_segments": len(extra_text),
        "out_of_fold_recall": round(float(flagged[y == 1].mean()), 6),
        "out_of_fold_clean_false_positives": int(flagged[clean].sum()),
        "clean_segments": int(clean.sum()),
        "max_clean_false_positive_rate": max_clean_false_positive_rate,
        "loose_out_of_fold_recall": round(float((stage_two >= loose_threshold)[y == 1].mean()), 6),
        "loose_clean_false_positive_rate": LOOSE_CLEAN_FALSE_POSITIVE_RATE,
    }
    cuts = uncut(texts)
    chosen = [texts[row] for row in included]
    chosen_cuts = cut_segments(
        chosen, [segment_bounds(t) for t in chosen], stage_two, threshold, loose_threshold
    )
    for row, cut in zip(included, chosen_cuts, strict=True):
        cuts[row] = cut
    return spec, cuts


def pick_threshold(clean_probabilities: np.ndarray, max_rate: float) -> float:
    """The lowest threshold flagging at most `max_rate` of the clean segments."""
    allowed = int(max_rate * len(clean_probabilities))
    if len(clean_probabilities) <= allowed:
        return 0.5
    ranked = np.sort(clean_probabilities)[::-1]
    return float(np.nextafter(ranked[allowed], 2.0))  # strictly above the first one not allowed


def _pick(items: Sequence[str], mask: np.ndarray) -> list[str]:
    return [items[i] for i in np.flatnonzero(mask).tolist()]


def _segment_model(
    segments: Sequence[str], y: np.ndarray
) -> tuple[FeatureUnion, LogisticRegression]:
    common = {"sublinear_tf": True, "strip_accents": "unicode", "lowercase": True}
    # Character n-grams only: a word 1–2-gram block as well found no more steering out of
    # fold (recall 0.868 vs 0.870 at the same false positives) and cost a second lookup.
    union = FeatureUnion(
        [
            (
                "char",
                TfidfVectorizer(
                    analyzer="char_wb", ngram_range=SEGMENT_NGRAMS, min_df=2, **common
                ),
            )
        ]
    )
    features = union.fit_transform([segment_text(s) for s in segments])
    classifier = LogisticRegression(C=SEGMENT_C, max_iter=5000, tol=1e-4).fit(features, y)
    return union, classifier


def _context_model(features: np.ndarray, y: np.ndarray) -> Pipeline:
    return Pipeline(
        [
            ("scaler", StandardScaler()),
            ("classifier", LogisticRegression(C=CONTEXT_C, max_iter=5000)),
        ]
    ).fit(features, y)


def _spec(
    segment_model: tuple[FeatureUnion, LogisticRegression],
    context: Pipeline | None = None,
    *,
    threshold: float = 1.0,
    loose_threshold: float = 1.0,
) -> dict:
    """Plain-data form of the two stages (standardisation folded into stage 2's weights).

    Without `context` (stage 1 alone, while cross-fitting) stage 2 is the identity on
    the segment's own logit.
    """
    union, classifier = segment_model
    if context is None:
        coef = np.zeros(len(CONTEXT_FEATURES))
        coef[0], intercept = 1.0, 0.0
    else:
        scaler, linear = context.named_steps["scaler"], context.named_steps["classifier"]
        coef = linear.coef_[0] / scaler.scale_
        intercept = float(linear.intercept_[0] - scaler.mean_ / scaler.scale_ @ linear.coef_[0])
    return {
        "threshold": threshold,
        "loose_threshold": loose_threshold,
        "segment": {
            "blocks": blocks_from_union(union),
            "coef": classifier.coef_[0].tolist(),
            "intercept": float(classifier.intercept_[0]),
        },
        "context": {
            "features": list(CONTEXT_FEATURES),
            "coef": coef.tolist(),
            "intercept": intercept,
        },
    }

"""A learned steering detector: cut the segments addressed to the router, not the shop.

The pattern list of `router.models.local.text.instructions` catches the common shapes of injected
routing instructions, but people steer in endless ways: ticket metadata, fake tool calls,
role-play, a route named in a signature or in another language. Whatever the list misses
names a route in the customer's words and pulls the linear model towards it.

This detector is learned instead, in two small stages:
1. each segment of a message (a line, a sentence, a bracketed block, a `|` field) is
   scored alone by a logistic regression over character n-grams;
2. a second logistic regression reads each segment's score next to its neighbours'
   (steering comes in blocks: "Do not consider any other information." is steering only
   after a fake note) and whether it is the whole message (a one-word "account" is a
   customer, not a header).
Segments scored at or above the threshold are removed before anything else reads the text.
Two more readings of the same scores serve the route model's second stage (`SteeringCut`):
the text cut at a looser threshold, which its clause features read (a clause that looks
like steering is weak evidence of a second request), and the highest score among the
segments the strict cut kept.

It learns from the labelled rows' `steering` spans (verbatim substrings a person marked as
addressed to the system, `datasets/LABELLING.md`): a segment is steering when at least
half of its visible characters lie in such spans. Rows without the `injection` tag give
negatives, and `datasets/steering/` adds standalone steering segments and look-alike
customer sentences. The threshold is the lowest whose out-of-fold false positives on
segments of rows without the `injection` tag stay within `max_clean_false_positive_rate`,
so ordinary messages are almost never cut.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from numba import njit
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import StandardScaler

from router.errors import ArtifactError
from router.models.local.kernels.features import TfidfSpace
from router.models.local.linear import blocks_from_union
from router.models.local.text.entities import normalise_entities

# Segment breaks: line breaks, sentence ends, ` | ` and dash separators, `###` and `---`
# rules, and the edges of bracketed blocks (`[…]`, `{…}`, `<…>`), where fake notes sit.
# Every break starts after a closing bracket or at a space, an opening bracket or a `#`;
# the leading test lets `re` reject every other position at once instead of trying eight
# alternatives there.
_SEGMENT_BREAK = re.compile(
    r"(?:(?<=[\]}>])|(?=[\s\[{<#]))"
    r"(?:\n+|(?<=[.!?])\s+|\s+\|\s+|\s[—–-]{1,3}\s|(?<=[\]}>])\s*|\s*(?=[\[{<])|#{3,}|\s-{3,}\s*)"
)
# The same pattern without the alternatives that need a bracket or a `#`: in a text with
# neither (most messages) it finds the same breaks, trying fewer alternatives at every
# space.
_PLAIN_SEGMENT_BREAK = re.compile(r"(?=\s)(?:\n+|(?<=[.!?])\s+|\s+\|\s+|\s[—–-]{1,3}\s|\s-{3,}\s*)")
_BRACKET = re.compile(r"[\[\]{}<>#]")
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
CONTEXT_FEATURES = (
    "logit",
    "probability",
    "previous_probability",
    "next_probability",
    "other_max_probability",
    "only_segment",
    "only_segment_logit",
    "first",
    "last",
    "log_segments",
    "neighbour_max_logit",
)
_N_CONTEXT_FEATURES = len(CONTEXT_FEATURES)
_LOGIT_CLIP = 1e-6


def segment_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank segment of `text`, in order."""
    return bounds_between(text, _SEGMENT_BREAK if _BRACKET.search(text) else _PLAIN_SEGMENT_BREAK)


def bounds_between(text: str, breaks: re.Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each non-blank piece of `text` between matches of `breaks`."""
    bounds: list[tuple[int, int]] = []
    position = 0
    for match in breaks.finditer(text):
        if match.start() > position:
            bounds.append((position, match.start()))
        position = max(position, match.end())
    if position < len(text):
        bounds.append((position, len(text)))
    return [(start, end) for start, end in bounds if not text[start:end].isspace()]


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


def context_features(probabilities: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """Stage-2 inputs (`CONTEXT_FEATURES`) of segments laid out message after message.

    `probabilities` are the stage-1 scores of every segment, `counts` how many segments
    each message has (messages without segments are allowed). Compiled: a few segments
    per message are too few for numpy's per-call overhead, and in Python the loop was a
    twentieth of a batch's scoring time.
    """
    clipped = np.clip(np.asarray(probabilities, dtype=np.float64), _LOGIT_CLIP, 1 - _LOGIT_CLIP)
    # The logits by numpy, as training computed them: the compiled `log` can differ from
    # numpy's in the last bit, and the same data must keep giving the same artifact.
    logits = np.log(clipped / (1 - clipped))
    return _context_rows(clipped, logits, np.asarray(counts, dtype=np.int64))


@njit(cache=True, nogil=True)
def _context_rows(p: np.ndarray, logits: np.ndarray, counts: np.ndarray) -> np.ndarray:
    rows = np.empty((len(p), _N_CONTEXT_FEATURES))
    start = 0
    for size in counts:
        # The highest score of the message's other segments: its maximum, unless this
        # segment is that (first) maximum, then the runner-up (0 when there is none).
        best_at = start
        for k in range(start, start + size):
            if p[k] > p[best_at]:
                best_at = k
        runner_up = 0.0
        for k in range(start, start + size):
            if k != best_at:
                runner_up = max(runner_up, p[k])
        only = 1.0 if size == 1 else 0.0
        for k in range(start, start + size):
            logit = logits[k]
            previous = p[k - 1] if k > start else 0.0
            following = p[k + 1] if k < start + size - 1 else 0.0
            row = rows[k]
            row[0] = logit
            row[1] = p[k]
            row[2] = previous
            row[3] = following
            row[4] = runner_up if k == best_at else p[best_at]
            row[5] = only
            row[6] = only * logit
            row[7] = 1.0 if k == start else 0.0
            row[8] = 1.0 if k == start + size - 1 else 0.0
            row[9] = math.log(size)
            row[10] = max(previous, following) * logit
        start += size
    return rows


@dataclass(frozen=True)
class SteeringCut:
    """What the detector makes of one message."""

    text: str  # without the segments at or above the threshold: what the route model reads
    loose_text: str  # also without those at or above the loose threshold: the clauses' source
    kept: float  # the highest steering probability among the segments `text` kept


def uncut(texts: Sequence[str]) -> list[SteeringCut]:
    """The cut of a model without a detector: nothing removed."""
    return [SteeringCut(text, text, 0.0) for text in texts]


def _segment_text(segment: str) -> str:
    """What the detector reads: entities replaced, as for the route model."""
    return normalise_entities(segment)


class SteeringDetector:
    """The fitted detector, evaluated straight from its vocabularies and weights."""

    def __init__(self, spec: dict) -> None:
        self.threshold = float(spec["threshold"])
        self.loose_threshold = float(spec["loose_threshold"])
        segment = spec["segment"]
        self.intercept = float(segment["intercept"])
        self.space = TfidfSpace(segment["blocks"])
        weights = np.asarray(segment["coef"], dtype=float)[:, None]
        if len(weights) != self.space.n_features:
            raise ArtifactError("steering detector weights do not match its vocabulary")
        self.table = self.space.scoring_table(weights)
        context = spec["context"]
        if list(context["features"]) != list(CONTEXT_FEATURES):
            raise ArtifactError(
                "the steering detector was trained on other context features than this "
                "build computes — retrain with `support-router train`"
            )
        self.context_coef = np.asarray(context["coef"], dtype=float)
        self.context_intercept = float(context["intercept"])
        self.cut_batch(["warm up"])  # compile (or load) the kernels now, not on a request

    def segment_probabilities(self, segments: Sequence[str]) -> np.ndarray:
        """Stage 1: P(steering) of each segment read alone."""
        if not segments:
            return np.zeros(0)
        texts = [_segment_text(s) for s in segments]
        return _sigmoid(self.intercept + self.space.logits(self.table, texts)[:, 0])

    def probabilities(self, segments: Sequence[str], counts: Sequence[int]) -> np.ndarray:
        """Stage 2: P(steering) of each segment in its message (`counts` per message)."""
        features = context_features(self.segment_probabilities(segments), counts)
        return _sigmoid(features @ self.context_coef + self.context_intercept)

    def remove(self, text: str) -> str:
        """The text without the segments scored as steering."""
        return self.cut_batch([text])[0].text

    def cut_batch(self, texts: Sequence[str]) -> list[SteeringCut]:
        """Every text's `SteeringCut` (one scoring pass for all)."""
        bounds = [segment_bounds(text) for text in texts]
        flat = [text[a:b] for text, spans in zip(texts, bounds, strict=True) for a, b in spans]
        probabilities = self.probabilities(flat, [len(b) for b in bounds])
        return cut_segments(texts, bounds, probabilities, self.threshold, self.loose_threshold)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def cut_segments(
    texts: Sequence[str],
    bounds: Sequence[Sequence[tuple[int, int]]],
    probabilities: np.ndarray,
    threshold: float,
    loose_threshold: float,
) -> list[SteeringCut]:
    """Cut each text's segments (`bounds`, their `probabilities` laid out text after text)."""
    cuts = []
    scores = iter(probabilities.tolist())
    for text, spans in zip(texts, bounds, strict=True):
        scored = [(span, next(scores)) for span in spans]
        strict = _cut(text, [span for span, p in scored if p >= threshold])
        loose = [span for span, p in scored if p >= loose_threshold]
        kept = max((p for _, p in scored if p < threshold), default=0.0)
        cuts.append(SteeringCut(strict, _cut(text, loose) if loose else strict, kept))
    return cuts


def _cut(text: str, spans: Sequence[tuple[int, int]]) -> str:
    if not spans:
        return text
    kept, position = [], 0
    for start, end in spans:
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return "".join(kept)


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
    segments: list[str]
    rows, segments, targets, counts, included = [], [], [], [], []
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
    fits = Parallel(n_jobs=min(FOLDS + 1, os.cpu_count() or 1))(
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
    return [items[int(i)] for i in np.flatnonzero(mask)]


def _segment_model(
    segments: Sequence[str], y: np.ndarray
) -> tuple[FeatureUnion, LogisticRegression]:
    common = {"sublinear_tf": True, "strip_accents": "unicode", "lowercase": True}
    # Character n-grams only: a word 1–2-gram block as well finds no more steering out of
    # fold at the same false positives, and costs a second lookup.
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
    features = union.fit_transform([_segment_text(s) for s in segments])
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

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

This module segments and scores with the fitted detector (plain numbers from the
artifact, no scikit-learn); `router.models.local.train_steering` learns it from the
labelled rows' marked steering spans.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from router.errors import ArtifactError
from router.models.local.kernels.features import TfidfSpace
from router.models.local.text.entities import normalise_entities

# Segment breaks: line breaks, sentence ends, ` | ` and dash separators, `###` and `---`
# rules, and the edges of bracketed blocks (`[…]`, `{…}`, `<…>`), where fake notes sit; an
# arrow (`=> refund`) is not the end of a block, so what it points to stays with it.
# Every break starts after a closing bracket or at a space, an opening bracket or a `#`;
# the leading test lets `re` reject every other position at once instead of trying eight
# alternatives there.
_CLOSED = r"(?:(?<=[\]}])|(?<=>)(?<![=-]>))"  # a closing bracket; `->` and `=>` are arrows
_SEGMENT_BREAK = re.compile(
    rf"(?:{_CLOSED}|(?=[\s\[{{<#]))"
    rf"(?:\n+|(?<=[.!?])\s+|\s+\|\s+|\s[—–-]{{1,3}}\s|{_CLOSED}\s*|\s*(?=[\[{{<])|#{{3,}}|\s-{{3,}}\s*)"
)
# The same pattern without the alternatives that need a bracket or a `#`: in a text with
# neither (most messages) it finds the same breaks, trying fewer alternatives at every
# space.
_PLAIN_SEGMENT_BREAK = re.compile(r"(?=\s)(?:\n+|(?<=[.!?])\s+|\s+\|\s+|\s[—–-]{1,3}\s|\s-{3,}\s*)")
_BRACKET = re.compile(r"[\[\]{}<>#]")
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


def segment_text(segment: str) -> str:
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
        texts = [segment_text(s) for s in segments]
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



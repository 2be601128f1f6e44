"""The linear model's classes: the four routes, with `unclear` split by why.

A message too vague to act on ("help") and a message holding two requests ("refund the
mug and change my address") are both `unclear`, but they look nothing alike: one has no
request words, the other has two sets. One linear class for both had to sit near every
other class at once, and pulled clear requests towards `unclear`. Fitted as two classes
(from the rows' `multi_request` tag) and merged back into `unclear` wherever routes are
scored, each class can sit where its messages are, and clear requests stay clear.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from router.contracts import ROUTES

UNCLEAR = ROUTES.index("unclear")
LINEAR_CLASSES = (*ROUTES[:UNCLEAR], "unclear_vague", "unclear_multi_request")
MULTI_REQUEST = LINEAR_CLASSES.index("unclear_multi_request")


def linear_targets(labels: Sequence[str], tags: Sequence[Sequence[str]]) -> np.ndarray:
    """Each row's linear class: its route, or `unclear_multi_request` for an unclear row
    tagged `multi_request` (every other unclear row counts as vague)."""
    targets = np.array([ROUTES.index(label) for label in labels])  # type: ignore[arg-type]
    multi = np.array(["multi_request" in row_tags for row_tags in tags], dtype=bool)
    targets[(targets == UNCLEAR) & multi] = MULTI_REQUEST
    return targets


def route_logits(logits: np.ndarray) -> np.ndarray:
    """Logits over the four routes: the unclear classes merged (their softmax mass adds up).

    Four-column logits (a model fitted on routes alone) are returned as they are.
    """
    if logits.shape[-1] == len(ROUTES):
        return logits
    # np.logaddexp, not scipy's logsumexp: the same number for two columns, at a tenth of
    # the cost on a single message.
    merged = np.logaddexp(logits[..., UNCLEAR], logits[..., UNCLEAR + 1])
    return np.concatenate([logits[..., :UNCLEAR], merged[..., None]], axis=-1)

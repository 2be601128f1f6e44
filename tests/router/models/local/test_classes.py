"""The linear model's classes and how they merge back into routes."""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from router.contracts import ROUTES
from router.models.local.classes import LINEAR_CLASSES, linear_targets, route_logits


def test_unclear_rows_are_split_by_their_tag() -> None:
    labels = ["refund", "unclear", "unclear", "unclear", "account"]
    tags = [["single_route_two_asks"], ["multi_request", "angry"], ["vague"], [], ["typo"]]
    targets = linear_targets(labels, tags)
    assert [LINEAR_CLASSES[t] for t in targets] == [
        "refund", "unclear_multi_request", "unclear_vague", "unclear_vague", "account"
    ]


def test_merged_logits_give_the_summed_unclear_probability() -> None:
    logits = np.random.default_rng(0).normal(scale=3.0, size=(50, len(LINEAR_CLASSES)))
    linear = softmax(logits, axis=1)
    merged = softmax(route_logits(logits), axis=1)
    assert merged.shape == (50, len(ROUTES))
    np.testing.assert_allclose(merged[:, :3], linear[:, :3], rtol=1e-12)
    np.testing.assert_allclose(merged[:, 3], linear[:, 3] + linear[:, 4], rtol=1e-12)
    np.testing.assert_allclose(route_logits(logits[0]), route_logits(logits)[0])


def test_route_logits_leave_four_routes_alone() -> None:
    logits = np.arange(8.0).reshape(2, 4)
    assert route_logits(logits) is logits

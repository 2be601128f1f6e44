"""Train the embedded model from the labelled data and write its default policy.

Train rows fit the model, calibration rows fit its temperature and pick the default
threshold; test rows are never touched here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.data import data_sha, load_labelled, select_split
from calibration.metrics import outcomes, routed_mask, routing_summary
from router.contracts import Policy, PolicyData, PolicyModel, RouteScores
from router.models.linear import save_artifact
from router.models.local import LocalRouteModel, TrainOptions, train_artifact
from router.policy import save_policy

MAX_MISROUTE_RATE_ROUTED = 0.02
THRESHOLD_GRID = np.round(np.arange(0.99, -0.001, -0.01), 2)


@dataclass(frozen=True)
class TrainResult:
    model_path: Path
    policy_path: Path
    artifact_sha: str
    policy: Policy


def pick_default_threshold(
    labels: list[str], scores: list[RouteScores], *, max_rate: float = MAX_MISROUTE_RATE_ROUTED
) -> float:
    """Walk the grid from strict to loose; keep the loosest λ before misroutes exceed the cap.

    This is the empirical rule that ships with `train`; `support-router calibrate`
    replaces it with a threshold that carries a finite-sample guarantee.
    """
    choices = [s.choice for s in scores]
    confidences = [s.confidence for s in scores]
    chosen = float(THRESHOLD_GRID[0])
    for threshold in THRESHOLD_GRID:
        routed = routed_mask(choices, confidences, float(threshold))
        summary = routing_summary(labels, outcomes(labels, choices, routed))
        if summary["routed"] and summary["misroute_rate_routed"] > max_rate:
            break
        chosen = float(threshold)
    return chosen


MODEL_FILES = {"local": "local-route-model.json", "e5": "e5-route-model.json"}


def train_local(
    data: Path,
    model_dir: Path,
    *,
    policy_path: Path,
    options: TrainOptions | None = None,
    backend: str = "local",
) -> TrainResult:
    """Train the local model (or its e5 variant) and write it with its default policy."""
    rows = load_labelled(data)
    train = select_split(rows, "train")
    held_out = select_split(rows, "calibration")
    args = (
        [r.text for r in train],
        [r.label for r in train],
        [r.text for r in held_out],
        [r.label for r in held_out],
    )
    options = options or TrainOptions()
    model_path = model_dir / MODEL_FILES[backend]
    if backend == "e5":
        from router.models.e5 import E5RouteModel, train_e5_artifact
        from router.models.e5_features import E5Embedder

        embedder = E5Embedder(threads=1)
        artifact = train_e5_artifact(
            *args, embedder=embedder, options=options, data_sha=data_sha(rows)
        )
        sha = save_artifact(artifact, model_path)
        model: LocalRouteModel | E5RouteModel = E5RouteModel(artifact, sha, embedder)
    else:
        artifact = train_artifact(*args, options=options, data_sha=data_sha(rows))
        sha = save_artifact(artifact, model_path)
        model = LocalRouteModel(artifact, sha)
    threshold = pick_default_threshold(
        [r.label for r in held_out], model.score_batch([r.text for r in held_out])
    )
    policy = Policy(
        version=f"{backend}-default-{sha[:8]}",
        model=PolicyModel(backend=backend, name=model.name, artifact_sha=sha),
        threshold=threshold,
        data=PolicyData(labels_sha=data_sha(held_out), n_certify=len(held_out)),
        notes=(
            "default policy from `train`: loosest threshold on the calibration split whose "
            f"misroute rate among routed requests stays <= {MAX_MISROUTE_RATE_ROUTED:.0%}"
        ),
    )
    save_policy(policy, policy_path)
    return TrainResult(model_path, policy_path, sha, policy)

"""Train the embedded model from the labelled data and write its default policy.

Both backends are cross-fitted over the train and calibration splits together and their
default threshold is picked on those rows' out-of-fold probabilities. Test rows are never
touched here.

The trainers (`router.models.local.train`, `router.models.e5.train`) and the
certification maths are imported when `train_local` runs: every gateway process imports
this module (`router.app.bootstrap` trains a missing model on start), and one that
finds its model loads no scikit-learn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from calibration.data import (
    data_sha,
    load_labelled,
    load_steering_segments,
    select_split,
    steering_marks,
)
from calibration.drift import with_reference
from calibration.predictions import PredictionRow, local_question_sha, write_predictions
from router.contracts import (
    ROUTES,
    Backend,
    Guarantee,
    Policy,
    PolicyData,
    PolicyModel,
    RouteScores,
)
from router.models.local.linear import save_artifact
from router.models.local.model import LocalRouteModel
from router.storage.policy_store import save_policy

if TYPE_CHECKING:
    from router.models.e5.model import E5RouteModel
    from router.models.local.train import TrainOptions

MAX_MISROUTE_RATE_ROUTED = 0.02
DEFAULT_DELTA = 0.05


@dataclass(frozen=True)
class TrainResult:
    model_path: Path
    policy_path: Path
    artifact_sha: str
    policy: Policy


CROSS_FIT_METHOD = ("learn-then-test, fixed sequence, binomial tail; on the cross-fitted "
                    "(out-of-fold) scores of the train and calibration rows")


def certify_default_threshold(
    labels: list[str],
    scores: list[RouteScores],
    *,
    max_rate: float = MAX_MISROUTE_RATE_ROUTED,
    delta: float = DEFAULT_DELTA,
) -> tuple[float, Guarantee | None]:
    """The loosest threshold certified to keep misroutes among routed requests ≤ `max_rate`
    (with probability 1 − `delta`), as `support-router calibrate` certifies one, and the
    guarantee it carries.

    The loosest threshold whose *observed* rate is ≤ the cap breaks the cap on new data
    about half the time (docs/data-team.md), so the default is certified, not observed.
    Without enough rows to certify any threshold: the strictest one on the grid, and no
    guarantee.
    """
    from calibration.certify import THRESHOLD_GRID, certify_threshold

    certification = certify_threshold(
        np.asarray(labels),
        np.asarray([s.choice for s in scores]),
        np.asarray([s.confidence for s in scores]),
        alpha=max_rate,
        delta=delta,
        grid=THRESHOLD_GRID,
        check_size=False,
    )
    threshold = certification.threshold
    if threshold is None or certification.upper_bound is None:
        return float(THRESHOLD_GRID[0]), None
    guarantee = Guarantee(alpha=max_rate, delta=delta, n_certify=len(labels),
                          misroutes=certification.misroutes,
                          upper_bound=certification.upper_bound, method=CROSS_FIT_METHOD)
    return threshold, guarantee


MODEL_FILES = {"local": "local-route-model.json", "e5": "e5-route-model.json"}
OUT_OF_FOLD_FILES = {"local": "local-out-of-fold.jsonl", "e5": "e5-out-of-fold.jsonl"}
"""Next to each model: its out-of-fold scores of the train and calibration rows (a
prediction file, `calibration.predictions`), what a cascade of two models is certified
on (`support-router certify-cascade`) without retraining either."""

TrainProgress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`: called as each stage of `train_local` starts, with the
number of stages done and how many there are, and once more as `("done", total, total)`.

The stages are `train_local`'s own steps: the cross-fit folds, the final fit and the second
stage run inside one call to the model's trainer (`router.models`), so they are one stage.
"""

STAGES = {
    "local": ("reading the labelled data",
              "fitting the model (steering detector, cross-fit folds, final fit, second stage)",
              "certifying the default policy"),
    "e5": ("reading the labelled data",
           "fitting the steering detector",
           "fitting the model (embeddings, cross-fit folds, final fit, second stage)",
           "certifying the default policy"),
}


def train_local(
    data: Path,
    model_dir: Path,
    *,
    policy_path: Path,
    steering_data: Path | None = None,
    options: TrainOptions | None = None,
    backend: str = "local",
    progress: TrainProgress | None = None,
) -> TrainResult:
    """Train the local model (or its e5 variant) and write it with its default policy.

    `steering_data` (a folder of `SteeringSegment` rows) adds standalone examples to the
    steering detector; the rows' own marked spans train it in any case. `progress` is told
    as each stage starts (`TrainProgress`).
    """
    from router.models.local.train import TrainOptions, train_artifact

    stages = STAGES[backend]

    def starting(stage: int) -> None:
        if progress is not None:
            progress(stages[stage] if stage < len(stages) else "done", stage, len(stages))

    starting(0)
    rows = load_labelled(data)
    train = select_split(rows, "train")
    held_out = select_split(rows, "calibration")
    extra_segments = [
        (segment.text, segment.steering)
        for segment in (load_steering_segments(steering_data) if steering_data else [])
    ]
    options = options or TrainOptions()
    model_path = model_dir / MODEL_FILES[backend]
    threshold_rows = train + held_out
    texts = [r.text for r in threshold_rows]
    labels = [r.label for r in threshold_rows]
    tags = [r.tags for r in threshold_rows]
    marks = [steering_marks(r) for r in threshold_rows]
    e5_model: E5RouteModel | None = None
    if backend == "e5":
        from router.models.e5.embeddings import RememberingEmbedder
        from router.models.e5.model import E5RouteModel
        from router.models.e5.train import train_e5_artifact
        from router.models.local.model import prepare_cuts
        from router.models.local.train_steering import fit_steering_detector

        # The drift reference embeds the same rows again: remembered, not recomputed.
        embedder = RememberingEmbedder(threads=1)
        starting(1)
        detector, cuts = fit_steering_detector(texts, marks, extra_segments=extra_segments)
        starting(2)
        artifact, probabilities = train_e5_artifact(
            prepare_cuts(cuts),
            labels,
            tags=tags,
            embedder=embedder,
            options=options,
            data_sha=data_sha(rows),
        )
        artifact["steering"] = detector
        sha = save_artifact(artifact, model_path)
        e5_model = E5RouteModel(artifact, sha, embedder)
        model: LocalRouteModel | E5RouteModel = e5_model
    else:
        starting(1)
        artifact, probabilities = train_artifact(
            texts,
            labels,
            tags=tags,
            steering=marks,
            extra_segments=extra_segments,
            options=options,
            data_sha=data_sha(rows),
        )
        sha = save_artifact(artifact, model_path)
        model = LocalRouteModel(artifact, sha, model_path)
    starting(len(stages) - 1)
    # Out-of-fold probabilities: the final model was fitted on these rows, so scoring
    # them with it would be optimistic.
    scores = [
        RouteScores.from_probabilities(model.name, dict(zip(ROUTES, row.tolist(), strict=True)))
        for row in probabilities
    ]
    write_predictions(
        (PredictionRow(id=row.id, question_sha=local_question_sha(sha), **s.model_dump())
         for row, s in zip(threshold_rows, scores, strict=True)),
        model_dir / OUT_OF_FOLD_FILES[backend],
    )
    threshold, guarantee = certify_default_threshold([r.label for r in threshold_rows], scores)
    trained: Backend = "e5" if backend == "e5" else "local"  # MODEL_FILES refused any other
    policy = Policy(
        version=f"{backend}-default-{sha[:8]}",
        model=PolicyModel(backend=trained, name=model.name, artifact_sha=sha),
        threshold=threshold,
        guarantee=guarantee,
        data=PolicyData(labels_sha=data_sha(threshold_rows), n_certify=len(threshold_rows)),
        notes=(
            "default policy from `train`: loosest threshold certified to keep misroutes "
            f"among routed requests <= {MAX_MISROUTE_RATE_ROUTED:.0%} (delta "
            f"{DEFAULT_DELTA:g}) on out-of-fold scores of {len(threshold_rows)} labelled rows"
        ),
    )
    policy = with_reference(policy, scores, texts,
                            source=f"out-of-fold decisions on {len(threshold_rows)} train and "
                                   "calibration rows",
                            e5=e5_model)
    save_policy(policy, policy_path)
    starting(len(stages))
    return TrainResult(model_path, policy_path, sha, policy)

"""`support-router certify-cascade`: one certified policy for the local model, then e5.

It combines two model folders `train` already wrote rather than training anything: the
e5 stage takes far longer to train than the local model, each folder is trained (and
recalibrated) on its own, and a gateway that starts with the fast model alone can gain
the cascade later without retraining it. What makes that sound is that `train` writes
each model's out-of-fold scores of its train and calibration rows next to it
(`router.app.training.OUT_OF_FOLD_FILES`): the cascade is certified on those rows, where
neither stage scores a row it was fitted on, exactly as each model's own default policy
is (`calibration.cascade`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from calibration.cascade import METHOD, CascadeCertification, certify_cascade, stage_rows
from calibration.data import data_sha, load_labelled, select_split
from calibration.drift import with_reference
from calibration.predictions import identify_backend, read_predictions
from router.app.training import (
    DEFAULT_DELTA,
    MAX_MISROUTE_RATE_ROUTED,
    MODEL_FILES,
    OUT_OF_FOLD_FILES,
)
from router.contracts import (
    NEVER_ROUTE,
    ROUTES,
    CascadeStage,
    Guarantee,
    Policy,
    PolicyData,
    PolicyModel,
    RouteScores,
)
from router.errors import CalibrationError
from router.routing.cascade import CascadeModel, StageAnswer, cascade_model
from router.settings import POLICY_FILES, Settings
from router.storage.policy_store import load_policy, save_policy

STAGE_BACKENDS = ("local", "e5")
POLICY_FILE_OF = {"local": POLICY_FILES["policy_path"], "e5": POLICY_FILES["e5_policy_path"]}


@dataclass(frozen=True)
class CascadeResult:
    policy_path: Path
    policy: Policy
    certification: CascadeCertification


def _stage(settings: Settings, backend: str, folder: Path, ids: list[str]
           ) -> tuple[CascadeStage, np.ndarray]:
    """A stage's model identity, its policy's calibrator, and its out-of-fold
    probabilities of `ids` (n, 4)."""
    identity = identify_backend(settings, backend, str(folder / MODEL_FILES[backend]))
    oof_path = folder / OUT_OF_FOLD_FILES[backend]
    if not oof_path.exists():
        raise CalibrationError(f"no out-of-fold scores at {oof_path}; train the {backend} "
                               f"model again with this release (`support-router train "
                               f"--backend {backend} --out {folder}`)", code="no_out_of_fold")
    predictions = read_predictions(oof_path)
    if predictions.model != identity.name:
        raise CalibrationError(f"{oof_path} holds scores of {predictions.model}, not of the "
                               f"model {identity.name} next to it; train it again",
                               code="model_mismatch")
    index = {row_id: i for i, row_id in enumerate(predictions.ids)}
    missing = [i for i in ids if i not in index]
    if missing:
        raise CalibrationError(f"{len(missing)} train/calibration rows have no out-of-fold "
                               f"score in {oof_path} (first {missing[0]!r}): the {backend} "
                               "model was trained on other data; train both on the same",
                               code="model_mismatch")
    policy = load_policy(folder / POLICY_FILE_OF[backend])
    model = PolicyModel(backend=identity.backend, name=identity.name,
                        artifact_sha=identity.artifact_sha)
    stage = CascadeStage(model=model, calibrator=policy.calibrator, threshold=1.0)
    return stage, predictions.probabilities[[index[i] for i in ids]]


def certify_cascade_models(
    settings: Settings,
    *,
    fast_dir: Path,
    strong_dir: Path,
    out: Path,
    alpha: float = MAX_MISROUTE_RATE_ROUTED,
    delta: float = DEFAULT_DELTA,
    now: datetime | None = None,
) -> CascadeResult:
    """Certify the cascade local (`fast_dir`) → e5 (`strong_dir`) on both models'
    out-of-fold scores of the train and calibration rows, and write its policy to `out`.

    Without a certified pair the policy is still written, at the strictest thresholds and
    with no guarantee (as `train` does), so `check` and the drift monitor can read it.
    """
    from router.models.e5.model import E5RouteModel  # the [e5] extra, only when certifying

    rows = load_labelled(settings.routes_data)
    held = select_split(rows, "train") + select_split(rows, "calibration")
    ids = [r.id for r in held]
    stages, probabilities = [], []
    for backend, folder in zip(STAGE_BACKENDS, (fast_dir, strong_dir), strict=True):
        stage, probs = _stage(settings, backend, folder, ids)
        stages.append(stage)
        probabilities.append(probs)
    labels = np.asarray([r.label for r in held])
    fast, strong = (stage_rows(p, s.calibrator)
                    for p, s in zip(probabilities, stages, strict=True))
    certification = certify_cascade(labels, fast, strong, alpha=alpha, delta=delta,
                                    check_size=False)
    # Uncertified: the fast stage never answers, the strong one at the strictest threshold.
    t_fast = certification.t_fast if certification.t_fast is not None else NEVER_ROUTE
    t_strong = certification.t_strong if certification.t_strong is not None else 0.99
    stages = [stages[0].model_copy(update={"threshold": t_fast}),
              stages[1].model_copy(update={"threshold": t_strong})]
    guarantee = None
    if certification.certified and certification.upper_bound is not None:
        guarantee = Guarantee(alpha=alpha, delta=delta, n_certify=len(held),
                              misroutes=certification.misroutes,
                              upper_bound=certification.upper_bound,
                              method=f"{METHOD}; on the cross-fitted (out-of-fold) scores of "
                                     "both stages on the train and calibration rows")
    model = cascade_model([s.model for s in stages])
    created = now or datetime.now(UTC)
    policy = Policy(
        version=f"cascade-{model.artifact_sha[:8] if model.artifact_sha else 'x'}-"
                f"{created:%Y%m%d%H%M%S}",
        created_at=created,
        model=model,
        threshold=t_strong,
        guarantee=guarantee,
        stages=stages,
        data=PolicyData(labels_sha=data_sha(held), n_certify=len(held)),
        notes=(f"cascade local -> e5: the pair (t_fast, t_strong) routing the most clear "
               f"requests among those certified to keep misroutes among routed requests "
               f"<= {alpha:g} (delta {delta:g}); the fast stage answers "
               f"{certification.fast_share:.1%} of the certify rows"
               if certification.certified else
               "cascade local -> e5: no pair could be certified; strictest thresholds, "
               "no guarantee"),
    )
    answers = _answers(fast.choices, fast.confidences, t_fast, probabilities, stages)
    strong_model = E5RouteModel.load(strong_dir / MODEL_FILES["e5"])
    policy = with_reference(policy, answers, [r.text for r in held],
                            source=f"out-of-fold cascade decisions on {len(held)} train and "
                                   "calibration rows", e5=strong_model)
    save_policy(policy, out)
    return CascadeResult(out, policy, certification)


def _answers(fast_choices: np.ndarray, fast_confidences: np.ndarray, t_fast: float,
             probabilities: list[np.ndarray], stages: list[CascadeStage]) -> list[RouteScores]:
    """The answering stage's recalibrated scores of every row (what the gateway decides on)."""
    from router.routing.calibrators import apply_calibrator_array

    by_fast = (fast_choices != "unclear") & (fast_confidences >= t_fast)
    calibrated = [apply_calibrator_array(p, s.calibrator)
                  for p, s in zip(probabilities, stages, strict=True)]
    rows = np.where(by_fast[:, None], calibrated[0], calibrated[1])
    names = np.where(by_fast, stages[0].model.name, stages[1].model.name)
    return [RouteScores.from_probabilities(str(name), dict(zip(ROUTES, row.tolist(), strict=True)))
            for name, row in zip(names, rows, strict=True)]



def answer_timed(cascade: CascadeModel, texts: Sequence[str]
                 ) -> tuple[list[StageAnswer], list[float]]:
    """Each text's answering stage, one message at a time as the gateway asks, and the
    milliseconds each took (every stage it asked)."""
    answers, latencies = [], []
    for text in texts:
        started = time.perf_counter()
        answers.append(cascade.answer(text))
        latencies.append((time.perf_counter() - started) * 1000.0)
    return answers, latencies

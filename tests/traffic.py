"""Traffic for the drift tests: two halves of the test split, and a shifted sample.

The halves are split by a salted hash of the row id, so they are two independent samples
of the same traffic. The shifted sample (`tests/fixtures/shifted_traffic.jsonl`) was
written for these tests: terse one-liners, languages the shop does not serve, long
e-mails with signatures and quoted replies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from calibration.data import LabelledRow, id_fraction, load_labelled, select_split
from calibration.drift import with_reference
from router.app.training import TrainResult
from router.models.local.model import LocalRouteModel
from router.storage.policy_store import save_policy
from tests.paths import DATASETS, REPO_ROOT

SHIFTED = REPO_ROOT / "tests" / "fixtures" / "shifted_traffic.jsonl"


def split_halves() -> tuple[list[LabelledRow], list[LabelledRow]]:
    """(reference half, recent half) of the routing data's test split, each in the order
    of a hash of the id: the files group rows by language and style, so a prefix of the
    file order would be a biased sample, and any prefix of these is not."""
    rows = select_split(load_labelled(DATASETS / "routes"), "test")
    rows.sort(key=lambda r: id_fraction(r.id, salt="drift-order"))
    first = [r for r in rows if id_fraction(r.id, salt="drift-halves") < 0.5]
    second = [r for r in rows if id_fraction(r.id, salt="drift-halves") >= 0.5]
    return first, second


def shifted_texts() -> list[str]:
    with SHIFTED.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def model_folder_with_reference(trained: TrainResult, folder: Path, *,
                                version: str | None = None) -> Path:
    """`folder` with the session's model and its policy (renamed to `version`, if given)
    carrying a reference built from the model's decisions on the first half of the test
    split; returns the policy's path."""
    folder.mkdir()
    shutil.copy(trained.model_path, folder / trained.model_path.name)
    texts = [r.text for r in split_halves()[0]]
    scores = LocalRouteModel.load(trained.model_path).score_batch(texts)
    policy = (trained.policy if version is None
              else trained.policy.model_copy(update={"version": version}))
    path = folder / "policy.json"
    save_policy(with_reference(policy, scores, texts, source="test split, first half"), path)
    return path

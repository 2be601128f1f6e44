"""The experiment the shadow tests run: one live variant and one shadow."""

from __future__ import annotations

from pathlib import Path

from router.app.training import TrainResult
from router.contracts import ExperimentConfig, VariantConfig
from router.storage.policy_store import load_policy


def strict_shadow_experiment(trained: TrainResult, folder: Path,
                             name: str = "shadowed") -> ExperimentConfig:
    """Live: the served model and policy. Shadow `strict`: the same model under a copy of
    its policy at threshold 0.99 (version `strict`, written into `folder`), so the two
    decide differently on some messages."""
    strict = load_policy(trained.policy_path).model_copy(update={"version": "strict",
                                                                 "threshold": 0.99})
    strict_path = folder / "strict.json"
    strict_path.write_text(strict.model_dump_json())
    return ExperimentConfig(
        name=name, variants=[VariantConfig(name="live")],
        shadows=[VariantConfig(name="strict", model=str(trained.model_path),
                               policy=strict_path)])

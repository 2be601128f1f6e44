"""The repository's own files, for tests that read them or start a process in the checkout.

The code under test finds its shipped data through `router.packaged` and keeps its state
under the settings' data dir; these paths are only for the tests themselves.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS = REPO_ROOT / "datasets"

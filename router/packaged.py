"""The data that ships with the code: labelled routes, steering segments, the store fixture,
the FAQ, the task suites and the labelling guide.

Developers edit these files in the repository's `datasets/`. A wheel carries the same
files as the package `support_router_data` (setup.py maps `datasets/` onto it;
pyproject.toml lists the globs), found through `importlib.resources`. From a source
checkout — an editable install, or the sources on `PYTHONPATH` — the checkout's own
`datasets/` is read, so a worktree never reads another checkout's data through an
editable finder installed elsewhere.

Read-only: nothing is ever written here. State (models, the database, checkpoints) lives
under the settings' data dir (router/settings.py).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from router.errors import ArtifactError

DATA_PACKAGE = "support_router_data"


@lru_cache(maxsize=1)
def data_root() -> Path:
    """The folder that holds the shipped data (the checkout's `datasets/`, or the package)."""
    checkout = Path(__file__).resolve().parents[1]
    # pyproject.toml next to the packages means a source tree; an installed package sits
    # in site-packages, where an unrelated `datasets/` (Hugging Face's) may also live.
    source = checkout / "datasets"
    if (checkout / "pyproject.toml").is_file() and (source / "LABELLING.md").is_file():
        return source
    try:
        guide = resources.files(DATA_PACKAGE) / "LABELLING.md"
    except (ModuleNotFoundError, NotADirectoryError) as exc:
        # NotADirectoryError: Python 3.11's resources on a namespace package whose path
        # holds a non-folder entry (an editable finder's hook) — a broken install here.
        raise ArtifactError(
            f"the shipped data (package {DATA_PACKAGE!r}) is not installed as files; "
            "reinstall support-router, or point the settings at your own files") from exc
    if not isinstance(guide, Path) or not guide.is_file():
        raise ArtifactError(
            f"the shipped data (package {DATA_PACKAGE!r}) is not a folder on disk: {guide}")
    return guide.parent


def data_path(*parts: str) -> Path:
    """A file or folder of the shipped data, e.g. `data_path("routes")`."""
    return data_root().joinpath(*parts)

"""The built wheel, installed in a fresh virtualenv, serves from an empty folder.

The test builds the wheel from a copy of the sources (so no `build/` lands in the
checkout), installs it with `--no-deps` into a new virtualenv in a temporary folder,
then starts the installed `support-router serve` in an empty working directory, with
`SUPPORT_ROUTER_MODEL_DIR` at the session's trained model so it does not train. It
checks that the gateway answers, that `var/` appeared in the working directory, and that
not one file in the installed packages was added or changed.

Dependencies: installing numpy, numba, scikit-learn, FastAPI… into the new virtualenv
would need a package index and minutes. `--system-site-packages` does not help: it shows
the base interpreter's packages, not those of the virtualenv the tests run in. So after
the wheel is installed (and only then, so pip never sees another `support-router` there),
a `.pth` file in the new virtualenv lists the site-packages folders of the interpreter
running the tests. Those folders come after the new virtualenv's own, so `router` is
imported from the wheel; and a folder named in a `.pth` file only joins `sys.path`, its
own `.pth` files are not run, so an editable install of the checkout (a finder that maps
`router` to the sources) stays inactive there. Nothing is fetched from the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from router.app.training import TrainResult
from tests.messages import ANA, TEAPOT
from tests.paths import REPO_ROOT
from tests.servers import GatewayProcess

SETUPTOOLS_MIN = (70, 1)  # builds a wheel without the separate `wheel` package
START_TIMEOUT_S = 300  # loading the model and compiling its kernels, without numba's cache
PACKAGES = ("router", "handlers", "calibration", "support_router_data")
# Left out of the copy the wheel is built from: state and tooling at the top of the
# checkout (`models/` there is trained state; `router/models/` is code), caches anywhere.
NOT_SOURCES_AT_TOP = {".git", ".venv", "build", "dist", "models", "var", "tests", "bench"}
NOT_SOURCES = shutil.ignore_patterns("*.egg-info", "__pycache__", ".pytest_cache",
                                     ".ruff_cache")


def _not_sources(folder: str, names: list[str]) -> set[str]:
    top = NOT_SOURCES_AT_TOP if Path(folder) == REPO_ROOT else set()
    return top & set(names) | NOT_SOURCES(folder, names)


def _version(name: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in metadata.version(name).split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _skip_unless_buildable() -> None:
    setuptools = _version("setuptools")
    if setuptools is None or setuptools < SETUPTOOLS_MIN:
        wanted = ".".join(map(str, SETUPTOOLS_MIN))
        pytest.skip(f"building the wheel offline needs setuptools>={wanted} in this "
                    f"interpreter (found {setuptools}); install the [test] extra")
    pip = _version("pip")
    if pip is None or pip < (22, 3):
        pytest.skip(f"installing into another virtualenv needs pip>=22.3 (found {pip})")


def _run(*command: str | Path, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(part) for part in command], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _site_packages_of_this_interpreter() -> list[str]:
    return [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")
            and Path(p).is_dir()]


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`: size and modification time, by relative path."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A fresh virtualenv with the wheel installed: (its python, its site-packages)."""
    _skip_unless_buildable()
    base = tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO_ROOT, base / "src", ignore=_not_sources)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", base / "dist", base / "src")
    (wheel,) = (base / "dist").glob("support_router-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", base / "venv")
    python = base / "venv" / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
         "--no-index", "-q", wheel)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .strip())
    (site / "_support_router_test_deps.pth").write_text(
        "".join(f"{p}\n" for p in _site_packages_of_this_interpreter()), encoding="utf-8")
    yield python, site


def test_the_wheel_carries_the_shipped_data(installed: tuple[Path, Path]) -> None:
    _, site = installed
    data = site / "support_router_data"
    assert (data / "LABELLING.md").is_file()
    for folder, pattern in (("routes", "*.jsonl"), ("steering", "*.jsonl"),
                            ("faq", "faq.json"), ("faq", "questions.jsonl"),
                            ("store", "fixture.json"), ("tasks", "support16.jsonl")):
        assert list((data / folder).glob(pattern)), (folder, pattern)
    shipped = {p.name for p in (REPO_ROOT / "datasets" / "routes").glob("*.jsonl")}
    assert {p.name for p in (data / "routes").glob("*.jsonl")} == shipped
    assert not (site / "datasets").exists()  # a top-level `datasets` would clash


def test_the_installed_gateway_serves_from_an_empty_folder(
    installed: tuple[Path, Path], trained: TrainResult, tmp_path: Path
) -> None:
    python, site = installed
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SUPPORT_ROUTER_") and k not in ("PYTHONPATH",
                                                                 "PROMETHEUS_MULTIPROC_DIR")}
    env["SUPPORT_ROUTER_MODEL_DIR"] = str(trained.model_path.parent)
    where = _run(python, "-c", "import router, support_router_data as d; "
                 "print(router.__file__); print(list(d.__path__)[0])", cwd=work, env=env).split()
    assert [Path(p).is_relative_to(site) for p in where] == [True, True], where
    before = {name: _files(site / name) for name in PACKAGES}

    with GatewayProcess([str(python.with_name("support-router")), "serve"]) as server:
        server.start(env, [], tmp_path / "serve.log", cwd=work)
        server.wait_ready(START_TIMEOUT_S)
        response = httpx.post(f"{server.url}/v1/messages",
                              json={"text": TEAPOT, "kind": "refund", "customer": ANA}, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "resolved"
        assert httpx.get(f"{server.url}/docs", timeout=10).status_code == 200
        # The console's templates and stylesheet are package data (open mode: how to
        # make keys).
        console = httpx.get(f"{server.url}/console/sign-in", timeout=10)
        assert console.status_code == 200 and "keys new" in console.text, console.text
        assert httpx.get(f"{server.url}/console/static/console.css",
                         timeout=10).status_code == 200
        assert server.stop() == 0

    assert (work / "var" / "support-router.storage.db").is_file()
    assert list((work / "var" / "numba-cache").rglob("*.nbi"))  # compiled kernels' cache
    after = {name: _files(site / name) for name in PACKAGES}
    for name in PACKAGES:
        added = sorted(set(after[name]) - set(before[name]))
        changed = sorted(p for p in before[name] if after[name].get(p) != before[name][p])
        assert (added, changed) == ([], []), f"the gateway wrote into {site / name}"

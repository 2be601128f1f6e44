"""The one piece of packaging pyproject.toml cannot say: `datasets/` ships in the wheel.

Developers edit the labelled data, steering segments, store fixture, FAQ and task suites
in `datasets/`; an installed wheel carries them as the package `support_router_data`,
read through `importlib.resources` (router/packaged.py). Mapping a folder onto a package
of another name needs `package_dir`, and a package added that way must be listed next to
the discovered ones, which `[tool.setuptools.packages.find]` cannot do, so discovery is
here. Metadata, dependencies and the package-data globs stay in pyproject.toml.
"""

from setuptools import find_packages, setup

DATA_PACKAGE = "support_router_data"

setup(
    packages=[*find_packages(include=["router*", "calibration*", "handlers*"]), DATA_PACKAGE],
    package_dir={DATA_PACKAGE: "datasets"},
)

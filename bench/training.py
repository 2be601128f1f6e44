"""Benchmark training: `train_local` on the project's data, timed end to end.

    python bench/training.py [--repeat 3] [--backend local]

Each run trains into a fresh temporary folder, as `support-router serve` does on a fresh
clone. Prints the machine, the load average when the runs started (the cores may be
shared), the wall time and CPU time (this process and its worker processes) of every
run, their medians, and the artifact's sha256 (the same data must give the same
artifact, whatever the timing). Nothing is asserted. `--json PATH` also saves the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from router.app.training import train_local  # noqa: E402
from router.packaged import data_path  # noqa: E402


def _cpu_seconds() -> float:
    """User + system time of this process and of its reaped worker processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _stop_workers() -> None:
    """End joblib's reusable worker processes, so their CPU time is counted (and the next
    run starts them afresh, as a new `serve` process would)."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


def time_one_run(data: Path, steering: Path, backend: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cpu, start = _cpu_seconds(), time.perf_counter()
        result = train_local(
            data, Path(tmp), policy_path=Path(tmp) / "policy.json", steering_data=steering,
            backend=backend,
        )
        wall = time.perf_counter() - start
        _stop_workers()
        return {"wall_s": wall, "cpu_s": _cpu_seconds() - cpu, "sha256": result.artifact_sha,
                "threshold": result.policy.threshold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", default="local", choices=["local", "e5"])
    parser.add_argument("--data", type=Path, default=data_path("routes"))
    parser.add_argument("--steering", type=Path, default=data_path("steering"))
    parser.add_argument("--json", type=Path, default=None, help="also save the figures here")
    args = parser.parse_args()

    print(f"machine: {describe_machine()}")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    runs = []
    for i in range(args.repeat):
        run = time_one_run(args.data, args.steering, args.backend)
        runs.append(run)
        print(f"run {i + 1}: wall {run['wall_s']:.1f} s   cpu {run['cpu_s']:.1f} s   "
              f"sha256 {run['sha256'][:16]}…   threshold {run['threshold']:.2f}")
    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    shas = {r["sha256"] for r in runs}
    print(f"train_local ({args.backend}), median of {len(runs)}: wall {wall:.1f} s, "
          f"cpu {cpu:.1f} s; artifact {'identical' if len(shas) == 1 else 'DIFFERED'} "
          f"across runs")
    if args.json:
        args.json.write_text(json.dumps(
            {"machine": describe_machine(), "load_average": load, "backend": args.backend,
             "runs": runs, "median_wall_s": wall, "median_cpu_s": cpu}, indent=2))


if __name__ == "__main__":
    main()

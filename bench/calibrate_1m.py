"""Benchmark: `calibrate` on 1,000,000 synthetic predictions.

Run:  python bench/calibrate_1m.py [--n 1000000] [--recalibrate isotonic] [--files]

Prints wall time per stage, peak memory (peak RSS from getrusage, and the peak of
Python-tracked allocations from tracemalloc when --tracemalloc is given) and the machine.
Timings are printed, never asserted. With --files the predictions and labels are written
as JSONL first and the timed run starts from the files, as `support-router calibrate` does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import scipy
import sklearn
from scipy.special import softmax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from calibration.calibrate import CalibrateOptions, calibrate  # noqa: E402
from calibration.data import load_labelled  # noqa: E402
from calibration.predictions import join_labels, read_predictions  # noqa: E402
from router.contracts import ROUTES, PolicyModel  # noqa: E402


def synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An over-confident 4-route model: probabilities softmax(z), labels from softmax(z/1.5)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=5.0, size=(n, 4))
    logits[:, 3] -= 3.0
    truth = softmax(logits / 1.5, axis=1)
    y = (rng.uniform(size=(n, 1)) > np.cumsum(truth, axis=1)).sum(axis=1)
    ids = np.array([f"bench-{i}" for i in range(n)], dtype=object)
    return ids, np.asarray(ROUTES)[y], softmax(logits, axis=1)


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{describe_machine()} · load average {load} · numpy {np.__version__}, "
            f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def write_files(folder: Path, ids: np.ndarray, labels: np.ndarray, probs: np.ndarray
                ) -> tuple[Path, Path]:
    labels_path, pred_path = folder / "labels.jsonl", folder / "pred.jsonl"
    with labels_path.open("w") as lh, pred_path.open("w") as ph:
        for i, y, p in zip(ids, labels, probs, strict=True):
            lh.write(json.dumps({"id": i, "text": f"synthetic request {i}", "label": y}) + "\n")
            probabilities = dict(zip(ROUTES, p.tolist(), strict=True))
            ph.write(json.dumps({"id": i, "probabilities": probabilities,
                                 "model": "typesafe:bench@00000000",
                                 "question_sha": "0" * 64}) + "\n")
    return labels_path, pred_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--recalibrate", default="isotonic",
                        choices=["none", "temperature", "isotonic"])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--per-route", action="store_true")
    parser.add_argument("--files", action="store_true", help="start from JSONL files")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()

    ids, labels, probs = synthetic(args.n)
    model = PolicyModel(backend="typesafe", name="typesafe:bench@00000000", artifact_sha="0" * 64)
    options = CalibrateOptions(alpha=args.alpha, delta=args.delta, recalibrate=args.recalibrate,
                               per_route=args.per_route, n_boot=args.n_boot)
    stages: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.files:
            labels_path, pred_path = write_files(Path(tmp), ids, labels, probs)
            del ids, labels, probs
        baseline = peak_rss_mb()
        if args.tracemalloc:
            tracemalloc.start()
        started = time.perf_counter()
        if args.files:
            t = time.perf_counter()
            predictions = read_predictions(pred_path)
            rows, probs = join_labels(load_labelled(labels_path), predictions)
            ids = np.asarray([r.id for r in rows], dtype=object)
            labels = np.asarray([r.label for r in rows])
            stages["read files"] = time.perf_counter() - t
        t = time.perf_counter()
        result = calibrate(ids, labels, probs, model=model, options=options,
                           now=datetime.now(UTC))
        stages["split, fit, certify, measure"] = time.perf_counter() - t
        wall = time.perf_counter() - started
        traced = tracemalloc.get_traced_memory()[1] / 2**20 if args.tracemalloc else None

    policy = result.policy
    assert policy.guarantee is not None
    print(f"calibrate on {args.n:,} synthetic predictions "
          f"(--recalibrate {args.recalibrate}, alpha {args.alpha}, delta {args.delta}, "
          f"{args.n_boot} bootstrap resamples{', per route' if args.per_route else ''}"
          f"{', from JSONL files' if args.files else ', in memory'})")
    print(f"  parts: {result.parts.sizes()}")
    print(f"  threshold {policy.threshold:.2f}, misroutes {policy.guarantee.misroutes} of "
          f"{result.certifications and sum(c.routed for c in result.certifications.values())} "
          f"routed, upper bound {policy.guarantee.upper_bound:.4f}")
    for name, seconds in stages.items():
        print(f"  {name:<30} {seconds:8.2f} s")
    print(f"  wall time {wall:.2f} s")
    print(f"  peak RSS {peak_rss_mb():.0f} MB (before the run: {baseline:.0f} MB)"
          + (f"; tracemalloc peak {traced:.0f} MB" if traced is not None else ""))
    print(f"  machine: {machine()}")


if __name__ == "__main__":
    main()

"""Benchmark the embedded model: fast path vs the scikit-learn pipeline, in one run.

    python bench/local_model.py [--repeat 5]

Prints single-message p50/p99 (fast path and scikit-learn), their ratio, and batch
throughput. The fast path keeps no per-word cache, so a message of words it has never
seen costs what any other does. Batch throughput is measured in one process and over a
pool of worker processes (`--processes`, default 2). Figures are medians over repeats;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from calibration.data import load_labelled, select_split  # noqa: E402
from router.app.training import train_local  # noqa: E402
from router.models.local.model import (  # noqa: E402
    PARALLEL_MIN_BATCH,
    LocalRouteModel,
    prepare_text,
)
from router.models.local.train import TrainOptions, build_pipeline  # noqa: E402
from router.models.maths import label_indices  # noqa: E402
from router.packaged import data_path  # noqa: E402


def _per_call_ms(fn, items) -> np.ndarray:  # type: ignore[no-untyped-def]
    times = np.empty(len(items))
    for i, item in enumerate(items):
        start = time.perf_counter()
        fn(item)
        times[i] = time.perf_counter() - start
    return times * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", type=Path, default=None, help="an artifact (default: train one)")
    parser.add_argument("--processes", type=int, default=2, help="workers for the parallel batch")
    args = parser.parse_args()

    rows = load_labelled(data_path("routes"))
    held_out = [r.text for r in select_split(rows, "test")]
    # Kept until the end: the worker processes load the artifact from this file.
    tmp = tempfile.TemporaryDirectory()
    if args.model is None:
        result = train_local(
            data_path("routes"),
            Path(tmp.name),
            policy_path=Path(tmp.name) / "policy.json",
            steering_data=data_path("steering"),
        )
        model = LocalRouteModel.load(result.model_path)
    else:
        model = LocalRouteModel.load(args.model)
    train = select_split(rows, "train")
    pipeline = build_pipeline(TrainOptions())
    pipeline.fit([prepare_text(r.text) for r in train], label_indices([r.label for r in train]))

    fast_p50, fast_p99, sk_p50, ratio, batch_rate = [], [], [], [], []
    parallel_rate: list[float] = []
    batch = held_out * max(1, 20000 // len(held_out))
    start = time.perf_counter()
    model.score_batch(batch[:PARALLEL_MIN_BATCH], processes=args.processes)
    pool_start = time.perf_counter() - start
    for _ in range(args.repeat):
        fast = _per_call_ms(model.score, held_out)
        slow = _per_call_ms(lambda t: pipeline.predict_proba([prepare_text(t)]), held_out)
        fast_p50.append(np.percentile(fast, 50))
        fast_p99.append(np.percentile(fast, 99))
        sk_p50.append(np.percentile(slow, 50))
        ratio.append(np.percentile(slow, 50) / np.percentile(fast, 50))
        start = time.perf_counter()
        model.score_batch(batch)
        batch_rate.append(len(batch) / (time.perf_counter() - start))
        start = time.perf_counter()
        model.score_batch(batch, processes=args.processes)
        parallel_rate.append(len(batch) / (time.perf_counter() - start))

    median = statistics.median
    print(f"machine: {describe_machine()}")
    print(
        f"messages: {len(held_out)} held-out texts "
        f"(mean {np.mean([len(t) for t in held_out]):.0f} chars), "
        f"{args.repeat} repeats, medians reported"
    )
    print(
        f"fast path single message:   p50 {median(fast_p50):.3f} ms   p99 {median(fast_p99):.3f} ms"
    )
    print(f"scikit-learn pipeline:      p50 {median(sk_p50):.3f} ms")
    print(f"pipeline / fast path (p50): {median(ratio):.1f}x")
    print(f"batched ({len(batch)} messages), one process: {median(batch_rate):,.0f} messages/s")
    print(
        f"batched ({len(batch)} messages), {args.processes} worker processes: "
        f"{median(parallel_rate):,.0f} messages/s "
        f"(pool start-up, paid once: {pool_start:.1f} s)"
    )

    tmp.cleanup()


if __name__ == "__main__":
    main()

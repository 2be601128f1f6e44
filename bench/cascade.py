"""Benchmark the cascade (local, then e5) next to the local model alone, in one run.

    python bench/cascade.py --models models/ [--n 400] [--seed 0]

Needs a model folder holding both models and the cascade's policy (`support-router train`,
`train --backend e5`, `certify-cascade`). Scores the same test-split messages one at a
time, as the gateway does: the local model alone, then the cascade under its policy
(the e5 stage only for what the local stage defers). Prints p50/p99 per message of
each, and the share of messages each cascade stage answered with their p50/p99.
Figures are printed, never asserted; on a shared machine they move with its load.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from calibration.data import load_labelled, select_split  # noqa: E402
from calibration.evaluation import stage_summary  # noqa: E402
from router.app.cascade import answer_timed  # noqa: E402
from router.models.e5.model import E5RouteModel  # noqa: E402
from router.models.local.model import LocalRouteModel  # noqa: E402
from router.packaged import data_path  # noqa: E402
from router.routing.cascade import CascadeModel  # noqa: E402
from router.storage.policy_store import load_policy  # noqa: E402


def _per_message_ms(model: LocalRouteModel, texts: list[str]) -> np.ndarray:
    times = np.empty(len(texts))
    for i, text in enumerate(texts):
        start = time.perf_counter()
        model.score(text)
        times[i] = time.perf_counter() - start
    return times * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=Path, default=Path("models"),
                        help="folder with both models and policy-cascade.json")
    parser.add_argument("--policy", type=Path, default=None,
                        help="the cascade policy (default: <models>/policy-cascade.json)")
    parser.add_argument("--n", type=int, default=400, help="test-split messages to score")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows = select_split(load_labelled(data_path("routes")), "test")
    texts = [r.text for r in random.Random(args.seed).sample(rows, min(args.n, len(rows)))]
    policy = load_policy(args.policy or args.models / "policy-cascade.json")
    local = LocalRouteModel.load(args.models / "local-route-model.json")
    strong = E5RouteModel.load(args.models / "e5-route-model.json")
    cascade = CascadeModel([local, strong], policy.stages or [])
    # Warm both (compiled kernels, the embedding engine's thread) before timing.
    for text in texts[:20]:
        cascade.answer(text)
        strong.score(text)

    local_ms = _per_message_ms(local, texts)
    answers, cascade_ms = answer_timed(cascade, texts)
    summary = stage_summary([a.scores.model for a in answers], cascade_ms)

    print(describe_machine())
    print(f"{len(texts)} test-split messages, one at a time; cascade policy {policy.version} "
          f"(thresholds {[s.threshold for s in policy.stages or []]})")
    print(f"{'router':<34} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    print(f"{'local alone':<34} {np.percentile(local_ms, 50):8.3f} "
          f"{np.percentile(local_ms, 99):8.3f} {local_ms.mean():8.3f}")
    total = summary["latency_ms"]
    print(f"{'cascade local -> e5':<34} {total['p50']:8.3f} {total['p99']:8.3f} "
          f"{total['mean']:8.3f}")
    stage_of = {s.model.name: i + 1 for i, s in enumerate(policy.stages or [])}
    for name, stage in summary["stages"].items():
        figures = stage["latency_ms"]
        label = f"  answered by stage {stage_of[name]} ({stage['share']:.1%})"
        print(f"{label:<34} {figures['p50']:8.3f} {figures['p99']:8.3f} "
              f"{figures['mean']:8.3f}  {name}")


if __name__ == "__main__":
    main()

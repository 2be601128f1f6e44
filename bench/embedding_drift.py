"""What the embedding drift features cost per e5-scored message, beside the embedding.

    python bench/embedding_drift.py [--n 300] [--repeats 5]

Embeds `--n` synthetic support messages (`bench/e5_embed.py`'s) once, builds an
embedding summary from them, then times per message: the e5 embedding of one message,
carrying its vector on the scores (`RouteScores.from_probability_rows` with and without
embeddings), and the projection `decide` adds (`project`, a k x dim product). Prints
medians of `--repeats` runs and machine info; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.e5_embed import make_messages  # noqa: E402
from bench.machine import describe_machine  # noqa: E402
from router.contracts import RouteScores  # noqa: E402
from router.models.e5.embeddings import E5Embedder  # noqa: E402
from router.routing.embedding_drift import project, summarise_embeddings  # noqa: E402


def _per_call_us(run: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over `repeats` of the mean time of one call, in microseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(describe_machine())
    embedder = E5Embedder(threads=1)
    texts = make_messages(args.n)
    vectors = embedder.embed(texts)
    summary = summarise_embeddings(vectors, embedder=embedder.identity.name)
    k, dim = len(summary.directions), len(summary.directions[0])
    one = vectors[:1]
    probabilities = np.full((1, 4), 0.25)
    embedding = tuple(one[0].tolist())

    embed_us = _per_call_us(lambda: embedder.embed([texts[0]]), 20, args.repeats)
    plain_us = _per_call_us(lambda: RouteScores.from_probability_rows("m", probabilities),
                            2000, args.repeats)
    carried_us = _per_call_us(
        lambda: RouteScores.from_probability_rows("m", probabilities, one), 2000, args.repeats)
    project_us = _per_call_us(lambda: project(summary, embedding), 2000, args.repeats)
    print(f"summary: k={k} directions of width {dim}, from {args.n} messages")
    print(f"e5 embedding of one message:          {embed_us:10.1f} us")
    print(f"scores without / with the embedding:  {plain_us:10.1f} / {carried_us:.1f} us")
    print(f"projection (decide):                  {project_us:10.1f} us")
    extra = carried_us - plain_us + project_us
    print(f"added per e5-scored message:          {extra:10.1f} us "
          f"({extra / embed_us:.2%} of the embedding)")


if __name__ == "__main__":
    main()

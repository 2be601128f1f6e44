"""Worker processes for scoring large batches in parallel, one pool per size per process.

The pools are spawned, not forked (a forked numba or thread state is not safe), live as
long as the process, and are shared by every model of the process: each worker loads
the artifacts it is asked for once (`router.models.local.model.LocalRouteModel.load`
caches them) and refuses a file that changed since the batch started.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def scoring_pool(processes: int) -> ProcessPoolExecutor:
    """The process's pool of `processes` spawned workers, started on first use."""
    with _pools_lock:
        pool = _pools.get(processes)
        if pool is None:
            context = multiprocessing.get_context("spawn")
            pool = _pools[processes] = ProcessPoolExecutor(processes, mp_context=context)
        return pool


def map_chunks(
    score_chunk: Callable[[list[str]], np.ndarray],
    texts: Sequence[str],
    processes: int,
) -> np.ndarray:
    """`score_chunk` of `processes` consecutive chunks of `texts` in the pool, stacked in
    order. `score_chunk` must pickle (a `functools.partial` of a module-level function)."""
    bounds = np.linspace(0, len(texts), processes + 1).astype(int)
    pool = scoring_pool(processes)
    futures = [
        pool.submit(score_chunk, list(texts[start:end]))
        for start, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return np.vstack([future.result() for future in futures])

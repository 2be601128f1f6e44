"""Batch work with the cyclic garbage collector paused.

Scoring a batch makes many short-lived objects (segments, clauses, match objects, score
models). Each is freed by its reference count the moment it is dropped, or kept for the
caller; none is garbage held in a cycle. Yet allocating them keeps triggering collections
that walk the whole heap, and in a process that holds many long-lived objects (a loaded
model, a fitted pipeline, every labelled row) those walks cost more than building the
scores themselves, for nothing: a collection in the middle of a batch frees nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside the block; the collector's previous state after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

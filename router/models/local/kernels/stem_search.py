"""Whether a text holds any of a fixed list of stems (literal substrings), compiled with numba.

The instruction filter asks this of every message before it tries its costly steering
patterns, and most messages hold no stem. As one regular expression (the stems factored
into a prefix tree) `re` would try every branch of the tree's first level at every
position. Here the stems are a trie whose edges are an exact integer hash table, and a
compiled loop walks it from each position of the folded text.

The text is folded first, as the filter always has: lowercased by Python, the combining
dot above (U+0307, what `str.lower` leaves of the Turkish "İ") dropped, and every run of
whitespace made one space, with none at either end (`" ".join(text.split())`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from router.models.local.kernels.ngram_table import WHITESPACE, _build_table, _lookup

_DOT_ABOVE = 0x307
_POINTS = 0x110000  # code points per trie node in an edge key
_NONE = -1


class StemSearch:
    """`found_in(text)`: does the folded text contain one of `stems`?"""

    def __init__(self, stems: Sequence[str]) -> None:
        if not stems or not all(stems):
            raise ValueError("stems must be non-empty strings")
        edges: dict[tuple[int, int], int] = {}  # (node, code point) → child node
        ends = [False]  # node 0 is the root
        for stem in stems:
            node = 0
            for char in stem:
                node = edges.setdefault((node, ord(char)), len(ends))
                if node == len(ends):
                    ends.append(False)
            ends[node] = True
        # Keys are ≥ 1: the table keeps 0 for an empty slot.
        keys = np.array([node * _POINTS + point + 1 for node, point in edges], dtype=np.int64)
        self._slot_bits = max(4, (2 * len(keys)).bit_length())
        self._keys, indices = _build_table(keys, self._slot_bits)
        children = np.array([*edges.values(), _NONE], dtype=np.int64)
        self._children = children[indices]  # `_build_table` gives -1 in empty slots
        self._ends = np.array(ends, dtype=np.bool_)
        self._is_space = np.zeros(WHITESPACE[-1] + 1, dtype=np.bool_)
        self._is_space[WHITESPACE] = True
        self.found_in("warm up")  # compile (or load) the kernel now, not on a request

    def found_in(self, text: str) -> bool:
        points = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), np.uint32)
        return _found(
            points, self._is_space, self._keys, self._children, self._ends, self._slot_bits
        )


@njit(cache=True, nogil=True)
def _found(
    points: np.ndarray,
    is_space: np.ndarray,
    keys: np.ndarray,
    children: np.ndarray,
    ends: np.ndarray,
    slot_bits: int,
) -> bool:
    folded = np.empty(len(points), dtype=np.int64)
    size = 0
    space_pending = False
    for point in points:
        if point == _DOT_ABOVE:
            continue
        if point < len(is_space) and is_space[point]:
            space_pending = size > 0
            continue
        if space_pending:
            folded[size] = 32
            size += 1
            space_pending = False
        folded[size] = point
        size += 1
    for start in range(size):
        node = 0
        for position in range(start, size):
            key = node * _POINTS + folded[position] + 1
            node = _lookup(key, keys, children, slot_bits)
            if node == _NONE:
                break
            if ends[node]:
                return True
    return False

"""The arithmetic of TF-IDF logits, compiled with numba.

For one message and its clauses the numbers are small (a few hundred n-gram occurrences),
and done with numpy they take some twenty array calls per scored set of texts, twice per
message (the steering detector, then the route model): the time goes to per-call
overhead, not arithmetic. Compiled, the same arithmetic is one call.
The work itself is what scikit-learn's pipeline does: count each column in a text,
sublinear tf times idf, l2-normalise each block of each text, multiply by the weights.

Occurrences are counted in a small open-addressing table sized to the longest piece, not
by sorting each piece: a sort would dominate the kernel's time, and the table needs no
state between calls, so threads may score at once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64: Fibonacci hashing
_EMPTY = -1  # no column is negative


@njit(cache=True, nogil=True)
def tfidf_logits(
    columns: np.ndarray,
    lengths: np.ndarray,
    n_texts: int,
    block_offsets: np.ndarray,
    table: np.ndarray,
) -> np.ndarray:
    """`features @ weights` of `n_texts` texts, shape (n_texts, table.shape[1] - 1).

    `columns` holds block-local vocabulary columns of every n-gram occurrence (repeats
    kept) in pieces, block-major (piece = block * n_texts + text), `lengths` how many
    belong to each piece; `block_offsets[b]` is block b's first row in `table`, whose
    row c is column c's idf and then its weights. Each piece is one block of one text,
    normalised on its own.
    """
    n_outputs = table.shape[1] - 1
    out = np.zeros((n_texts, n_outputs))
    slot_bits = 4
    while len(lengths) and (1 << slot_bits) < 2 * lengths.max():  # at most half full
        slot_bits += 1
    mask = (1 << slot_bits) - 1
    slot_rows = np.full(mask + 1, _EMPTY, dtype=np.int64)
    slot_counts = np.zeros(mask + 1, dtype=np.int64)
    used = np.empty(mask + 1, dtype=np.int64)  # the slots this piece filled, in order
    piece_logits = np.empty(n_outputs)
    start = 0
    for piece in range(len(lengths)):
        end = start + lengths[piece]
        if end > start:
            offset = block_offsets[piece // n_texts]
            found = 0
            for i in range(start, end):
                row = columns[i] + offset
                slot = ((row * _GOLDEN) >> (64 - slot_bits)) & mask
                while slot_rows[slot] != _EMPTY and slot_rows[slot] != row:
                    slot = (slot + 1) & mask
                if slot_rows[slot] == _EMPTY:
                    slot_rows[slot] = row
                    used[found] = slot
                    found += 1
                slot_counts[slot] += 1
            squares = 0.0
            piece_logits[:] = 0.0
            for k in range(found):
                slot = used[k]
                row = slot_rows[slot]
                value = (1.0 + math.log(slot_counts[slot])) * table[row, 0]
                slot_rows[slot] = _EMPTY  # leave the table empty for the next piece
                slot_counts[slot] = 0
                squares += value * value
                for output in range(n_outputs):
                    piece_logits[output] += value * table[row, output + 1]
            norm = math.sqrt(squares)
            text = piece % n_texts
            for output in range(n_outputs):
                out[text, output] += piece_logits[output] / norm
        start = end
    return out

"""char_wb n-gram columns of whole texts, compiled with numba.

Cutting a word into n-grams and looking each up in a Python dict is slow enough that it
would have to be cached per word, and then new traffic (mostly new words to a worker)
would pay full price. Here the vocabulary is an open-addressing hash table of exact
integer keys, and a compiled loop walks the texts, cuts their words into n-grams and looks
them up: a word costs the same, seen before or not, so nothing is cached.

Keys are exact, not hashes. Every character of the vocabulary gets an id 1…A and every
other character the id A + 1; an n-gram is its ids written in base 2^bits, most
significant first. A key's leading digit is never 0, so n-grams of different lengths
never share a key, and no term holds the digit A + 1, so an n-gram with a character no
term has is never found, exactly as in the dict. That needs bits × max_n ≤ 63; a block
whose vocabulary is too large for it (`CharNgramTable.usable`) is scored by the dict.

Words are what `str.split()` separates: every whitespace character maps to the space's
id, and each word is padded with one space on either side, as scikit-learn's char_wb
analyzer does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from itertools import accumulate

import numpy as np
from numba import njit

_KEY_BITS = 63  # keys are int64 and must stay positive
WHITESPACE = [point for point in range(0x3001) if chr(point).isspace()]  # none above U+3000
assert not any(chr(point).isspace() for point in range(0x3001, sys.maxunicode + 1))
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64: Fibonacci hashing


def _alphabet(terms: Sequence[str]) -> list[str]:
    return sorted(set("".join(terms)) | {" "})


class CharNgramTable:
    """A char_wb block's vocabulary (term → column) as a compiled hash table."""

    def __init__(self, terms: Sequence[str], ngram_range: tuple[int, int]) -> None:
        if not self.usable(terms, ngram_range):
            raise ValueError(f"n-gram keys are not exact for {ngram_range} and this vocabulary")
        self.min_n, self.max_n = ngram_range
        alphabet = _alphabet(terms)
        unknown = len(alphabet) + 1
        self.bits = unknown.bit_length()
        # Indexed by code point, clipped: the last entry answers every larger code point.
        size = max(*map(ord, alphabet), WHITESPACE[-1]) + 2
        self._ids = np.full(size, unknown, dtype=np.int64)
        self._ids[[ord(c) for c in alphabet]] = np.arange(1, len(alphabet) + 1)
        self._space = int(self._ids[ord(" ")])
        self._ids[WHITESPACE] = self._space
        points, bounds = code_points(terms)
        keys = _term_keys(points, bounds, self._ids, self.bits)
        self._slot_bits = max(4, (2 * len(keys)).bit_length())  # at most half full
        self._table_keys, self._table_columns = _build_table(keys, self._slot_bits)

    @staticmethod
    def usable(terms: Sequence[str], ngram_range: tuple[int, int]) -> bool:
        """Whether keys are exact for this block.

        A padded word is at least 3 characters, so with `min_n` ≤ 3 scikit-learn's
        short-word rule (a padded word shorter than `min_n` counts once, whole) never
        applies and a word's n-grams are exactly its substrings of `min_n`…`max_n`
        characters. The keys must also fit in 63 bits.
        """
        min_n, max_n = ngram_range
        unknown = len(_alphabet(terms)) + 1
        return 1 <= min_n <= 3 and unknown.bit_length() * max_n <= _KEY_BITS

    def columns(self, points: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns of every vocabulary n-gram occurrence in each text (`code_points` of
        preprocessed texts), text after text with repeats kept, and how many belong to each
        text."""
        return _text_columns(
            points,
            bounds,
            self._ids,
            self._space,
            self.min_n,
            self.max_n,
            self.bits,
            self._table_keys,
            self._table_columns,
            self._slot_bits,
        )


def code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """All texts' code points back to back, and where each text starts (plus the end).

    Lone surrogates (a CLI argument of undecodable bytes, an escaped `\\ud800` in a JSONL
    file) are code points like any other, as they are to scikit-learn.
    """
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    bounds = np.fromiter(accumulate(map(len, texts), initial=0), np.int64, len(texts) + 1)
    return np.frombuffer(joined, dtype=np.uint32), bounds


@njit(cache=True, nogil=True)
def _slot(key: int, slot_bits: int) -> int:
    return ((key * _GOLDEN) >> (64 - slot_bits)) & ((1 << slot_bits) - 1)


@njit(cache=True, nogil=True)
def _lookup(key: int, table_keys: np.ndarray, table_columns: np.ndarray, slot_bits: int) -> int:
    mask = (1 << slot_bits) - 1
    slot = _slot(key, slot_bits)
    while table_keys[slot] != 0:
        if table_keys[slot] == key:
            return table_columns[slot]
        slot = (slot + 1) & mask
    return -1


@njit(cache=True)
def _build_table(keys: np.ndarray, slot_bits: int) -> tuple[np.ndarray, np.ndarray]:

    size = 1 << slot_bits
    table_keys = np.zeros(size, dtype=np.int64)  # 0: empty (no key is 0)
    table_columns = np.full(size, -1, dtype=np.int64)
    for column in range(len(keys)):
        slot = _slot(keys[column], slot_bits)
        while table_keys[slot] != 0:
            slot = (slot + 1) & (size - 1)
        table_keys[slot] = keys[column]
        table_columns[slot] = column
    return table_keys, table_columns


@njit(cache=True, nogil=True)
def _term_keys(points: np.ndarray, bounds: np.ndarray, ids: np.ndarray, bits: int) -> np.ndarray:
    keys = np.zeros(len(bounds) - 1, dtype=np.int64)
    last = len(ids) - 1
    for term in range(len(keys)):
        for position in range(bounds[term], bounds[term + 1]):
            keys[term] = (keys[term] << bits) | ids[min(points[position], last)]
    return keys


@njit(cache=True, nogil=True)
def _text_columns(
    points: np.ndarray,
    bounds: np.ndarray,
    ids: np.ndarray,
    space: int,
    min_n: int,
    max_n: int,
    bits: int,
    table_keys: np.ndarray,
    table_columns: np.ndarray,
    slot_bits: int,
) -> tuple[np.ndarray, np.ndarray]:
    last = len(ids) - 1
    mapped = np.empty(len(points), dtype=np.int64)
    for position in range(len(points)):
        mapped[position] = ids[min(points[position], last)]
    # A word of m characters, padded to m + 2, has at most (m + 2) * (max_n - min_n + 1)
    # n-grams, and m + 2 ≤ 3m.
    out = np.empty(3 * len(points) * (max_n - min_n + 1), dtype=np.int64)
    lengths = np.zeros(len(bounds) - 1, dtype=np.int64)
    found = 0
    for text in range(len(bounds) - 1):
        before = found
        position, end = bounds[text], bounds[text + 1]
        while position < end:
            if mapped[position] == space:
                position += 1
                continue
            word = position  # the word is mapped[word:position], padded by a space each side
            while position < end and mapped[position] != space:
                position += 1
            padded = position - word + 2
            for start in range(padded):
                key = 0
                for n in range(1, min(max_n, padded - start) + 1):
                    at = start + n - 1
                    digit = space if at == 0 or at == padded - 1 else mapped[word + at - 1]
                    key = (key << bits) | digit
                    if n >= min_n:
                        column = _lookup(key, table_keys, table_columns, slot_bits)
                        if column >= 0:
                            out[found] = column
                            found += 1
        lengths[text] = found - before
    return out[:found], lengths

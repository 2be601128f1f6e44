"""Word 1–2-gram columns of whole texts, compiled with numba.

The word block is scikit-learn's default analyzer: tokens are the matches of
`(?u)\\b\\w\\w+\\b` (runs of two or more word characters), then every token and every pair of
neighbouring tokens joined by a space. Done in Python (a regex, a list of joined pairs, a
dict lookup per n-gram) it was about a fifth of a message's scoring time.

Here a compiled loop finds the runs of word characters itself, from a table saying which
code points `re` counts as `\\w`, and looks each token up in an open-addressing table of
the vocabulary's tokens. Tokens are checked code point by code point, so a hash collision
never finds a wrong column. A bigram is then an exact integer key, (first token's id ×
number of tokens + second token's id), looked up in a second table; a pair with a token
the vocabulary does not know is not a term, exactly as in the dict.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numba import njit

from router.models.local.kernels.ngram_table import _build_table, _lookup, code_points

_EMPTY = -1


@lru_cache(maxsize=1)
def word_characters() -> np.ndarray:
    """`is_word[code point]`: what `re`'s `\\w` matches in a str pattern, read off `re`
    itself over every code point (one pass over a 1.1-million-character string)."""
    is_word = np.zeros(sys.maxunicode + 1, dtype=np.bool_)
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    for run in re.finditer(r"\w+", every):
        is_word[run.start() : run.end()] = True
    return is_word


class WordNgramTable:
    """A word (1, 2)-gram block's vocabulary (term → column) as compiled hash tables."""

    def __init__(self, terms: Sequence[str]) -> None:
        tokens: dict[str, int] = {}
        unigrams: list[tuple[int, int]] = []
        bigrams: list[tuple[int, int, int]] = []
        for column, term in enumerate(terms):
            parts = term.split(" ")
            ids = [tokens.setdefault(part, len(tokens)) for part in parts]
            if len(ids) == 1:
                unigrams.append((ids[0], column))
            elif len(ids) == 2:
                bigrams.append((ids[0], ids[1], column))
            else:
                raise ValueError(f"not a word 1–2-gram: {term!r}")
        self._n_tokens = len(tokens)
        points, bounds = code_points(list(tokens))
        self._token_points, self._token_bounds = points, bounds
        hashes = _token_hashes(self._token_points, bounds)
        self._token_slot_bits = max(4, (2 * len(tokens)).bit_length())
        self._token_slots = _token_table(hashes, self._token_slot_bits)
        self._token_hashes = hashes
        self._unigram_columns = np.full(len(tokens), _EMPTY, dtype=np.int64)
        for token, column in unigrams:
            self._unigram_columns[token] = column
        # Bigram keys are ≥ 1 (the exact-key table keeps 0 for empty slots).
        keys = np.array([a * len(tokens) + b + 1 for a, b, _ in bigrams], dtype=np.int64)
        self._bigram_slot_bits = max(4, (2 * len(keys)).bit_length())
        self._bigram_keys, indices = _build_table(keys, self._bigram_slot_bits)
        # `_build_table` stores each key's index (-1 in empty slots): map it to the
        # bigram's column, and -1 to the appended -1.
        columns = np.array([column for _, _, column in bigrams] + [_EMPTY], dtype=np.int64)
        self._bigram_columns = columns[indices]
        self._is_word = word_characters()

    @staticmethod
    def usable(ngram_range: tuple[int, int]) -> bool:
        return ngram_range in ((1, 1), (1, 2))

    def columns(self, points: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns of every vocabulary word n-gram occurrence in each text (`code_points` of
        preprocessed texts), text after text with repeats kept, and how many belong to each
        text."""
        return _text_columns(
            points,
            bounds,
            self._is_word,
            self._token_points,
            self._token_bounds,
            self._token_hashes,
            self._token_slots,
            self._token_slot_bits,
            self._unigram_columns,
            self._n_tokens,
            self._bigram_keys,
            self._bigram_columns,
            self._bigram_slot_bits,
        )


@njit(cache=True, nogil=True)
def _hash(points: np.ndarray, start: int, end: int) -> int:
    """FNV-1a over code points (int64 arithmetic wraps), never 0."""
    value = -3750763034362895579  # FNV offset basis as int64
    for position in range(start, end):
        value = (value ^ points[position]) * 1099511628211
    return value if value != 0 else 1


@njit(cache=True, nogil=True)
def _token_hashes(points: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    hashes = np.empty(len(bounds) - 1, dtype=np.int64)
    for token in range(len(hashes)):
        hashes[token] = _hash(points, bounds[token], bounds[token + 1])
    return hashes


@njit(cache=True)
def _token_table(hashes: np.ndarray, slot_bits: int) -> np.ndarray:
    mask = (1 << slot_bits) - 1
    slots = np.full(mask + 1, _EMPTY, dtype=np.int64)
    for token in range(len(hashes)):
        slot = (hashes[token] >> (64 - slot_bits)) & mask
        while slots[slot] != _EMPTY:
            slot = (slot + 1) & mask
        slots[slot] = token
    return slots


@njit(cache=True, nogil=True)
def _find_token(
    points: np.ndarray,
    start: int,
    end: int,
    token_points: np.ndarray,
    token_bounds: np.ndarray,
    token_hashes: np.ndarray,
    token_slots: np.ndarray,
    slot_bits: int,
) -> int:
    """The vocabulary id of the token `points[start:end]`, or -1."""
    value = _hash(points, start, end)
    mask = (1 << slot_bits) - 1
    slot = (value >> (64 - slot_bits)) & mask
    while token_slots[slot] != _EMPTY:
        token = token_slots[slot]
        if token_hashes[token] == value:
            first, last = token_bounds[token], token_bounds[token + 1]
            if last - first == end - start:
                same = True
                for k in range(end - start):
                    if token_points[first + k] != points[start + k]:
                        same = False
                        break
                if same:
                    return token
        slot = (slot + 1) & mask
    return _EMPTY


@njit(cache=True, nogil=True)
def _text_columns(
    points: np.ndarray,
    bounds: np.ndarray,
    is_word: np.ndarray,
    token_points: np.ndarray,
    token_bounds: np.ndarray,
    token_hashes: np.ndarray,
    token_slots: np.ndarray,
    token_slot_bits: int,
    unigram_columns: np.ndarray,
    n_tokens: int,
    bigram_keys: np.ndarray,
    bigram_columns: np.ndarray,
    bigram_slot_bits: int,
) -> tuple[np.ndarray, np.ndarray]:
    # A token is at least two characters and each adds at most a unigram and a bigram.
    out = np.empty(len(points) + 1, dtype=np.int64)
    lengths = np.zeros(len(bounds) - 1, dtype=np.int64)
    found = 0
    for text in range(len(bounds) - 1):
        before = found
        previous = _EMPTY  # the text's previous token: none yet, or one the vocabulary lacks
        position, end = bounds[text], bounds[text + 1]
        while position < end:
            if not is_word[points[position]]:
                position += 1
                continue
            start = position
            while position < end and is_word[points[position]]:
                position += 1
            if position - start < 2:
                continue
            token = _find_token(
                points, start, position, token_points, token_bounds, token_hashes,
                token_slots, token_slot_bits,
            )
            if token != _EMPTY and unigram_columns[token] != _EMPTY:
                out[found] = unigram_columns[token]
                found += 1
            if token != _EMPTY and previous >= 0:
                key = previous * n_tokens + token + 1
                column = _lookup(key, bigram_keys, bigram_columns, bigram_slot_bits)
                if column != _EMPTY:
                    out[found] = column
                    found += 1
            previous = token
        lengths[text] = found - before
    return out[:found], lengths

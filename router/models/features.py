"""TF-IDF features computed straight from a fitted vocabulary, without scikit-learn.

These functions reproduce exactly what the two `TfidfVectorizer`s of the training
pipeline do (lowercase, unicode accent stripping, word 1–2-grams with the default token
pattern, char_wb 2–5-grams, sublinear tf, idf, l2 norm per block), so a single message is
scored in microseconds instead of paying scikit-learn's per-call overhead. The test suite
proves the two agree to 1e-9.

char_wb n-grams never cross a word boundary, so each distinct word's columns are looked
up once and cached: most of a message's words have been seen before.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from scipy.sparse import csr_matrix

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
WORD_CACHE_SIZE = 200_000
_COLUMN_BYTES = 8  # columns are packed as int64
FEW_TEXTS = 32  # up to this many texts, `TfidfSpace.logits_few` beats the sparse products


def preprocess(text: str) -> str:
    """Lowercase, then scikit-learn's `strip_accents_unicode` (NFKD, combining marks dropped).

    Same result as `strip_accents_unicode(text.lower())`, with the per-character Python
    loop replaced by one `str.translate`.
    """
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    return unicodedata.normalize("NFKD", lowered).translate(_combining_marks())


@lru_cache(maxsize=1)
def _combining_marks() -> dict[int, None]:
    """Every code point `unicodedata.combining` flags, mapped to deletion (built once)."""
    return {
        point: None for point in range(sys.maxunicode + 1) if unicodedata.combining(chr(point))
    }


def word_ngrams(text: str, ngram_range: tuple[int, int] = (1, 2)) -> list[str]:
    tokens = _TOKEN.findall(text)
    if ngram_range == (1, 2):
        return tokens + list(map(" ".join, zip(tokens, tokens[1:], strict=False)))
    min_n, max_n = ngram_range
    grams = list(tokens) if min_n == 1 else []
    for n in range(max(min_n, 2), min(max_n, len(tokens)) + 1):
        grams.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return grams


def word_char_ngrams(word: str, ngram_range: tuple[int, int] = (2, 5)) -> list[str]:
    """char_wb n-grams of one whitespace-free word, padded with a space on each side."""
    min_n, max_n = ngram_range
    padded = f" {word} "
    length = len(padded)
    grams: list[str] = []
    for n in range(min_n, max_n + 1):
        if length <= n:  # a short word counts once, as scikit-learn does
            grams.append(padded)
            break
        grams.extend(padded[offset : offset + n] for offset in range(length - n + 1))
    return grams


class TfidfBlock:
    """One fitted vectorizer: vocabulary (term → column), idf, and how to cut n-grams."""

    def __init__(
        self, analyzer: str, ngram_range: tuple[int, int], terms: Sequence[str], idf: np.ndarray
    ) -> None:
        if analyzer not in ("word", "char_wb"):
            raise ValueError(f"unsupported analyzer {analyzer!r}")
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.vocabulary = {term: column for column, term in enumerate(terms)}
        self.idf = idf
        self.n_features = len(terms)
        self._word_columns = lru_cache(maxsize=WORD_CACHE_SIZE)(self._uncached_word_columns)

    def _uncached_word_columns(self, word: str) -> bytes:
        vocabulary = self.vocabulary
        grams = word_char_ngrams(word, self.ngram_range)
        return _pack([vocabulary[g] for g in grams if g in vocabulary])

    def clear_word_cache(self) -> None:
        self._word_columns.cache_clear()

    def columns(self, preprocessed: str) -> bytes:
        """Vocabulary columns of every n-gram occurrence (repeats kept, unknown dropped),
        packed as int64 (`unpack`): joining cached bytes and one `np.frombuffer` cost far
        less than extending and converting Python lists of ints."""
        if self.analyzer == "word":
            found = map(self.vocabulary.get, word_ngrams(preprocessed, self.ngram_range))
            return _pack([column for column in found if column is not None])
        return b"".join(map(self._word_columns, preprocessed.split()))

    def transform_batch(self, preprocessed: Sequence[str]) -> csr_matrix:
        """The same for many documents at once: one sparse matrix of shape (n, features)."""
        counts = (
            self._word_counts(preprocessed)
            if self.analyzer == "word"
            else self._char_counts(preprocessed)
        )
        return self._tfidf(counts)

    def _word_counts(self, preprocessed: Sequence[str]) -> csr_matrix:
        found = [self.columns(text) for text in preprocessed]
        indptr = np.zeros(len(found) + 1, dtype=np.intp)
        np.cumsum([len(f) // _COLUMN_BYTES for f in found], out=indptr[1:])
        return _count_matrix(unpack(b"".join(found)), indptr, self.n_features)

    def _char_counts(self, preprocessed: Sequence[str]) -> csr_matrix:
        """char_wb counts as (documents × distinct words) @ (distinct words × n-grams).

        A document's char_wb n-grams are the n-grams of its whitespace-separated words,
        so its counts are the sum of its words' counts: each distinct word of the batch
        is cut into n-grams once, and the sum is one sparse product (exact integers).
        """
        word_ids: dict[str, int] = {}
        setdefault = word_ids.setdefault
        flat: list[int] = []
        indptr = [0]
        for text in preprocessed:
            flat.extend([setdefault(word, len(word_ids)) for word in text.split()])
            indptr.append(len(flat))
        documents = _count_matrix(
            np.array(flat, dtype=np.intp), np.array(indptr, dtype=np.intp), len(word_ids),
            summed=False,
        )
        per_word = [self._word_columns(word) for word in word_ids]
        word_indptr = np.zeros(len(per_word) + 1, dtype=np.intp)
        np.cumsum([len(w) // _COLUMN_BYTES for w in per_word], out=word_indptr[1:])
        grams = unpack(b"".join(per_word))
        words = csr_matrix(
            (np.ones(len(grams)), grams, word_indptr), shape=(len(per_word), self.n_features)
        )
        return (documents @ words).tocsr()  # the product sums repeated words and n-grams

    def _tfidf(self, counts: csr_matrix) -> csr_matrix:
        """Sublinear tf, idf and l2 row norms, in place on a count matrix without repeats."""
        counts.data = (1.0 + np.log(counts.data)) * self.idf[counts.indices]
        row_lengths = np.diff(counts.indptr)
        rows = np.repeat(np.arange(counts.shape[0]), row_lengths)
        norms = np.sqrt(np.bincount(rows, weights=counts.data**2, minlength=counts.shape[0]))
        norms[norms == 0] = 1.0
        counts.data /= np.repeat(norms, row_lengths)
        return counts


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted, non-empty array (`np.diff`'s
    `prepend` costs more than the whole comparison on a single message)."""
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return np.flatnonzero(first)


def _pack(columns: Iterable[int]) -> bytes:
    return array("q", columns).tobytes()


def unpack(packed: bytes) -> np.ndarray:
    """Packed columns (`TfidfBlock.columns`) as an int64 array (a read-only view)."""
    return np.frombuffer(packed, dtype=np.int64)


def _count_matrix(
    flat: np.ndarray, indptr: np.ndarray, n_columns: int, *, summed: bool = True
) -> csr_matrix:
    """Occurrences (column ids per row, rows cut by `indptr`) as a count matrix."""
    matrix = csr_matrix(
        (np.ones(len(flat)), flat.astype(np.intp), indptr), shape=(len(indptr) - 1, n_columns)
    )
    if summed:
        matrix.sum_duplicates()  # duplicates are summed into counts
    return matrix


class TfidfSpace:
    """Fitted TF-IDF blocks side by side, as in a `FeatureUnion`: one column space in which
    each block is l2-normalised on its own. Built from an artifact's `blocks` list."""

    def __init__(self, blocks: Sequence[dict]) -> None:
        self.blocks = [
            TfidfBlock(
                block["analyzer"],
                tuple(block["ngram_range"]),
                block["terms"],
                np.asarray(block["idf"], dtype=float),
            )
            for block in blocks
        ]
        sizes = [block.n_features for block in self.blocks]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
        self.n_features = int(self.offsets[-1])
        self.idf = np.concatenate([block.idf for block in self.blocks]) if sizes else np.zeros(0)

    def clear_word_caches(self) -> None:
        """Forget every word seen: `bench/local_model.py` times words never seen too."""
        for block in self.blocks:
            block.clear_word_cache()

    def logits_few(self, weights: np.ndarray, preprocessed: Sequence[str]) -> np.ndarray:
        """`features @ weights` of a handful of texts, shape (n, weights.shape[1]).

        For one message and its clauses or segments: every block's n-grams of all the
        texts are counted, weighted and normalised in one set of numpy calls; a scipy
        sparse matrix (`transform_batch`) costs more to set up than a few texts take.
        """
        n, n_blocks = len(preprocessed), len(self.blocks)
        # Pieces ordered block-major: piece = block * n + text.
        found = [block.columns(text) for block in self.blocks for text in preprocessed]
        columns = unpack(b"".join(found))
        lengths = [len(f) // _COLUMN_BYTES for f in found]
        pieces = n_blocks * n
        out = np.zeros((pieces, weights.shape[1]))
        if len(columns):
            # One key per (piece, column), piece-major: sorted, equal keys are repeats of
            # one n-gram in one piece (np.unique's work, without its wrapper's cost).
            base = np.arange(pieces) * self.n_features + np.repeat(self.offsets[:-1], n)
            keys = np.repeat(base, lengths) + columns
            keys.sort()
            starts = _run_starts(keys)
            counts = np.empty(len(starts))
            np.subtract(starts[1:], starts[:-1], out=counts[:-1])
            counts[-1] = len(keys) - starts[-1]
            keys = keys[starts]
            key_piece = keys // self.n_features
            key_column = keys - key_piece * self.n_features
            values = (1.0 + np.log(counts)) * self.idf[key_column]
            norms = np.sqrt(np.bincount(key_piece, weights=values * values, minlength=pieces))
            values /= norms[key_piece]  # a piece with a key has a positive norm
            # Keys are sorted by piece, so each piece's contributions are one contiguous run.
            piece_starts = _run_starts(key_piece)
            out[key_piece[piece_starts]] = np.add.reduceat(
                values[:, None] * weights[key_column], piece_starts, axis=0
            )
        return out.reshape(n_blocks, n, -1).sum(axis=0)

    def logits(self, weights: np.ndarray, preprocessed: Sequence[str]) -> np.ndarray:
        """`features @ weights` by whichever path is cheaper for this many texts."""
        if len(preprocessed) <= FEW_TEXTS:
            return self.logits_few(weights, preprocessed)
        return self.logits_batch(weights, preprocessed)

    def logits_batch(self, weights: np.ndarray, preprocessed: Sequence[str]) -> np.ndarray:
        """`features @ weights` of many texts, one sparse product per block."""
        total = np.zeros((len(preprocessed), weights.shape[1]))
        for block, start, end in zip(self.blocks, self.offsets[:-1], self.offsets[1:], strict=True):
            total += block.transform_batch(preprocessed) @ weights[start:end]
        return total

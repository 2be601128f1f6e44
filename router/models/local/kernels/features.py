"""TF-IDF features computed straight from a fitted vocabulary, without scikit-learn.

These functions reproduce exactly what the two `TfidfVectorizer`s of the training
pipeline do (lowercase, unicode accent stripping, word 1–2-grams with the default token
pattern, char_wb 2–5-grams, sublinear tf, idf, l2 norm per block), so a single message is
scored in microseconds instead of paying scikit-learn's per-call overhead. The test suite
proves the two agree to 1e-9. The per-n-gram work is compiled: char_wb lookups in
`router.models.local.kernels.ngram_table`, word 1–2-gram lookups in
`router.models.local.kernels.word_table`, the TF-IDF arithmetic in
`router.models.local.kernels.tfidf_kernel`.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numba import njit

from router.models.local.kernels.ngram_table import CharNgramTable, code_points
from router.models.local.kernels.tfidf_kernel import tfidf_logits
from router.models.local.kernels.word_table import WordNgramTable

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
CHUNK_TEXTS = 1024  # texts per compiled call: bounds the n-gram buffer of a large batch


def preprocessed_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every text lowercased, then as scikit-learn's `strip_accents_unicode` leaves it (NFKD,
    combining marks dropped), as code points back to back, with where each text starts
    (plus the end): what the n-gram tables read.

    Lowercasing and NFKD stay with Python; the combining marks are dropped in one compiled
    pass over the batch, because `str.translate` with a dict of marks works character by
    character and would be paid three times per message (segments, whole text, clauses).
    """
    lowered = [text.lower() for text in texts]
    if all(map(str.isascii, lowered)):
        return code_points(lowered)
    points, bounds = code_points(
        [text if text.isascii() else unicodedata.normalize("NFKD", text) for text in lowered]
    )
    return _drop_marks(points, bounds, combining_marks())


def decode_points(points: np.ndarray) -> str:
    return points.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


@lru_cache(maxsize=1)
def combining_marks() -> np.ndarray:
    """`is_mark[code point]`: what `unicodedata.combining` flags (built once, ~0.2 s)."""
    is_mark = np.zeros(sys.maxunicode + 1, dtype=np.bool_)
    is_mark[[p for p in range(sys.maxunicode + 1) if unicodedata.combining(chr(p))]] = True
    return is_mark


@njit(cache=True, nogil=True)
def _drop_marks(
    points: np.ndarray, bounds: np.ndarray, is_mark: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    kept = np.empty_like(points)
    kept_bounds = np.empty_like(bounds)
    found = 0
    for text in range(len(bounds) - 1):
        kept_bounds[text] = found
        for position in range(bounds[text], bounds[text + 1]):
            if not is_mark[points[position]]:
                kept[found] = points[position]
                found += 1
    kept_bounds[-1] = found
    return kept[:found], kept_bounds


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
        self.idf = idf
        self.n_features = len(terms)
        self._table: CharNgramTable | WordNgramTable | None = None
        if analyzer == "char_wb" and CharNgramTable.usable(terms, ngram_range):
            self._table = CharNgramTable(terms, ngram_range)
        elif analyzer == "word" and WordNgramTable.usable(ngram_range):
            self._table = WordNgramTable(terms)
        # The dict (a string per term, hundreds of thousands) only where the compiled
        # table cannot answer.
        self.vocabulary = (
            {} if self._table is not None else {term: column for column, term in enumerate(terms)}
        )

    def columns(self, points: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vocabulary columns of every n-gram occurrence of each text (repeats kept,
        unknown dropped), text after text, and how many belong to each text; the texts are
        `preprocessed_points`."""
        if self._table is not None:
            return self._table.columns(points, bounds)
        found = [
            self._python_columns(decode_points(points[start:end]))
            for start, end in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        lengths = np.fromiter(map(len, found), dtype=np.int64, count=len(found))
        return np.fromiter((c for f in found for c in f), dtype=np.int64), lengths

    def _python_columns(self, text: str) -> list[int]:
        """n-grams of a block no compiled table can key (word n-grams beyond bigrams,
        char_wb n-grams whose keys would not fit in 63 bits)."""
        if self.analyzer == "word":
            grams = word_ngrams(text, self.ngram_range)
        else:
            grams = [g for word in text.split() for g in word_char_ngrams(word, self.ngram_range)]
        found = map(self.vocabulary.get, grams)
        return [column for column in found if column is not None]


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
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_features = int(self.offsets[-1])
        self.idf = np.concatenate([block.idf for block in self.blocks]) if sizes else np.zeros(0)

    def scoring_table(self, weights: np.ndarray) -> np.ndarray:
        """Each column's idf and weights side by side, one row per column: what `logits`
        reads. A row is one memory fetch instead of two (idf, weights) per n-gram."""
        if len(weights) != self.n_features:
            raise ValueError("weights do not match this vocabulary")
        return np.ascontiguousarray(np.column_stack([self.idf, weights]))

    def logits(self, table: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """`features @ weights` of any number of texts, shape (n, table.shape[1] - 1), for a
        `scoring_table(weights)`."""
        if len(texts) > CHUNK_TEXTS:
            return np.vstack(
                [
                    self.logits(table, texts[start : start + CHUNK_TEXTS])
                    for start in range(0, len(texts), CHUNK_TEXTS)
                ]
            )
        points, bounds = preprocessed_points(texts)
        # Pieces block-major, as the kernel reads them: piece = block * n + text.
        found = [block.columns(points, bounds) for block in self.blocks]
        return tfidf_logits(
            np.concatenate([columns for columns, _ in found]),
            np.concatenate([lengths for _, lengths in found]),
            len(texts),
            self.offsets,
            table,
        )

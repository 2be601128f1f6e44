from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer, strip_accents_unicode

from calibration.data import load_labelled
from router.models.local.kernels.features import (
    TfidfBlock,
    decode_points,
    preprocessed_points,
    word_char_ngrams,
)
from router.models.local.kernels.ngram_table import CharNgramTable
from router.models.local.kernels.word_table import word_characters
from tests.paths import DATASETS

WORDS = ["a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "remboursement", "ёлка"]


@pytest.mark.parametrize("ngram_range", [(2, 5), (2, 6), (1, 3), (3, 8)], ids=str)
def test_word_char_ngrams_equal_scikit_learns_char_wb(ngram_range: tuple[int, int]) -> None:
    """Short words count once, as the whole padded word: the edge the fast path must copy."""
    analyzer = TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range).build_analyzer()
    for word in WORDS:
        assert word_char_ngrams(word, ngram_range) == analyzer(word), word


TEXTS = [
    "",
    "   ",
    "a",
    "refund my order please",
    "  lots   of\tspaces\n\nand lines  ",
    "no\u00a0break\u2003em\u3000ideographic\x1cseparator",
    "ёлка rückerstattung contraseña 返金 😀 ᴀᴄᴄᴏᴜɴᴛ",
    "x" * 300,
    "emoji🙂glued to words, and punctuation!!! ???",
]


def _block_and_vectorizer(
    ngram_range: tuple[int, int], texts: list[str], analyzer: str = "char_wb"
) -> tuple[TfidfBlock, TfidfVectorizer]:
    vectorizer = TfidfVectorizer(
        analyzer=analyzer, ngram_range=ngram_range, strip_accents="unicode", sublinear_tf=True
    ).fit(texts)
    terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
    return TfidfBlock(analyzer, ngram_range, terms, vectorizer.idf_), vectorizer


def _assert_counts_equal(block: TfidfBlock, vectorizer: TfidfVectorizer, texts: list[str]) -> None:
    columns, lengths = block.columns(*preprocessed_points(texts))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    ours = csr_matrix(
        (np.ones(len(columns)), columns, indptr), shape=(len(texts), block.n_features)
    )
    ours.sum_duplicates()
    counter = CountVectorizer(
        analyzer=vectorizer.analyzer,
        ngram_range=vectorizer.ngram_range,
        strip_accents="unicode",
        vocabulary=vectorizer.vocabulary_,
    )
    theirs = counter.transform(texts)
    assert ours.nnz > 0
    assert (ours != theirs).nnz == 0


@pytest.mark.parametrize("ngram_range", [(2, 5), (2, 6), (1, 3), (4, 6)], ids=str)
def test_block_columns_count_what_scikit_learn_counts(ngram_range: tuple[int, int]) -> None:
    """The compiled table (and, for (4, 6), which it cannot key, the dict) finds every
    n-gram scikit-learn counts, whitespace of every kind and unknown characters included."""
    rows = load_labelled(DATASETS / "routes")
    fitted_on = [r.text for r in rows[::7]] + TEXTS
    block, vectorizer = _block_and_vectorizer(ngram_range, fitted_on)
    assert (block._table is not None) == (ngram_range[0] <= 3)
    _assert_counts_equal(block, vectorizer, [r.text for r in rows[3::11]] + TEXTS + ["zz \u2603"])


def test_a_vocabulary_too_large_to_key_falls_back_to_the_dict() -> None:
    """Keys need bits per character × max_n ≤ 63: 3,000 distinct characters need 12 bits,
    so 6-grams do not fit; the block still counts exactly."""
    texts = ["".join(chr(0x4E00 + i + k) for k in range(4)) for i in range(0, 3000, 2)]
    assert not CharNgramTable.usable(texts, (2, 6))
    block, vectorizer = _block_and_vectorizer((2, 6), texts)
    assert block._table is None
    _assert_counts_equal(block, vectorizer, texts[:50] + ["一丁 丂七"])


WORD_TEXTS = [
    "snake_case ids_like_this and x y z single letters between words",
    "digits 42 and ²³ superscripts, ½ fractions, ٣٤ arabic-indic",
    "ёлка rückerstattung contraseña 返金 😀 glued🙂words",
    "the the the the repeated the the",
    "a b c",
    "never seen before: zyxwvut qwertyuiop then refund please",
]


@pytest.mark.parametrize("ngram_range", [(1, 2), (1, 1), (1, 3)], ids=str)
def test_word_block_columns_count_what_scikit_learn_counts(ngram_range: tuple[int, int]) -> None:
    """The compiled word table ((1, 1) and (1, 2)) and the dict ((1, 3)) find every word
    n-gram scikit-learn counts: a pair with a word the vocabulary lacks is no term, and a
    one-character word between two words is no token, so those two form a pair."""
    rows = load_labelled(DATASETS / "routes")
    fitted_on = [r.text for r in rows[::7]] + TEXTS + WORD_TEXTS[:4]
    block, vectorizer = _block_and_vectorizer(ngram_range, fitted_on, analyzer="word")
    assert (block._table is not None) == (ngram_range[1] <= 2)
    _assert_counts_equal(block, vectorizer, [r.text for r in rows[5::11]] + TEXTS + WORD_TEXTS)


def test_word_characters_are_what_re_calls_word_characters() -> None:
    is_word = word_characters()
    word = re.compile(r"\w")
    assert len(is_word) == sys.maxunicode + 1
    assert [p for p in range(sys.maxunicode + 1) if bool(word.match(chr(p))) != is_word[p]] == []


def test_preprocessing_is_scikit_learns_over_every_code_point() -> None:
    """Lowercase then `strip_accents_unicode`, for every code point (surrogates included),
    in texts of 64 code points with ASCII-only texts among them (which skip NFKD)."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    texts = [every[start : start + 64] for start in range(0, len(every), 64)]
    texts += [r.text for r in load_labelled(DATASETS / "routes")[::13]]
    texts += ["İADE ΟΔΟΣ Σ ΣΑΣ", "e\u0301\u0327 naïve", "\u0300\u0301", "", "plain ascii"]
    points, bounds = preprocessed_points(texts)
    ours = [decode_points(points[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    theirs = [strip_accents_unicode(text.lower()) for text in texts]
    assert [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b] == []
    points, _ = preprocessed_points(["Crème BRÛLÉE"])
    assert decode_points(points) == "creme brulee"

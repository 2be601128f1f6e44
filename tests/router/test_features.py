from __future__ import annotations

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from router.models.features import word_char_ngrams

WORDS = ["a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "remboursement", "ёлка"]


@pytest.mark.parametrize("ngram_range", [(2, 5), (2, 6), (1, 3), (3, 8)], ids=str)
def test_word_char_ngrams_equal_scikit_learns_char_wb(ngram_range: tuple[int, int]) -> None:
    """Short words count once, as the whole padded word: the edge the fast path must copy."""
    analyzer = TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range).build_analyzer()
    for word in WORDS:
        assert word_char_ngrams(word, ngram_range) == analyzer(word), word

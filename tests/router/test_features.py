from __future__ import annotations

import itertools

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from router.models.features import shared_word_char_ngrams

WORDS = ["a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "remboursement", "ёлка"]
RANGES = [(2, 5), (2, 6), (1, 3), (3, 8)]  # (3, 8) is longer than the shared list


def sklearn_char_wb(word: str, ngram_range: tuple[int, int]) -> list[str]:
    return TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range).build_analyzer()(word)


@pytest.mark.parametrize("order", list(itertools.permutations(RANGES, 2)), ids=str)
def test_shared_ngrams_equal_scikit_learns_in_whichever_order_the_blocks_ask(
    order: tuple[tuple[int, int], ...],
) -> None:
    """The second block's n-grams are cut from the first one's cached list."""
    for word in WORDS:
        for ngram_range in order:
            assert shared_word_char_ngrams(word, ngram_range) == sklearn_char_wb(
                word, ngram_range
            ), (word, ngram_range)

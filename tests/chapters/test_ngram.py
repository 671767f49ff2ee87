"""Tests for transformer_lite.chapters.ngram: the character n-gram baseline.

Oracles: a case computed by hand with fractions (training text "abab", vocabulary "abc", order 2;
the derivation is in the comments), the discount estimate of Ney et al. on small counts, and
properties over random texts (hypothesis): every conditional distribution sums to 1 over the
vocabulary, and the cross-entropy equals the mean of -ln p computed one character at a time.
"""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite.chapters.ngram import CharNGram, absolute_discount

# By hand, text "abab", vocabulary {a, b, c}, order 2.
# Unigrams: a 2, b 2; no unigram seen once, so D_1 = 0.5 (the fallback); N() = 4, T() = 2.
#   p1(a) = (2 - 1/2)/4 + (1/2)(2/4)(1/3) = 3/8 + 1/12 = 11/24 = p1(b);  p1(c) = 1/12 = 2/24.
# Bigrams: ab 2, ba 1: n1 = 1, n2 = 1, D_2 = 1/(1 + 2) = 1/3.  Context a: N = 2, T = 1; context b: N = 1, T = 1.
#   p2(b|a) = (2 - 1/3)/2 + (1/3)(1/2) p1(b) = 5/6 + 11/144 = 131/144
#   p2(a|a) = (1/6)(11/24) = 11/144,  p2(c|a) = (1/6)(2/24) = 2/144
#   p2(a|b) = (1 - 1/3)/1 + (1/3)(1/1)(11/24) = 2/3 + 11/72 = 59/72
#   p2(x|c) = p1(x): context c never seen.
HAND = {
    ("", "a"): Fraction(11, 24),
    ("", "c"): Fraction(1, 12),
    ("a", "b"): Fraction(131, 144),
    ("a", "a"): Fraction(11, 144),
    ("a", "c"): Fraction(2, 144),
    ("b", "a"): Fraction(59, 72),
    ("c", "c"): Fraction(1, 12),
    ("c", "a"): Fraction(11, 24),
}


@pytest.fixture
def abab():
    return CharNGram("abab", order=2, vocab="abc")


def test_hand_computed_probabilities(abab):
    assert abab.discounts[1:] == [0.5, pytest.approx(1 / 3)]
    for (context, char), expected in HAND.items():
        assert abab.prob(context, char) == pytest.approx(float(expected), abs=1e-15), (
            context,
            char,
        )


def test_hand_computed_cross_entropy(abab):
    # "ab": 'a' has no context (both orders: p1(a)); 'b' after 'a': p1(b) for order 1, p2(b|a) for order 2
    order1 = -(2 * math.log(11 / 24)) / 2
    order2 = -(math.log(11 / 24) + math.log(131 / 144)) / 2
    assert abab.cross_entropy_by_order("ab") == pytest.approx([order1, order2], abs=1e-15)
    # first=1: only 'b' is predicted, still from the context 'a'
    assert abab.cross_entropy_by_order("ab", first=1) == pytest.approx(
        [-math.log(11 / 24), -math.log(131 / 144)], abs=1e-15
    )


def test_counts_and_discount():
    model = CharNGram("aaab", order=3, vocab="ab")
    assert model.counts[2] == {"aa": 2, "ab": 1}
    assert model.counts[3] == {"aaa": 1, "aab": 1}
    assert absolute_discount(10, 5) == pytest.approx(0.5)
    assert absolute_discount(3, 1) == pytest.approx(0.6)
    assert absolute_discount(0, 4) == 0.5 and absolute_discount(4, 0) == 0.5


def test_errors():
    with pytest.raises(ValueError, match="order must be >= 1, got 0"):
        CharNGram("ab", order=0, vocab="ab")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        CharNGram("abz", order=2, vocab="ab")
    model = CharNGram("ab", order=2, vocab="ab")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.cross_entropy_by_order("az")
    with pytest.raises(ValueError, match="need 0 <= first < len"):
        model.cross_entropy_by_order("")
    with pytest.raises(ValueError, match="got first=2 and len"):
        model.cross_entropy_by_order("ab", first=2)


texts = st.text(alphabet="abcd", min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(train=texts, context=st.text(alphabet="abcde", max_size=5), order=st.integers(1, 4))
def test_distributions_sum_to_one(train, context, order):
    model = CharNGram(train, order=order, vocab="abcde")  # 'e' never seen in training
    for k in range(order):
        probs = [model.probs_by_order(context, c)[k] for c in "abcde"]
        assert all(p > 0 for p in probs)
        assert math.fsum(probs) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(train=texts, test=texts, order=st.integers(1, 4), data=st.data())
def test_cross_entropy_is_mean_of_per_character_losses(train, test, order, data):
    model = CharNGram(train, order=order, vocab="abcd")
    first = data.draw(st.integers(0, len(test) - 1))
    by_hand = [
        -math.log(model.prob(test[max(0, t - order + 1) : t], test[t]))
        for t in range(first, len(test))
    ]
    expected = sum(by_hand) / len(by_hand)
    assert model.cross_entropy_by_order(test, first=first)[-1] == pytest.approx(expected, rel=1e-12)

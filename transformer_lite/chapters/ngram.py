"""A character n-gram language model: the baseline a neural language model has to beat.

``CharNGram`` counts every substring of length 1 to ``order`` in a training text and predicts the
next character from the ``order - 1`` characters before it, with **interpolated absolute
discounting** (Ney, Essen and Kneser 1994, "On structuring probabilistic dependences in stochastic
language modelling", Computer Speech and Language 8; the notation of Chen and Goodman 1999, "An
empirical study of smoothing techniques for language modeling", section 2.5). For a context ``h`` of
``k - 1`` characters and a character ``c``,

    p_k(c | h) = max(N(h c) - D_k, 0) / N(h) + D_k * T(h) / N(h) * p_{k-1}(c | h')

where ``N(h c)`` counts ``h`` followed by ``c`` in the training text, ``N(h)`` counts ``h`` followed
by any character, ``T(h)`` is the number of distinct characters seen after ``h``, and ``h'`` is ``h``
without its first character. A context never seen in training (``N(h) = 0``) falls back to
``p_{k-1}(c | h')``. The recursion ends at order 0, the uniform distribution over the vocabulary, so
every character of the vocabulary has a probability above zero.

The discount of each order is not tuned on any text: it is the estimate
``D_k = n_1 / (n_1 + 2 n_2)`` of Ney et al., with ``n_1`` and ``n_2`` the numbers of distinct
k-grams that occur exactly once and exactly twice in the training text (0.5 if ``n_1`` or ``n_2`` is 0,
where the estimate is 0 or 1 and would leave no or all mass for the lower order).

The counts are exact integers, so every probability is a deterministic function of the training
text: unlike a trained network, the model is the same on every processor.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable

__all__ = ["CharNGram", "absolute_discount"]


def absolute_discount(n1: int, n2: int) -> float:
    """Ney et al.'s discount estimate ``n1 / (n1 + 2 n2)`` (0.5 when ``n1`` or ``n2`` is 0).

    Args:
        n1: number of distinct n-grams seen exactly once in training.
        n2: number of distinct n-grams seen exactly twice.

    Returns:
        A float in (0, 1).
    """
    if n1 <= 0 or n2 <= 0:
        return 0.5
    return n1 / (n1 + 2 * n2)


class CharNGram:
    """Character n-gram model of order ``order`` (context of ``order - 1`` characters).

    Args:
        text: the training text (a ``str``).
        order: the largest n-gram length, >= 1 (1: unigram frequencies, smoothed towards uniform).
        vocab: every character the model may be asked about (``str`` or iterable of 1-character
            strings); must contain every character of ``text``.

    Attributes:
        counts: ``counts[k]`` is a ``Counter`` of the k-grams (strings of length k) of ``text``,
            for k = 1 .. order.
        discounts: ``discounts[k]`` is D_k, for k = 1 .. order (index 0 unused, 0.0).

    Raises:
        ValueError: if ``order < 1`` or ``text`` contains a character outside ``vocab``.
    """

    def __init__(self, text: str, order: int, vocab: Iterable[str]) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.vocab = sorted(set(vocab))
        unknown = set(text) - set(self.vocab)
        if unknown:
            raise ValueError(f"text has characters outside the vocabulary: {sorted(unknown)!r}")
        self.order = order
        self.counts: list[Counter] = [Counter()]
        self.discounts = [0.0]
        # per context h (length k - 1): N(h) and T(h), for k = 1 .. order (the empty context at k = 1)
        self._context_total: list[dict[str, int]] = [{}]
        self._context_types: list[dict[str, int]] = [{}]
        for k in range(1, order + 1):
            grams = Counter(text[i : i + k] for i in range(len(text) - k + 1))
            total: dict[str, int] = defaultdict(int)
            types: dict[str, int] = defaultdict(int)
            for gram, n in grams.items():
                total[gram[:-1]] += n
                types[gram[:-1]] += 1
            per_count = Counter(n for n in grams.values() if n <= 2)
            self.counts.append(grams)
            self.discounts.append(absolute_discount(per_count[1], per_count[2]))
            self._context_total.append(dict(total))
            self._context_types.append(dict(types))

    def probs_by_order(self, context: str, char: str) -> list[float]:
        """``[p_1(char | ...), ..., p_order(char | ...)]``: the probability under each order's model.

        Each order ``k`` uses the last ``k - 1`` characters of ``context`` (fewer if the context is
        shorter: then it is the lower order's probability). The orders share their counts, so one
        call gives the models of every order at once.

        Args:
            context: the characters before ``char`` (any length; only the last ``order - 1`` are used).
            char: one character of the vocabulary.

        Returns:
            A list of ``order`` floats in (0, 1].
        """
        p = 1.0 / len(self.vocab)  # order 0: uniform
        out = []
        for k in range(1, self.order + 1):
            if k - 1 > len(context):  # not enough context: keep the lower order's estimate
                out.append(p)
                continue
            h = context[len(context) - (k - 1) :]
            total = self._context_total[k].get(h, 0)
            if total > 0:
                d = self.discounts[k]
                seen = self.counts[k].get(h + char, 0)
                p = max(seen - d, 0.0) / total + d * self._context_types[k][h] / total * p
            out.append(p)
        return out

    def prob(self, context: str, char: str) -> float:
        """p(char | last ``order - 1`` characters of ``context``) under the full model."""
        return self.probs_by_order(context, char)[-1]

    def cross_entropy_by_order(self, text: str, first: int = 0) -> list[float]:
        """Mean of ``-ln p(text[t] | text[:t])`` over ``t >= first``, in nats per character, for orders 1 .. order.

        Every character is predicted from the characters before it in ``text`` only (the first
        ``order - 1`` from a shorter context). ``first = 1`` scores a window of ``L + 1`` characters
        the way a language model scores its ``L`` targets: the target at position t sees the window's
        characters 0 .. t and nothing before the window.

        Args:
            text: the text to score (characters of the vocabulary).
            first: index of the first character that is predicted, ``0 <= first < len(text)``.

        Returns:
            A list of ``order`` floats: element ``k - 1`` is the loss of the order-k model.

        Raises:
            ValueError: if ``first`` is out of range (or ``text`` empty) or ``text`` has characters
                outside the vocabulary.
        """
        if not 0 <= first < len(text):
            raise ValueError(
                f"need 0 <= first < len(text), got first={first} and len(text)={len(text)}"
            )
        unknown = set(text) - set(self.vocab)
        if unknown:
            raise ValueError(f"text has characters outside the vocabulary: {sorted(unknown)!r}")
        sums = [0.0] * self.order
        width = self.order - 1
        for t in range(first, len(text)):
            for k, p in enumerate(self.probs_by_order(text[max(0, t - width) : t], text[t])):
                sums[k] -= math.log(p)
        return [s / (len(text) - first) for s in sums]

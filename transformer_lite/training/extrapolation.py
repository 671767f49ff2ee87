"""Train short, test long: one model with five position schemes, evaluated on longer inputs.

The task, *most recent marked symbol*: a sequence of random tokens, some of them *marked*
symbols (ids ``0 .. N_MARKED - 1``), the others fillers, ends with a ``QUERY`` token; the
answer is the marked symbol that occurred last before it. Which marked token is wanted is
decided by order alone (every marked token is a candidate), and the answer usually lies a few
tokens back, wherever the sequence ends, so a model that reads *how far back* a token is can
answer at any length, while one that learned *absolute* positions meets positions it never saw.

* :class:`PositionSchemeTransformer` is the package's
  :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` with two more choices
  of position information: ``"none"`` (nothing) and ``"alibi"`` (the causal linear bias of
  Press, Smith & Lewis, 2022, Sec. 3, added to every layer's scores, nothing added to the
  embeddings). ``"learned"``, ``"sinusoidal"`` and ``"rotary"`` are the parent's own.
* :func:`make_recency_batch` draws the task, :func:`train_recency` trains on it (Adam,
  clipped gradients, the loss at the last position), :func:`recency_accuracy` measures a
  model at given lengths on held-out sequences.
* :func:`bag_of_tokens_ceiling` is the best accuracy of any predictor that sees only the
  *multiset* of the tokens, which is all a one-layer causal model without positions can see
  at its last position (its attention sums over the keys, in any order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import Tensor, nn

from ..checks import check_int_at_least, check_positions, check_positive_int, check_token_ids
from ..models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from ..nn.relative_position import alibi_bias
from ..outputs import ModelOutput
from .toy_tasks import train_last_position

__all__ = [
    "SCHEMES",
    "N_MARKED",
    "QUERY",
    "VOCAB_SIZE",
    "PositionSchemeTransformer",
    "make_recency_batch",
    "train_recency",
    "recency_accuracy",
    "bag_of_tokens_ceiling",
]

N_MARKED = 4  # marked symbols: ids 0 .. 3, the possible answers
QUERY = 7  # the last token of every sequence; ids 4 .. 6 are fillers
VOCAB_SIZE = 8

# the five ways of giving (or not giving) the model positions
SCHEMES = ("none", "learned", "sinusoidal", "alibi", "rotary")


class PositionSchemeTransformer(DecoderOnlyTransformer):
    """A :class:`DecoderOnlyTransformer` whose position information is one of :data:`SCHEMES`.

    ``"learned"``, ``"sinusoidal"`` and ``"rotary"`` build the parent model unchanged.
    ``"none"`` and ``"alibi"`` build it as for ``"sinusoidal"`` (which has no parameters, so
    the same seed gives the same initial weights) and drop the added encoding; ``"alibi"``
    then passes :func:`~transformer_lite.nn.relative_position.alibi_bias` (causal mask
    included) as the float ``attn_mask`` of every block: ``softmax(QK^T / sqrt(d) + M)``
    with ``M[h, i, j] = -m_h (i - j)`` for ``j <= i`` (Press et al., 2022, Sec. 3). Without
    an added encoding nothing limits the length; ``max_len`` still bounds the input.

    ``embedding_std`` re-draws the token embeddings (and a learned position table) from
    ``N(0, embedding_std^2)`` after the parent's GPT-2 initialisation (``0.02``): the fixed
    sinusoid has entries of size 1, and next to token vectors of size 0.02 it drowns them.

    Args:
        config: the parent's configuration; its ``positional`` field is ignored.
        scheme: one of :data:`SCHEMES`.
        embedding_std: ``None`` (keep the parent's initialisation) or a positive std.

    Raises:
        ValueError: for an unknown ``scheme``, a non-positive ``embedding_std``, or as
            :class:`DecoderOnlyConfig`.
    """

    def __init__(
        self, config: DecoderOnlyConfig, scheme: str, embedding_std: float | None = None
    ) -> None:
        if scheme not in SCHEMES:
            raise ValueError(
                f"PositionSchemeTransformer: expected scheme in {SCHEMES}, received {scheme!r}"
            )
        parent = scheme if scheme in ("learned", "sinusoidal", "rotary") else "sinusoidal"
        super().__init__(replace(config, positional=parent))
        self.scheme = scheme
        if scheme in ("none", "alibi"):
            self.position_embedding = None  # nothing is added to the token embeddings
        if embedding_std is not None:
            if not embedding_std > 0:
                raise ValueError(
                    f"PositionSchemeTransformer: expected embedding_std > 0, received {embedding_std!r}"
                )
            nn.init.normal_(self.token_embedding.weight, std=embedding_std)
            if scheme == "learned":
                nn.init.normal_(self.position_embedding.weight, std=embedding_std)

    def forward(self, input_ids: Tensor) -> ModelOutput:
        """Next-token logits ``(B, L, vocab_size)`` of int64 ids ``(B, L)`` (no cache), as the
        parent's :class:`~transformer_lite.outputs.ModelOutput` (``cache`` ``None``).

        Raises:
            ValueError: if ``input_ids`` is not a 2-D integer tensor with ids in
                ``[0, vocab_size)``, or is longer than ``max_len``.
        """
        if self.scheme != "alibi":
            return super().forward(input_ids)
        c, L = self.config, input_ids.shape[1] if input_ids.dim() == 2 else 0
        check_token_ids(
            "PositionSchemeTransformer", "input_ids", input_ids, c.vocab_size, min_len=1
        )
        check_positions("PositionSchemeTransformer", 0, L, c.max_len)
        x = self.embedding_dropout(self.token_embedding(input_ids))  # (B, L, D), no position added
        # (1, H, L, L): -m_h (i - j) for j <= i, -inf above the diagonal
        bias = alibi_bias(c.n_heads, L, dtype=x.dtype, device=x.device)
        attentions = []
        for block in self.blocks:
            # (B, L, D), (B, H, L, L); the causal mask is inside the bias
            x, weights, _ = block(x, attn_mask=bias)
            attentions.append(weights)
        logits = self.lm_head(self.final_norm(x))  # (B, L, V)
        return ModelOutput(logits, tuple(attentions), None)


def make_recency_batch(
    batch_size: int, length: int, generator: torch.Generator | None = None, p_marked: float = 0.25
) -> tuple[Tensor, Tensor]:
    """Sequences of ``length`` tokens ending in ``QUERY``, and the last marked symbol before it.

    Positions ``0 .. length - 2`` hold a marked symbol (uniform over ``0 .. N_MARKED - 1``)
    with probability ``p_marked`` and a filler (uniform over ``N_MARKED .. QUERY - 1``)
    otherwise; position 0 is always marked, so every sequence has an answer. The last
    position holds ``QUERY``.

    Args:
        batch_size: number of sequences B, ``>= 1``.
        length: tokens per sequence n, ``>= 2``.
        generator: a seeded ``torch.Generator`` for reproducible batches.
        p_marked: probability that a position (after the first) is marked, in (0, 1].

    Returns:
        ``(tokens, answers)``, int64: ``tokens`` ``(B, n)``, ``answers`` ``(B,)``.

    Raises:
        ValueError: for sizes out of range or ``p_marked`` outside (0, 1].
    """
    owner = "make_recency_batch"
    check_positive_int(owner, "batch_size", batch_size)
    check_int_at_least(owner, "length", length, 2)
    if not 0 < p_marked <= 1:
        raise ValueError(f"{owner}: expected p_marked in (0, 1], received {p_marked!r}")
    n = length - 1  # positions before the query
    marked = torch.rand(batch_size, n, generator=generator) < p_marked  # (B, n)
    marked[:, 0] = True
    symbols = torch.randint(0, N_MARKED, (batch_size, n), generator=generator)  # (B, n)
    fillers = torch.randint(N_MARKED, QUERY, (batch_size, n), generator=generator)  # (B, n)
    body = torch.where(marked, symbols, fillers)  # (B, n)
    # the largest marked index: argmax of index * marked (index 0 is always marked)
    last = (torch.arange(n) * marked).argmax(dim=1)  # (B,)
    answers = body[torch.arange(batch_size), last]  # (B,)
    query = torch.full((batch_size, 1), QUERY, dtype=torch.int64)
    return torch.cat((body, query), dim=1), answers  # (B, n + 1), (B,)


def train_recency(
    model: torch.nn.Module,
    max_len: int,
    min_len: int = 2,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` in place on :func:`make_recency_batch`, at lengths up to ``max_len``.

    Every step draws a fresh batch, of one length uniform in ``min_len .. max_len``; the loop
    is :func:`~transformer_lite.training.toy_tasks.train_last_position` (the cross-entropy
    of the logits at the *last* position against the answer, Adam, gradients clipped to
    global norm 1), as in :func:`~transformer_lite.training.toy_tasks.train_delayed_recall`.
    The model is left in eval mode.

    Args:
        model: maps int64 ids ``(B, n)`` to logits ``(B, n, V)``, ``V >= VOCAB_SIZE``.
        max_len: the training length L, the longest sequence seen (``>= min_len``).
        min_len: the shortest training sequence, ``>= 2``.
        steps, batch_size, lr: optimiser steps, sequences per step, Adam's learning rate.
        seed: seeds the training batches (the initialisation is the caller's).

    Returns:
        The training loss of every step (nats).

    Raises:
        ValueError: for sizes out of range.
    """
    owner = "train_recency"
    check_int_at_least(owner, "min_len", min_len, 2)
    check_int_at_least(owner, "max_len", max_len, min_len)
    check_positive_int(owner, "steps", steps)
    g = torch.Generator().manual_seed(seed)

    def next_batch() -> tuple[Tensor, Tensor]:
        n = int(torch.randint(min_len, max_len + 1, (1,), generator=g))  # this step's length
        return make_recency_batch(batch_size, n, g)  # (B, n), (B,)

    return train_last_position(model, next_batch, steps, lr)


def _eval_batch(length: int, n_eval: int, seed: int) -> tuple[Tensor, Tensor]:
    # the held-out sequences of one length: the same for every model and for the ceiling
    return make_recency_batch(n_eval, length, torch.Generator().manual_seed(seed + length))


@torch.no_grad()
def recency_accuracy(
    model: torch.nn.Module, lengths: Sequence[int], n_eval: int = 1000, seed: int = 10_000
) -> dict[int, float]:
    """Fraction of held-out sequences of each length whose last-position arg-max is the answer.

    For every length ``n``, ``n_eval`` sequences of exactly ``n`` tokens come from a
    generator seeded ``seed + n`` (each length its own sequences, the same for every model;
    the default seed keeps them apart from training seeds 0, 1, 2, ...). The model runs in
    eval mode; its mode is restored afterwards.

    Returns:
        ``{length: accuracy}`` in the order of ``lengths``.

    Raises:
        ValueError: for sizes out of range (as :func:`make_recency_batch`).
    """
    check_positive_int("recency_accuracy", "n_eval", n_eval)
    was_training = model.training
    model.eval()
    out = {}
    try:
        for n in lengths:
            tokens, answers = _eval_batch(n, n_eval, seed)  # (N, n), (N,)
            predicted = model(tokens).logits[:, -1].argmax(dim=-1)  # (N,)
            out[n] = float((predicted == answers).double().mean())
    finally:
        model.train(was_training)
    return out


def bag_of_tokens_ceiling(length: int, n_eval: int = 1000, seed: int = 10_000) -> float:
    """The expected accuracy of the best guess from the multiset of the tokens alone.

    Given which marked symbols occur how often (but not where), each marked occurrence is
    equally likely to be the last one (the symbols at the marked positions are independent
    and identically distributed), so the answer is ``s`` with probability ``count_s / T``
    (``T`` marked tokens) and the best guess is the most frequent marked symbol. This
    averages ``max_s count_s / T`` over the sequences :func:`recency_accuracy` draws for
    ``length`` (same ``seed``): an upper bound, in expectation, for any model that cannot
    tell positions apart.

    Raises:
        ValueError: for sizes out of range (as :func:`make_recency_batch`).
    """
    check_positive_int("bag_of_tokens_ceiling", "n_eval", n_eval)
    tokens, _ = _eval_batch(length, n_eval, seed)  # (N, n)
    # (N, VOCAB_SIZE) -> (N, N_MARKED): how often each marked symbol occurs
    counts = torch.nn.functional.one_hot(tokens, VOCAB_SIZE).sum(dim=1)[:, :N_MARKED]
    return float((counts.max(dim=-1).values.double() / counts.sum(dim=-1)).mean())

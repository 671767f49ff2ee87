"""Toy tasks whose right answer (and right attention pattern) is known, for small training runs.

* Sequence reversal (and sorting), a sequence-to-sequence task for the
  encoder-decoder: the target is the source read backwards, so target token
  ``t`` should read source position ``n - 1 - t``, an anti-diagonal alignment.
  Sequence-to-sequence learning of this kind goes back to Sutskever et al.
  (2014), who also observed that reversing the *source* helps an LSTM.
* Histogram counting, a task for an encoder alone: at every position, how many
  times does this position's symbol occur in the sequence? It needs attention
  (a position must find its equal symbols) but no position information, as
  counting does not depend on order (Weiss et al., 2021, "Thinking Like
  Transformers", use it as an example).

Token ids of the sequence-to-sequence tasks: ``PAD = 0``, ``BOS = 1``,
``EOS = 2``; the ``n_symbols`` content symbols are ``3 .. 3 + n_symbols - 1``.
Sequences are right-padded with ``PAD``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch
from torch import Tensor

from ..checks import check_int_at_least, check_positive_int

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "FIRST_SYMBOL",
    "make_reversal_batch",
    "shift_right",
    "exact_match",
    "mirror_positions",
    "alignment_accuracy",
    "make_histogram_batch",
    "SYMBOLS",
    "symbols_to_ids",
    "ids_to_symbols",
    "make_delayed_recall_batch",
    "delayed_recall_eval_lengths",
    "train_last_position",
    "train_delayed_recall",
]

PAD, BOS, EOS = 0, 1, 2  # padding, beginning of sequence, end of sequence
FIRST_SYMBOL = 3  # id of the first content symbol


def make_reversal_batch(
    batch_size: int,
    n_symbols: int = 10,
    min_len: int = 4,
    max_len: int = 12,
    generator: torch.Generator | None = None,
    exclude: Collection[tuple[int, ...]] | None = None,
    task: str = "reverse",
) -> tuple[Tensor, Tensor]:
    """A batch of random symbol sequences and their reversals (or sorted versions).

    Each example draws a length ``n`` uniformly from ``min_len .. max_len``
    and ``n`` symbols uniformly (with repetition) from the ``n_symbols``
    content ids. A sequence whose tuple of ids is in ``exclude`` is drawn again,
    so a held-out set can be kept out of training.

    Args:
        batch_size: number of examples B, ``>= 1``.
        n_symbols: number of content symbols, ``>= 1`` (ids ``3 .. 2 + n_symbols``).
        min_len, max_len: shortest and longest sequence, ``1 <= min_len <= max_len``.
        generator: a seeded ``torch.Generator`` for reproducible batches.
        exclude: tuples of content ids that must not be produced (e.g. the held-out sources).
        task: ``"reverse"`` (target = source backwards) or ``"sort"`` (target = source in ascending order).

    Returns:
        ``(src, tgt)``, int64: ``src`` ``(B, max_len)``, the symbols then ``PAD``;
        ``tgt`` ``(B, max_len + 1)``, the answer, then ``EOS``, then ``PAD``.

    Raises:
        ValueError: for non-positive sizes, ``min_len > max_len``, an unknown ``task``,
            or an ``exclude`` set that leaves too few sequences to draw from.
    """
    owner = "make_reversal_batch"
    check_positive_int(owner, "batch_size", batch_size)
    check_positive_int(owner, "n_symbols", n_symbols)
    check_positive_int(owner, "min_len", min_len)
    check_int_at_least(owner, "max_len", max_len, min_len)
    if task not in ("reverse", "sort"):
        raise ValueError(f"{owner}: expected task 'reverse' or 'sort', received {task!r}")
    exclude = set() if exclude is None else exclude
    n_possible = sum(n_symbols**n for n in range(min_len, max_len + 1))
    if len(exclude) >= n_possible / 2:  # rejection sampling would crawl (or never end)
        raise ValueError(
            f"{owner}: exclude holds {len(exclude)} sequences of the {n_possible} possible; "
            f"expected fewer than half"
        )
    src = torch.full((batch_size, max_len), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, max_len + 1), PAD, dtype=torch.long)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)  # (B,)
    for b in range(batch_size):
        n = int(lengths[b])
        while True:
            # (n,)
            seq = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + n_symbols, (n,), generator=generator)
            if tuple(seq.tolist()) not in exclude:
                break
        src[b, :n] = seq
        tgt[b, :n] = seq.flip(0) if task == "reverse" else seq.sort().values
        tgt[b, n] = EOS
    return src, tgt


def shift_right(tgt: Tensor, bos_id: int = BOS) -> Tensor:
    """The decoder input for teacher forcing: ``BOS`` followed by the target without its last column.

    At position ``t`` the decoder reads the true token ``t - 1`` (``BOS`` at
    ``t = 0``) and is trained to predict target token ``t`` (Vaswani et al.,
    2017, Sec. 3.1: "the output embeddings are offset by one position").

    Args:
        tgt: ``(B, T)`` integer target ids (answer, ``EOS``, padding).
        bos_id: the beginning-of-sequence id.

    Returns:
        ``(B, T)`` int64: ``[bos_id, tgt[:, 0], ..., tgt[:, T - 2]]`` in every row.

    Raises:
        ValueError: if ``tgt`` is not a 2-D integer tensor with at least one column.
    """
    if (
        not isinstance(tgt, Tensor)
        or tgt.dim() != 2
        or tgt.shape[1] < 1
        or tgt.is_floating_point()
        or tgt.dtype == torch.bool
    ):
        shape = tuple(tgt.shape) if isinstance(tgt, Tensor) else type(tgt).__name__
        raise ValueError(
            f"shift_right: expected an integer tensor of shape (B, T) with T >= 1, received {shape}"
        )
    bos = torch.full_like(tgt[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, T)


def exact_match(generated: Tensor, tgt: Tensor, eos_id: int = EOS, pad_id: int = PAD) -> Tensor:
    """Whether each generated sequence equals its target exactly, up to and including ``EOS``.

    Args:
        generated: ``(B, 1 + T')`` ids from :func:`~transformer_lite.models.encoder_decoder.greedy_decode`
            (``BOS`` first; what follows ``EOS`` is ignored).
        tgt: ``(B, T)`` target ids (answer, ``EOS``, then ``pad_id``).
        eos_id, pad_id: the end and padding ids.

    Returns:
        Bool tensor ``(B,)``: ``True`` where the tokens after ``BOS`` start with
        the whole target (answer and ``EOS``).

    Raises:
        ValueError: if the tensors are not 2-D with one batch size.
    """
    if not (
        isinstance(generated, Tensor)
        and isinstance(tgt, Tensor)
        and generated.dim() == tgt.dim() == 2
        and generated.shape[0] == tgt.shape[0]
    ):
        raise ValueError(
            f"exact_match: expected generated (B, 1 + T') and tgt (B, T) with one B, received "
            f"{tuple(getattr(generated, 'shape', ()))} and {tuple(getattr(tgt, 'shape', ()))}"
        )
    out = generated[:, 1:]  # drop BOS: (B, T')
    width = max(out.shape[1], tgt.shape[1])
    out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=pad_id)  # (B, width)
    want = torch.nn.functional.pad(tgt, (0, width - tgt.shape[1]), value=pad_id)  # (B, width)
    # Compare up to and including the target's EOS; later positions do not matter.
    # (B, width)
    relevant = torch.cumsum((want == eos_id).long(), dim=1) - (want == eos_id).long() == 0
    return ((out == want) | ~relevant).all(dim=1)


def mirror_positions(src: Tensor, pad_id: int = PAD) -> Tensor:
    """For reversal: the source position each target position copies, ``n - 1 - t``; ``-1`` past the answer.

    Args:
        src: ``(B, S)`` right-padded source ids.
        pad_id: the padding id.

    Returns:
        int64 ``(B, S + 1)`` (the width of the target with its ``EOS``): entry
        ``(b, t)`` is ``n_b - 1 - t`` for ``t < n_b`` and ``-1`` otherwise.

    Raises:
        ValueError: if ``src`` is not 2-D.
    """
    if not isinstance(src, Tensor) or src.dim() != 2:
        raise ValueError(
            f"mirror_positions: expected src of shape (B, S), received "
            f"{tuple(getattr(src, 'shape', ()))}"
        )
    n = (src != pad_id).sum(dim=1, keepdim=True)  # (B, 1)
    t = torch.arange(src.shape[1] + 1, device=src.device)[None, :]  # (1, S + 1)
    return torch.where(t < n, n - 1 - t, torch.full_like(t - n, -1))


def alignment_accuracy(weights: Tensor, expected: Tensor) -> float:
    """Fraction of query positions whose largest attention weight falls on the expected key.

    Args:
        weights: ``(B, L, S)`` attention weights (e.g. cross-attention averaged over heads).
        expected: ``(B, L)`` int, the key index each query should attend to most; ``-1`` = not counted.

    Returns:
        A float in [0, 1] (NaN if no position is counted).

    Raises:
        ValueError: if the shapes do not match.
    """
    if weights.dim() != 3 or tuple(expected.shape) != tuple(weights.shape[:2]):
        raise ValueError(
            f"alignment_accuracy: expected weights (B, L, S) and expected (B, L), received "
            f"{tuple(weights.shape)} and {tuple(expected.shape)}"
        )
    counted = expected >= 0  # (B, L)
    hits = (weights.argmax(dim=-1) == expected) & counted
    return float(hits.sum()) / float(counted.sum()) if bool(counted.any()) else float("nan")


def make_histogram_batch(
    batch_size: int, seq_len: int = 8, n_symbols: int = 6, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Random sequences and, at every position, the number of times its symbol occurs in the sequence.

    Args:
        batch_size: number of examples B, ``>= 1``.
        seq_len: length L of every sequence, ``>= 1``.
        n_symbols: symbols are ids ``0 .. n_symbols - 1`` (no special tokens), ``>= 1``.
        generator: a seeded ``torch.Generator``.

    Returns:
        ``(tokens, counts)``, int64 ``(B, L)`` each; ``counts`` lie in ``1 .. L``
        (a symbol always counts itself), so a classifier over ``L + 1`` classes fits.

    Raises:
        ValueError: for sizes that are not positive ints.
    """
    owner = "make_histogram_batch"
    check_positive_int(owner, "batch_size", batch_size)
    check_positive_int(owner, "seq_len", seq_len)
    check_positive_int(owner, "n_symbols", n_symbols)
    tokens = torch.randint(0, n_symbols, (batch_size, seq_len), generator=generator)  # (B, L)
    # (B, L, L) equal pairs -> (B, L)
    counts = (tokens[:, :, None] == tokens[:, None, :]).sum(dim=-1)
    return tokens, counts


SYMBOLS = (
    "abcdefghij"  # how the first ten content symbols are shown: id FIRST_SYMBOL + i is SYMBOLS[i]
)
_SPECIAL_NAMES = {PAD: "PAD", BOS: "BOS", EOS: "EOS"}


def symbols_to_ids(text: str) -> list[int]:
    """Ids of a string of the letters ``a``-``j`` (``a`` is ``FIRST_SYMBOL``).

    Raises:
        ValueError: for a character outside ``a``-``j``.
    """
    bad = sorted({c for c in text if c not in SYMBOLS})
    if bad:
        raise ValueError(f"symbols_to_ids: expected letters from {SYMBOLS!r}, received {bad}")
    return [FIRST_SYMBOL + SYMBOLS.index(c) for c in text]


def ids_to_symbols(ids) -> list[str]:
    """One label per id: ``a``-``j`` for the content symbols, ``PAD``/``BOS``/``EOS`` for the special ids.

    Raises:
        ValueError: for an id that is neither special nor one of the ten symbols.
    """
    out = []
    for i in (int(v) for v in ids):
        if i in _SPECIAL_NAMES:
            out.append(_SPECIAL_NAMES[i])
        elif FIRST_SYMBOL <= i < FIRST_SYMBOL + len(SYMBOLS):
            out.append(SYMBOLS[i - FIRST_SYMBOL])
        else:
            raise ValueError(
                f"ids_to_symbols: expected ids 0..{FIRST_SYMBOL + len(SYMBOLS) - 1}, received {i}"
            )
    return out


# --- Delayed recall: a dependency of known length ----------------------------------------------------------------


def make_delayed_recall_batch(
    batch_size: int,
    lag: int,
    n_symbols: int = 8,
    length: int | None = None,
    generator: torch.Generator | None = None,
    max_prefix: int = 0,
) -> tuple[Tensor, Tensor]:
    """Random symbol sequences and, as the answer, the symbol ``lag`` positions before the last one.

    Every token is drawn uniformly (with repetition) from ids ``0 .. n_symbols - 1``; the
    tokens between the answer and the last position are distractors from the same
    alphabet, so nothing but *position* marks which token is wanted. A model reads the
    whole sequence and must output, at the last position ``L - 1``, the token at position
    ``L - 1 - lag``. This is a delayed-recall (copy-after-a-delay) task in the spirit of
    the long-time-lag experiments of Hochreiter & Schmidhuber (1997, Sec. 5) and of
    Bengio et al. (1994, Sec. 4), reduced to one answer per sequence.

    With the default ``length = lag + 1`` the answer is always the *first* token, at
    absolute position 0, so a model with absolute positions can solve the task by looking
    up position 0 without measuring any offset. ``max_prefix = P > 0`` removes that
    shortcut: the batch's length is drawn uniformly from ``lag + 1 .. lag + 1 + P`` (one
    length for the whole batch, so no padding is needed), and the answer's absolute
    position ``L - 1 - lag`` moves over ``0 .. P`` while the offset ``lag`` stays fixed.

    Args:
        batch_size: number of examples B, ``>= 1``.
        lag: how many steps back the answer lies, ``k >= 1``.
        n_symbols: alphabet size, ``>= 2`` (chance accuracy is ``1 / n_symbols``).
        length: sequence length L, ``>= lag + 1``; default ``lag + 1`` (the answer is then the first token).
            Must stay ``None`` when ``max_prefix > 0``.
        generator: a seeded ``torch.Generator`` for reproducible batches.
        max_prefix: the largest number P of tokens before the answer, ``>= 0``; ``0`` (the
            default) draws nothing extra from ``generator``, so its batches are the ones of
            a call without the argument.

    Returns:
        ``(tokens, answers)``, int64: ``tokens`` ``(B, L)`` and ``answers`` ``(B,)``
        with ``answers[b] == tokens[b, L - 1 - lag]``.

    Raises:
        ValueError: for sizes that are not ints in range, ``length < lag + 1``, or
            ``length`` given together with ``max_prefix > 0``.
    """
    owner = "make_delayed_recall_batch"
    check_positive_int(owner, "batch_size", batch_size)
    check_positive_int(owner, "lag", lag)
    check_int_at_least(owner, "n_symbols", n_symbols, 2)
    check_int_at_least(owner, "max_prefix", max_prefix, 0)
    if max_prefix > 0:
        if length is not None:
            raise ValueError(
                f"{owner}: expected length None when max_prefix > 0 (the length is drawn), "
                f"received length={length!r}, max_prefix={max_prefix}"
            )
        # one length for the batch: L = lag + 1 + p, p uniform in 0 .. max_prefix
        length = lag + 1 + int(torch.randint(0, max_prefix + 1, (1,), generator=generator))
    length = lag + 1 if length is None else length
    check_int_at_least(owner, "length", length, lag + 1)
    tokens = torch.randint(0, n_symbols, (batch_size, length), generator=generator)  # (B, L)
    return tokens, tokens[:, length - 1 - lag].clone()  # (B, L), (B,)


def delayed_recall_eval_lengths(
    lag: int, n_eval: int, max_prefix: int = 0
) -> list[tuple[int, int]]:
    """How :func:`train_delayed_recall` splits ``n_eval`` held-out sequences over the lengths.

    Every length ``lag + 1 + p``, ``p = 0 .. max_prefix``, gets ``n_eval // (max_prefix + 1)``
    sequences, and the first ``n_eval % (max_prefix + 1)`` lengths one more, so every
    absolute position of the answer is tested and the counts add up to ``n_eval``.

    Args:
        lag: the offset k, ``>= 1``.
        n_eval: the number of held-out sequences, ``>= max_prefix + 1``.
        max_prefix: the largest prefix P, ``>= 0``.

    Returns:
        ``[(length, count), ...]``, ``max_prefix + 1`` pairs in increasing length.

    Raises:
        ValueError: for ints out of range, or fewer sequences than lengths.
    """
    owner = "delayed_recall_eval_lengths"
    check_positive_int(owner, "lag", lag)
    check_int_at_least(owner, "max_prefix", max_prefix, 0)
    check_int_at_least(owner, "n_eval", n_eval, max_prefix + 1)
    per_length, extra = divmod(n_eval, max_prefix + 1)
    return [(lag + 1 + p, per_length + (p < extra)) for p in range(max_prefix + 1)]


def train_last_position(
    model: torch.nn.Module, next_batch: Callable[[], tuple[Tensor, Tensor]], steps: int, lr: float
) -> list[float]:
    """Train ``model`` in place for ``steps`` steps, each on a fresh ``(tokens, answers) = next_batch()``.

    A step takes the cross-entropy of the logits at the *last* position against the answer
    and one Adam step (Kingma & Ba, 2015) with the gradients clipped to global norm 1
    (Pascanu et al., 2013). The training loop of :func:`train_delayed_recall` and of
    :func:`~transformer_lite.training.extrapolation.train_recency`; the model is left in eval mode.

    Args:
        model: maps int64 ids ``(B, L)`` to logits ``(B, L, V)``.
        next_batch: returns int64 ``tokens`` ``(B, L)`` and ``answers`` ``(B,)``, ids below ``V``.
        steps, lr: optimiser steps and Adam's learning rate.

    Returns:
        The training loss of every step (nats).
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in range(steps):
        tokens, answers = next_batch()  # (B, L), (B,)
        logits = model(tokens).logits[:, -1]  # (B, V): only the last position is scored
        loss = torch.nn.functional.cross_entropy(logits, answers)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def train_delayed_recall(
    model: torch.nn.Module,
    lag: int,
    steps: int = 300,
    batch_size: int = 32,
    n_symbols: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
    n_eval: int = 1000,
    length: int | None = None,
    max_prefix: int = 0,
) -> float:
    """Train ``model`` on :func:`make_delayed_recall_batch` and return its accuracy on fresh sequences.

    Every step draws a new batch (so there is no fixed training set to memorise); the loop is
    :func:`train_last_position` (the cross-entropy of the logits at the *last* position
    against the answer, Adam, gradients clipped to global norm 1). The evaluation uses
    ``n_eval`` sequences from a separate generator (seed ``seed + 10_000``) and the model in
    eval mode. With ``max_prefix = P > 0`` every
    training batch has its own random length, and the evaluation covers every length
    ``lag + 1 .. lag + 1 + P`` with (nearly) equal counts (:func:`delayed_recall_eval_lengths`),
    so the accuracy is an average over all absolute positions of the answer.

    Args:
        model: maps int64 ids ``(B, L)`` to logits ``(B, L, V)`` with ``V >= n_symbols``
            (e.g. :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` or
            :class:`~transformer_lite.models.recurrent_lm.GRULanguageModel`); trained in place.
            A model with absolute positions needs ``max_len >= lag + 1 + max_prefix``.
        lag, n_symbols, length, max_prefix: the task, as :func:`make_delayed_recall_batch`.
        steps, batch_size, lr: the budget: optimiser steps, sequences per step, Adam's learning rate.
        seed: seeds the training batches (the model's initialisation is the caller's).
        n_eval: number of held-out sequences for the accuracy (``>= max_prefix + 1``).

    Returns:
        The fraction of held-out sequences whose most likely last-position token is the answer.

    Raises:
        ValueError: for a non-positive ``steps`` or ``n_eval``, fewer ``n_eval`` than
            lengths, or as :func:`make_delayed_recall_batch`.
    """
    owner = "train_delayed_recall"
    check_positive_int(owner, "steps", steps)
    check_positive_int(owner, "n_eval", n_eval)
    check_int_at_least(owner, "max_prefix", max_prefix, 0)
    if (
        max_prefix > 0
    ):  # checked before training (the batches would only check it at the first step)
        if length is not None:
            raise ValueError(
                f"{owner}: expected length None when max_prefix > 0 (the length is drawn), "
                f"received length={length!r}, max_prefix={max_prefix}"
            )
        eval_lengths = delayed_recall_eval_lengths(lag, n_eval, max_prefix)
    train_gen = torch.Generator().manual_seed(seed)
    train_last_position(
        model,
        lambda: make_delayed_recall_batch(
            batch_size, lag, n_symbols, length, train_gen, max_prefix
        ),
        steps,
        lr,
    )
    eval_gen = torch.Generator().manual_seed(seed + 10_000)
    if max_prefix == 0:  # one fixed length (the original task, computed as it always was)
        tokens, answers = make_delayed_recall_batch(n_eval, lag, n_symbols, length, eval_gen)
        with torch.no_grad():
            predicted = model(tokens).logits[:, -1].argmax(dim=-1)  # (n_eval,)
        return float((predicted == answers).float().mean())
    correct = 0
    with torch.no_grad():
        for eval_length, count in eval_lengths:
            tokens, answers = make_delayed_recall_batch(
                count, lag, n_symbols, eval_length, eval_gen
            )
            predicted = model(tokens).logits[:, -1].argmax(dim=-1)  # (count,)
            correct += int((predicted == answers).sum())
    return correct / n_eval

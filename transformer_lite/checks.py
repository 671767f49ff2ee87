"""The input checks of the public entry points, written once.

The package checks its inputs where a reader calls it (a model's ``forward``, a
public function) and trusts its own callers inside. Every error is a
``ValueError`` naming what was expected and what was received.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

__all__ = [
    "check_positive_int",
    "check_nonnegative_int",
    "check_int_at_least",
    "check_positive_sizes",
    "check_last_dim",
    "check_token_ids",
    "check_attention_inputs",
    "check_mask",
    "check_dropout",
    "heads_mask",
    "check_projection_inputs",
    "check_heads",
    "check_positions",
    "check_sequences",
    "eval_mode",
]


def check_positive_int(owner: str, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 1``.

    Args:
        owner: the public function or class the message names.
        name: the argument's name.
        n: the value to check.

    Raises:
        ValueError: ``"{owner}: expected {name} to be a positive int, received {n!r}"``.
    """
    if not _is_int_at_least(n, 1):
        raise ValueError(f"{owner}: expected {name} to be a positive int, received {n!r}")


def check_nonnegative_int(owner: str, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 0``, e.g. a number of new tokens.

    Raises:
        ValueError: ``"{owner}: expected an int {name} >= 0, received {n!r}"``.
    """
    if not _is_int_at_least(n, 0):
        raise ValueError(f"{owner}: expected an int {name} >= 0, received {n!r}")


def check_int_at_least(owner: str, name: str, n, minimum: int) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= minimum``.

    For a bound that depends on other arguments, e.g. a maximum length at least the minimum one.

    Raises:
        ValueError: ``"{owner}: expected {name} to be an int >= {minimum}, received {n!r}"``.
    """
    if not _is_int_at_least(n, minimum):
        raise ValueError(f"{owner}: expected {name} to be an int >= {minimum}, received {n!r}")


def _is_int_at_least(n, minimum: int) -> bool:
    """Whether ``n`` is an ``int`` ``>= minimum``; a ``bool`` is not (``True`` would pass as 1)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= minimum


def check_positive_sizes(owner: str, **sizes: int) -> None:
    """Raise ``ValueError`` unless every size is an ``int`` (not a ``bool``) ``>= 1``.

    Raises:
        ValueError: ``"{owner}: expected positive int d_model and d_ff, received 0, 4"`` (the
            names and values of ``sizes``, in order).
    """
    if not all(_is_int_at_least(n, 1) for n in sizes.values()):
        names = list(sizes)
        joined = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        received = ", ".join(repr(n) for n in sizes.values())
        raise ValueError(f"{owner}: expected positive int {joined}, received {received}")


def check_heads(owner: str, d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
    """Raise ``ValueError`` unless ``n_heads`` divides ``d_model`` (and ``n_kv_heads`` divides ``n_heads``).

    Each head gets ``d_head = d_model / n_heads`` features; in grouped-query attention each
    key/value head serves ``n_heads / n_kv_heads`` query heads.

    Raises:
        ValueError: ``"{owner}: d_model must be divisible by n_heads, received d_model=10,
            n_heads=3"``, or the same for ``n_heads`` and ``n_kv_heads``.
    """
    if d_model % n_heads != 0:
        raise ValueError(
            f"{owner}: d_model must be divisible by n_heads, received d_model={d_model}, "
            f"n_heads={n_heads}"
        )
    if n_kv_heads is not None and n_heads % n_kv_heads != 0:
        raise ValueError(
            f"{owner}: n_heads must be divisible by n_kv_heads, received n_heads={n_heads}, "
            f"n_kv_heads={n_kv_heads}"
        )


def check_positions(owner: str, offset: int, length: int, max_len: int) -> None:
    """Raise ``ValueError`` unless positions ``offset .. offset + length - 1`` lie below ``max_len``.

    Raises:
        ValueError: ``"{owner}: positions 8..11 requested, but max_len=10 allows positions 0..9
            only"``.
    """
    check_nonnegative_int(owner, "offset", offset)
    if offset + length > max_len:
        raise ValueError(
            f"{owner}: positions {offset}..{offset + length - 1} requested, but "
            f"max_len={max_len} allows positions 0..{max_len - 1} only"
        )


def check_last_dim(owner: str, x: Tensor, d: int) -> None:
    """Raise ``ValueError`` unless ``x`` has shape ``(..., d)``.

    Raises:
        ValueError: ``"{owner}: expected input of shape (..., d), received (...)"``.
    """
    if x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(f"{owner}: expected input of shape (..., {d}), received {tuple(x.shape)}")


def check_token_ids(owner: str, name: str, ids, vocab_size: int, min_len: int = 0) -> None:
    """Raise ``ValueError`` unless ``ids`` is a 2-D integer tensor ``(B, L)`` with values in ``[0, vocab_size)``.

    Args:
        owner: the public function or class the message names.
        name: the argument's name (``"input_ids"``, ``"src_ids"``, ...).
        ids: the value to check.
        vocab_size: the number of token ids V.
        min_len: the smallest length L accepted.

    Raises:
        ValueError: if ``ids`` is not a tensor, is not 2-D, is floating or boolean, has fewer than
            ``min_len`` positions, or holds an id outside ``[0, vocab_size)``.
    """
    if (
        not isinstance(ids, Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.dtype == torch.bool
    ):
        received = (
            f"{tuple(ids.shape)} {ids.dtype}" if isinstance(ids, Tensor) else type(ids).__name__
        )
        raise ValueError(f"{owner}: expected integer {name} of shape (B, L), received {received}")
    if ids.shape[1] < min_len:
        raise ValueError(
            f"{owner}: expected {name} with at least {min_len} position(s), received {tuple(ids.shape)}"
        )
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{owner}: token ids must lie in [0, {vocab_size}), received min {int(ids.min())}, "
            f"max {int(ids.max())} in {name}"
        )


def check_attention_inputs(
    owner: str, query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None
) -> torch.Size:
    """Validate query/key/value (and the mask, if any) and return their broadcast batch shape ``(...)``.

    The checks of the two public attention functions,
    :func:`~transformer_lite.nn.attention.scaled_dot_product_attention` and
    :func:`~transformer_lite.nn.efficient_attention.memory_efficient_attention`; ``owner`` names
    the function in the messages.

    Raises:
        ValueError: if a tensor is missing or has fewer than 2 dimensions, is not floating, the three
            dtypes differ, query and key differ in ``d_k``, key and value in ``S``, the batch
            dimensions do not broadcast, or the mask is not as :func:`check_mask` requires.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.dim() < 2:
            got = f"shape {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(
                f"{owner}: expected {name} of shape (..., len, dim) with at least 2 dimensions, "
                f"received {got}"
            )
        if not t.is_floating_point():
            raise ValueError(f"{owner}: expected a floating {name}, received dtype {t.dtype}")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(
            f"{owner}: expected query, key and value of one dtype, received "
            f"{query.dtype}, {key.dtype}, {value.dtype}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"{owner}: query and key must share d_k (last dimension): expected key shape "
            f"(..., S, {query.shape[-1]}), received {tuple(key.shape)} for query {tuple(query.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"{owner}: key and value must share S (second-to-last dimension): "
            f"expected value shape (..., {key.shape[-2]}, d_v), received {tuple(value.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{owner}: batch dimensions do not broadcast: query "
            f"{tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        ) from None
    if attn_mask is not None:
        check_mask(attn_mask, batch, query.shape[-2], key.shape[-2])
    return batch


def check_mask(attn_mask, batch_shape: torch.Size, L: int, S: int) -> None:
    """Raise ``ValueError`` unless ``attn_mask`` is a bool or float tensor broadcasting to ``(..., L, S)``.

    ``batch_shape`` is the ``(...)`` of the queries; a float mask may hold finite values and
    ``-inf``, never NaN or ``+inf``.

    Raises:
        ValueError: ``"attn_mask: expected ..."``, naming the shape or dtype expected and the
            one received (for a shape, also which leading dimensions broadcast).
    """
    if not isinstance(attn_mask, Tensor):
        raise ValueError(
            f"attn_mask: expected a bool or float Tensor, received {type(attn_mask).__name__}"
        )
    target = (*batch_shape, L, S)
    try:
        ok = torch.broadcast_shapes(attn_mask.shape, target) == torch.Size(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask: expected a shape that broadcasts to (..., L, S) = {target} (the "
            f"queries' leading dimensions {tuple(batch_shape)}, e.g. (B, H), then L = {L} queries "
            f"and S = {S} keys), received {tuple(attn_mask.shape)}"
        )
    if attn_mask.is_floating_point():
        if torch.isnan(attn_mask).any() or (attn_mask == float("inf")).any():
            raise ValueError(
                "attn_mask: a float mask may hold finite values and -inf, received NaN or +inf"
            )
    elif attn_mask.dtype != torch.bool:
        raise ValueError(
            f"attn_mask: expected dtype torch.bool (True = may attend) or a floating dtype "
            f"(added to the scores), received {attn_mask.dtype}"
        )


def heads_mask(owner: str, attn_mask, n_heads: int):
    """Check the rank of a module's ``attn_mask`` and give a per-sequence mask its head axis.

    The attention modules and blocks take ``(L, S)``, ``(B, L, S)`` (one mask per sequence,
    shared by the heads) or ``(B, 1|H, L, S)``. Returns ``(B, L, S)`` as ``(B, 1, L, S)`` and
    any other mask as given (``None``, or a non-tensor that :func:`check_mask` then refuses);
    whether it broadcasts against the scores is :func:`check_mask`'s to check.

    Raises:
        ValueError: ``"{owner}: expected attn_mask of shape (L, S), (B, L, S), (B, 1, L, S) or
            (B, 4, L, S), received (3,)"``.
    """
    if not isinstance(attn_mask, Tensor):
        return attn_mask
    dims = attn_mask.dim()
    if dims not in (2, 3, 4) or (dims == 4 and attn_mask.shape[1] not in (1, n_heads)):
        raise ValueError(
            f"{owner}: expected attn_mask of shape (L, S), (B, L, S), (B, 1, L, S) or "
            f"(B, {n_heads}, L, S), received {tuple(attn_mask.shape)}"
        )
    return attn_mask.unsqueeze(1) if dims == 3 else attn_mask


def check_dropout(owner: str, p) -> None:
    """Raise ``ValueError`` unless ``p`` is a dropout probability in ``[0, 1)``.

    ``p = 1`` would zero every weight, and the inverted scaling ``1 / (1 - p)`` divides by zero.

    Raises:
        ValueError: ``"{owner}: expected a dropout probability 0 <= p < 1, received {p!r}"``.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"{owner}: expected a dropout probability 0 <= p < 1, received {p!r}")


def check_sequences(owner: str, d_model: int, **tensors: Tensor) -> None:
    """Raise ``ValueError`` unless every tensor is ``(B, len, d_model)``, with one batch size ``B``.

    The lengths may differ (queries and keys, target and memory). The message names each
    tensor by its keyword: ``check_sequences("DecoderBlock", 8, x=x, memory=memory)``.

    Raises:
        ValueError: ``"{owner}: expected memory of shape (B, len, 8), received (2, 3)"``, or
            ``"{owner}: expected one batch size B, received x (2, 5, 8), memory (3, 4, 8)"``.
    """
    for name, t in tensors.items():
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != d_model:
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(
                f"{owner}: expected {name} of shape (B, len, {d_model}), received {got}"
            )
    batch = next(iter(tensors.values())).shape[0]
    if any(t.shape[0] != batch for t in tensors.values()):  # != also works on traced sizes
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(f"{owner}: expected one batch size B, received {shapes}")


def check_projection_inputs(
    owner: str, d_model: int, query: Tensor, key: Tensor, value: Tensor
) -> None:
    """Raise ``ValueError`` unless query ``(B, L, d_model)``, key and value ``(B, S, d_model)`` fit together.

    The checks of :class:`~transformer_lite.nn.attention.MultiHeadAttention`'s inputs, before
    its projections.

    Raises:
        ValueError: as :func:`check_sequences`, or ``"{owner}: expected key and value of one
            length S, received key (2, 4, 8) and value (2, 3, 8)"``.
    """
    check_sequences(owner, d_model, query=query, key=key, value=value)
    if key.shape[1] != value.shape[1]:
        raise ValueError(
            f"{owner}: expected key and value of one length S, received key "
            f"{tuple(key.shape)} and value {tuple(value.shape)}"
        )


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode (dropout off) for the ``with`` block, then restore its mode.

    The previous mode comes back even if the block raises (``try``/``finally``).

    Yields:
        ``model``.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)

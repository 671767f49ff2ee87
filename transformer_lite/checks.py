"""The input checks of the public entry points, written once.

The package checks its inputs where a reader calls it (a model's ``forward`` and ``generate``, a
public function, a module the chapters call) and trusts its own callers inside. Every error is a
``ValueError`` naming what was expected and what was received. A message starts with its owner:
the ``owner`` argument of every check is the function, class, module or bound method called (its
name is read from it, ``type(self).__name__`` for a module), or a name.

The checks read shapes, dtypes and Python numbers, never a tensor's values inside a ``forward``
(that would stop the device and ``torch.export``). Values are checked where the data enters:
token and position ids by the embedding lookup itself (:func:`embed`), a float mask by the public
attention functions (:func:`check_attention_inputs`), a padding marker by
:func:`~transformer_lite.nn.masks.padding_mask`.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "owner_name",
    "shape_dtype",
    "check_positive_int",
    "check_nonnegative_int",
    "check_int_at_least",
    "check_positive_sizes",
    "check_choice",
    "check_type",
    "check_last_dim",
    "check_shape",
    "check_token_ids",
    "embed",
    "check_marker",
    "check_attention_inputs",
    "check_mask",
    "check_heads_mask",
    "check_dropout",
    "check_projection_inputs",
    "check_heads",
    "check_positions",
    "check_sequences",
    "eval_mode",
]


def owner_name(owner) -> str:
    """The name a message starts with: ``owner`` itself if a string, else the name of the function,
    class or bound method (``MultiHeadAttention.from_torch``), or the class of an object."""
    if isinstance(owner, str):
        return owner
    if isinstance(owner, types.MethodType):  # a bound (class) method: its class and its name
        bound = owner.__self__
        return f"{owner_name(bound if isinstance(bound, type) else type(bound))}.{owner.__name__}"
    return owner.__name__ if isinstance(owner, (type, types.FunctionType)) else type(owner).__name__


def _is_int_at_least(n, minimum: int) -> bool:
    """Whether ``n`` is an ``int`` ``>= minimum``; a ``bool`` is not (``True`` would pass as 1)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= minimum


def check_int_at_least(owner, name: str, n, minimum: int, expected: str = "") -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= minimum``; ``expected``
    words the requirement (default ``"{name} to be an int >= {minimum}"``)."""
    if not _is_int_at_least(n, minimum):
        expected = expected or f"{name} to be an int >= {minimum}"
        raise ValueError(f"{owner_name(owner)}: expected {expected}, received {n!r}")


def check_positive_int(owner, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 1``."""
    check_int_at_least(owner, name, n, 1, f"{name} to be a positive int")


def check_nonnegative_int(owner, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 0``, e.g. an offset."""
    check_int_at_least(owner, name, n, 0, f"an int {name} >= 0")


def check_positive_sizes(owner, **sizes: int) -> None:
    """Raise ``ValueError`` unless every size is an ``int`` (not a ``bool``) ``>= 1``; the message
    names them all: ``"F: expected positive int d_model and d_ff, received 4, 0"``."""
    if not all(_is_int_at_least(n, 1) for n in sizes.values()):
        names = list(sizes)
        joined = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        received = ", ".join(repr(n) for n in sizes.values())
        raise ValueError(
            f"{owner_name(owner)}: expected positive int {joined}, received {received}"
        )


def check_choice(owner, name: str, value, allowed) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed`` (an option such as an activation)."""
    if value not in allowed:
        options = [repr(a) for a in allowed]
        joined = ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]
        raise ValueError(f"{owner_name(owner)}: expected {name} {joined}, received {value!r}")


def check_type(owner, value, expected: type, detail: str = "") -> None:
    """Raise ``ValueError`` unless ``value`` is an ``expected`` (e.g. the torch module ``from_torch`` reads)."""
    if not isinstance(value, expected):
        prefix = "nn." if expected.__module__.startswith("torch.nn") else ""
        raise ValueError(
            f"{owner_name(owner)}: expected {prefix}{expected.__name__}{detail}, "
            f"received {type(value).__name__}"
        )


def check_heads(owner, d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
    """Raise ``ValueError`` unless ``n_heads`` divides ``d_model`` (and ``n_kv_heads`` divides
    ``n_heads``): each head gets ``d_model / n_heads`` features, and in grouped-query attention each
    key/value head serves ``n_heads / n_kv_heads`` query heads."""
    if d_model % n_heads != 0:
        raise ValueError(
            f"{owner_name(owner)}: d_model must be divisible by n_heads, received "
            f"d_model={d_model}, n_heads={n_heads}"
        )
    if n_kv_heads is not None and n_heads % n_kv_heads != 0:
        raise ValueError(
            f"{owner_name(owner)}: n_heads must be divisible by n_kv_heads, received "
            f"n_heads={n_heads}, n_kv_heads={n_kv_heads}"
        )


def check_positions(owner, offset: int, length: int, max_len: int) -> None:
    """Raise ``ValueError`` unless positions ``offset .. offset + length - 1`` lie in ``[0, max_len)``."""
    check_nonnegative_int(owner, "offset", offset)
    if offset + length > max_len:
        raise ValueError(
            f"{owner_name(owner)}: positions {offset}..{offset + length - 1} requested, but "
            f"max_len={max_len} allows positions 0..{max_len - 1} only"
        )


def check_dropout(owner, p) -> None:
    """Raise ``ValueError`` unless ``p`` is a dropout probability in ``[0, 1)`` (``p = 1`` would zero
    every weight, and the inverted scaling ``1 / (1 - p)`` divide by zero)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(
            f"{owner_name(owner)}: expected a dropout probability 0 <= p < 1, received {p!r}"
        )


def _shape(t) -> str:
    """A tensor's shape as a tuple, or the type of a non-tensor, for a message."""
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def shape_dtype(t) -> str:
    """A tensor's shape and dtype, e.g. ``(2, 5) torch.bool``, or the type of a non-tensor, for a message."""
    return f"{tuple(t.shape)} {t.dtype}" if isinstance(t, Tensor) else type(t).__name__


def check_last_dim(owner, x, d: int) -> None:
    """Raise ``ValueError`` unless ``x`` is a tensor of shape ``(..., d)``."""
    if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(
            f"{owner_name(owner)}: expected input of shape (..., {d}), received {_shape(x)}"
        )


def check_shape(owner, name: str, t, expected: tuple, layout: str = "", like: Tensor | None = None):
    """Raise ``ValueError`` unless ``t`` is a tensor of shape ``expected`` (and of ``like``'s dtype and
    device); ``layout`` names the axes in the message, e.g. ``"(B, hidden_size)"``."""
    if not isinstance(t, Tensor) or tuple(t.shape) != tuple(expected):
        shape = f"{layout} = {tuple(expected)}" if layout else str(tuple(expected))
        raise ValueError(
            f"{owner_name(owner)}: expected {name} of shape {shape}, received {_shape(t)}"
        )
    if like is not None and (t.dtype != like.dtype or t.device != like.device):
        raise ValueError(
            f"{owner_name(owner)}: expected {name} of dtype {like.dtype} on {like.device}, "
            f"received {t.dtype} on {t.device}"
        )


def check_sequences(owner, d_model: int, min_len: int = 0, **tensors) -> None:
    """Raise ``ValueError`` unless every tensor is a floating ``(B, len, d_model)``, with one ``B``
    (and ``len >= min_len``).

    The lengths may differ (queries and keys, target and memory). The message names each tensor by
    its keyword: ``check_sequences(self, 8, x=x, memory=memory)``.
    """
    for name, t in tensors.items():
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != d_model:
            raise ValueError(
                f"{owner_name(owner)}: expected {name} of shape (B, len, {d_model}), "
                f"received {_shape(t)}"
            )
        if t.shape[1] < min_len:
            raise ValueError(
                f"{owner_name(owner)}: expected {name} with at least {min_len} position(s), "
                f"received {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise ValueError(
                f"{owner_name(owner)}: expected a floating {name}, received dtype {t.dtype}"
            )
    batch = next(iter(tensors.values())).shape[0]
    if any(t.shape[0] != batch for t in tensors.values()):
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(f"{owner_name(owner)}: expected one batch size B, received {shapes}")


def check_projection_inputs(owner, d_model: int, query, key, value) -> None:
    """Raise ``ValueError`` unless query ``(B, L, d_model)``, key and value ``(B, S, d_model)`` fit
    together (as :func:`check_sequences`, and one length ``S`` for key and value)."""
    check_sequences(owner, d_model, query=query, key=key, value=value)
    if key.shape[1] != value.shape[1]:
        raise ValueError(
            f"{owner_name(owner)}: expected key and value of one length S, received key "
            f"{tuple(key.shape)} and value {tuple(value.shape)}"
        )


def check_token_ids(owner, name: str, ids, vocab_size: int | None = None, min_len: int = 0) -> None:
    """Raise ``ValueError`` unless ``ids`` is a 2-D integer tensor ``(B, L)``, ``L >= min_len``.

    With ``vocab_size``, also unless every id lies in ``[0, vocab_size)``: that reads the ids, the
    check of data where it enters (a data set, a prompt). A model's ``forward`` leaves the range to
    the embedding lookup, :func:`embed`.
    """
    if (
        not isinstance(ids, Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.dtype == torch.bool
    ):
        raise ValueError(
            f"{owner_name(owner)}: expected integer {name} of shape (B, L), received {shape_dtype(ids)}"
        )
    if ids.shape[1] < min_len:
        raise ValueError(
            f"{owner_name(owner)}: expected {name} with at least {min_len} position(s), "
            f"received {tuple(ids.shape)}"
        )
    if (
        vocab_size is not None
        and ids.numel()
        and not 0 <= int(ids.min()) <= int(ids.max()) < vocab_size
    ):
        _raise_out_of_range(owner, name, ids, vocab_size)


def _raise_out_of_range(owner, name: str, ids: Tensor, n: int) -> None:
    kind = "token ids" if "position" not in name else "positions"
    raise ValueError(
        f"{owner_name(owner)}: {kind} must lie in [0, {n}), received min {int(ids.min())}, "
        f"max {int(ids.max())} in {name}"
    )


def embed(owner, name: str, table: nn.Embedding | Tensor, ids, min_len: int = 0) -> Tensor:
    """The rows of ``table`` (an ``nn.Embedding`` or an ``(n, D)`` tensor) at ``ids`` ``(B, L)``: ``(B, L, D)``.

    The entry check of token and position ids: :func:`check_token_ids` for the shape and dtype,
    and the lookup itself (``nn.Embedding``, ``F.embedding``) for the range ``[0, n)``: it refuses
    an id outside, where ``table[ids]`` would wrap a negative one. No separate pass reads the ids
    (no host sync, nothing ``torch.export`` cannot follow); only a refused lookup reads them, for
    the message.
    """
    check_token_ids(owner, name, ids, min_len=min_len)
    try:
        return table(ids) if isinstance(table, nn.Module) else F.embedding(ids, table)
    except IndexError:  # "index out of range in self"
        n = table.num_embeddings if isinstance(table, nn.Embedding) else table.shape[0]
        _raise_out_of_range(owner, name, ids, n)


def check_marker(owner, name: str, valid, shape: tuple) -> None:
    """Raise ``ValueError`` unless ``valid`` is a bool or integer padding marker of ``shape`` (the
    ids'), ``True`` or nonzero at a real token. A model reads it as ``valid != 0`` (no value is
    checked inside a ``forward``; :func:`~transformer_lite.nn.masks.padding_mask` checks a marker of
    integers for 0/1)."""
    if (
        not isinstance(valid, Tensor)
        or tuple(valid.shape) != tuple(shape)
        or valid.is_floating_point()
    ):
        got = f"{_shape(valid)} {valid.dtype}" if isinstance(valid, Tensor) else _shape(valid)
        raise ValueError(
            f"{owner_name(owner)}: expected {name} of shape {tuple(shape)} (like the ids; True = "
            f"real token), bool or integer, received {got}"
        )


def check_attention_inputs(owner, query, key, value, attn_mask=None) -> torch.Size:
    """Validate query ``(..., L, d_k)``, key ``(..., S, d_k)``, value ``(..., S, d_v)`` and the mask, if
    any; return their broadcast batch shape ``(...)``.

    The door of the two public attention functions, where a reader's own mask enters: a float mask
    may hold finite values and ``-inf``, and only here are its values read (NaN or ``+inf`` would
    give NaN weights). The package's modules check shapes only (:func:`check_heads_mask`).
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.dim() < 2:
            got = f"shape {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(
                f"{owner_name(owner)}: expected {name} of shape (..., len, dim) with at least 2 "
                f"dimensions, received {got}"
            )
        if not t.is_floating_point():
            raise ValueError(
                f"{owner_name(owner)}: expected a floating {name}, received dtype {t.dtype}"
            )
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(
            f"{owner_name(owner)}: expected query, key and value of one dtype, received "
            f"{query.dtype}, {key.dtype}, {value.dtype}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"{owner_name(owner)}: query and key must share d_k (last dimension): expected key "
            f"shape (..., S, {query.shape[-1]}), received {tuple(key.shape)} for query "
            f"{tuple(query.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"{owner_name(owner)}: key and value must share S (second-to-last dimension): "
            f"expected value shape (..., {key.shape[-2]}, d_v), received {tuple(value.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{owner_name(owner)}: batch dimensions do not broadcast: query {tuple(query.shape)}, "
            f"key {tuple(key.shape)}, value {tuple(value.shape)}"
        ) from None
    if attn_mask is not None:
        check_mask(owner, attn_mask, batch, query.shape[-2], key.shape[-2])
        if attn_mask.is_floating_point() and not bool(
            (attn_mask < float("inf")).all()
        ):  # NaN, +inf
            raise ValueError(
                f"{owner_name(owner)}: attn_mask: a float mask may hold finite values and -inf, "
                "received NaN or +inf"
            )
    return batch


def check_mask(owner, attn_mask, batch_shape: torch.Size, L: int, S: int) -> None:
    """Raise ``ValueError`` unless ``attn_mask`` is a bool or float tensor broadcasting to
    ``(*batch_shape, L, S)``."""
    target = (*batch_shape, L, S)
    if not isinstance(attn_mask, Tensor):
        raise ValueError(
            f"{owner_name(owner)}: attn_mask: expected a bool or float Tensor, received "
            f"{type(attn_mask).__name__}"
        )
    try:
        ok = torch.broadcast_shapes(attn_mask.shape, target) == torch.Size(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{owner_name(owner)}: attn_mask: expected a shape that broadcasts to (..., L, S) = "
            f"{target} (the queries' leading dimensions {tuple(batch_shape)}, e.g. (B, H), then "
            f"L = {L} queries and S = {S} keys), received {tuple(attn_mask.shape)}"
        )
    if not (attn_mask.dtype == torch.bool or attn_mask.is_floating_point()):
        raise ValueError(
            f"{owner_name(owner)}: attn_mask: expected dtype torch.bool (True = may attend) or a "
            f"floating dtype (added to the scores), received {attn_mask.dtype}"
        )


def check_heads_mask(owner, attn_mask, n_heads: int, B: int, L: int, S: int) -> None:
    """Raise ``ValueError`` unless ``attn_mask`` fits a module's ``n_heads`` heads, ``L`` queries and
    ``S`` keys.

    The attention modules and blocks take ``(L, S)``, ``(B, L, S)`` (one mask per sequence, shared
    by the heads) or ``(B|1, 1|H, L, S)``, bool or float (shapes and dtype checked, values not);
    :func:`~transformer_lite.nn.masks.attention_bias` gives a ``(B, L, S)`` one its head axis.
    """
    if attn_mask is None:
        return
    dims = attn_mask.dim() if isinstance(attn_mask, Tensor) else 2
    if dims not in (2, 3, 4) or (dims == 4 and attn_mask.shape[1] not in (1, n_heads)):
        raise ValueError(
            f"{owner_name(owner)}: expected attn_mask of shape (L, S), (B, L, S), (B, 1, L, S) "
            f"or (B, {n_heads}, L, S), received {tuple(attn_mask.shape)}"
        )
    attn_mask = attn_mask.unsqueeze(1) if dims == 3 else attn_mask  # (B, L, S) -> (B, 1, L, S)
    check_mask(owner, attn_mask, torch.Size((B, n_heads)), L, S)


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode (dropout off) for the ``with`` block, then restore its mode, also
    when the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)

"""Attention masks: causal (look-ahead) masks, padding masks, and conversions.

One convention everywhere in this package, the same as
:func:`torch.nn.functional.scaled_dot_product_attention`:

* a **boolean** mask has ``True`` where a query **may attend** to a key and
  ``False`` where it may not;
* a **float** mask is **added** to the attention scores before the softmax
  (the :math:`M` in :math:`\\mathrm{softmax}(QK^\\top/\\sqrt{d_k} + M)V`);
  ``-inf`` forbids a key, ``0`` leaves it alone.

Beware: :class:`torch.nn.MultiheadAttention` and the ``nn.Transformer*``
layers use the **opposite** boolean polarity (``True`` = blocked). Convert with
``~mask`` when handing one of our boolean masks to them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import check_positive_int

__all__ = ["causal_mask", "padding_mask", "bool_to_additive_mask", "attention_bias"]


def causal_mask(L: int, S: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal (look-ahead) mask: query ``i`` may attend to keys up to its own position.

    Source: Vaswani et al. (2017), "Attention Is All You Need", Sec. 3.2.3
    ("masking out ... all values in the input of the softmax which correspond
    to illegal connections").

    When there are more keys than queries (``S > L``), as in a decoding step
    that reuses a key/value cache, the mask is aligned **bottom-right**: the
    ``L`` queries are the *last* ``L`` positions of the sequence, so query ``i``
    sits at absolute position ``S - L + i`` and may attend to keys
    ``0 .. S - L + i``. (PyTorch's own ``is_causal=True`` in
    ``F.scaled_dot_product_attention`` aligns top-left instead, which is only
    the same when ``L == S``.) When ``S < L`` the first ``L - S`` queries have
    no key they may attend to: their rows are all ``False``.

    Args:
        L: number of queries (query length), ``L >= 1``.
        S: number of keys (key length), ``S >= 1``; defaults to ``L``.
        device: device of the returned tensor.

    Returns:
        Bool tensor of shape ``(L, S)``; ``True`` = may attend
        (on and below the bottom-right-aligned diagonal).

    Raises:
        ValueError: for a size that is not a positive int.
    """
    S = L if S is None else S
    for name, n in (("L", L), ("S", S)):
        check_positive_int(causal_mask, name, n)
    return _causal(L, S, device)


def _causal(L: int, S: int, device: torch.device | str | None = None) -> Tensor:
    """:func:`causal_mask` of checked (or traced) sizes, as :func:`attention_bias` builds it."""
    ones = torch.ones(L, S, dtype=torch.bool, device=device)
    # Keep j <= i + (S - L): the diagonal shifted right by S - L (bottom-right alignment).
    return torch.tril(ones, diagonal=S - L)


def padding_mask(valid: Tensor) -> Tensor:
    """Boolean key-padding mask from a ``(B, S)`` marker of real (non-padding) tokens.

    Args:
        valid: bool or 0/1 integer tensor of shape ``(B, S)``; ``True``/``1``
            marks a real token, ``False``/``0`` a padding token (the
            ``attention_mask`` of Hugging Face tokenizers has this meaning).

    Returns:
        Bool tensor of shape ``(B, 1, 1, S)`` (``True`` = may attend), which
        broadcasts against scores of shape ``(B, H, L, S)``: every query of
        example ``b`` may attend to the real keys of example ``b`` only. For
        scores of shape ``(B, L, S)`` (no head axis) use ``mask[:, 0]``.

    Raises:
        ValueError: for a ``valid`` that is not a ``(B, S)`` marker of bools or 0/1 integers.
    """
    ok = valid.dim() == 2 and (valid.dtype == torch.bool or not valid.is_floating_point())
    if not ok or (valid.dtype != torch.bool and not bool(((valid == 0) | (valid == 1)).all())):
        raise ValueError(
            f"padding_mask: expected valid of shape (B, S), a bool tensor or integers 0/1, "
            f"received shape {tuple(valid.shape)} dtype {valid.dtype}"
        )
    return (valid != 0)[:, None, None, :]  # (B, 1, 1, S)


def bool_to_additive_mask(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Convert a boolean mask (``True`` = may attend) into the equivalent float mask.

    Args:
        mask: bool tensor of any shape.
        dtype: floating dtype of the result.

    Returns:
        Float tensor of the same shape: ``0.0`` where ``mask`` is ``True``,
        ``-inf`` where it is ``False``. Adding it to the scores before the
        softmax gives exactly zero weight to the forbidden keys.

    Raises:
        ValueError: for a ``mask`` that is not bool or a ``dtype`` that is not floating.
    """
    if mask.dtype != torch.bool or not dtype.is_floating_point:
        raise ValueError(
            f"bool_to_additive_mask: expected a bool mask and a floating dtype, received "
            f"a mask of dtype {mask.dtype} and dtype {dtype}"
        )
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill(~mask, float("-inf"))


def attention_bias(
    attn_mask: Tensor | None,
    is_causal: bool,
    L: int,
    S: int,
    *,
    dtype: torch.dtype,
    device: torch.device | str | None = None,
    heads: bool = False,
) -> Tensor | None:
    """The additive ``M`` of ``softmax(Q K^T / sqrt(d_k) + M) V``: the one place a mask changes form.

    Source: Vaswani et al. (2017), Sec. 3.2.3 (forbidden scores set to -inf before the softmax).

    A bool ``attn_mask`` (``True`` = may attend) becomes ``0``/``-inf``
    (:func:`bool_to_additive_mask`), a float one is cast to ``dtype`` as given; with
    ``is_causal`` the bottom-right-aligned causal mask (:func:`causal_mask`) is added. A single
    query (``L = 1``) is the last position and may see every key: it gets no causal part.
    The shapes and dtypes were checked by the caller (the public entry points).

    Args:
        attn_mask: ``None`` or a bool/float mask broadcasting to the scores ``(..., L, S)``.
        is_causal: add the causal mask.
        L, S: numbers of queries and keys.
        dtype: the dtype of the scores (the compute dtype).
        device: the device of the causal mask.
        heads: the scores have a head axis ``(B, H, L, S)``: a per-sequence mask ``(B, L, S)``
            becomes ``(B, 1, L, S)``, the same for every head (the attention modules' convention).

    Returns:
        ``None`` when nothing is masked, else a float tensor broadcasting to the scores:
        ``(B|1, H|1, L|1, S|1)`` with ``heads``, ``(..., L|1, S|1)`` without.
    """
    bias = None
    if attn_mask is not None:
        if heads and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(1)  # (B, L, S) -> (B, 1, L, S)
        bias = (
            bool_to_additive_mask(attn_mask, dtype)
            if attn_mask.dtype == torch.bool
            else attn_mask.to(dtype)
        )
    if is_causal and L > 1:
        # (L, S): 0 on and below the bottom-right-aligned diagonal, -inf above
        causal = bool_to_additive_mask(_causal(L, S, device), dtype)
        bias = causal if bias is None else bias + causal
    return bias

"""Attention, written out step by step: the function and the module.

:func:`scaled_dot_product_attention`; :class:`MultiHeadAttention`, which is also grouped-query
and multi-query attention (``n_kv_heads``).

Source: Vaswani et al. (2017), "Attention Is All You Need", Sec. 3.2.1, Eq. (1),
with an additive mask ``M`` inside the softmax (the paper's Sec. 3.2.3 masks by
setting forbidden scores to -inf)

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

and Sec. 3.2.2 (multi-head attention). ``M`` is optional (0 = allowed,
-inf = forbidden).
Masks follow the package convention of :mod:`transformer_lite.nn.masks`:
boolean ``True`` = may attend.

Grouped-query attention: Ainslie et al.
(2023), "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
Checkpoints", Sec. 2.2: the ``n_heads`` query heads are
divided into ``n_kv_heads`` groups, and the heads of one group share a single
key head and value head. ``n_kv_heads == n_heads`` is ordinary multi-head
attention (Vaswani et al., 2017, Sec. 3.2.2); ``n_kv_heads == 1`` is multi-query
attention (Shazeer, 2019). Fewer key/value heads make the key/value cache of
autoregressive decoding ``n_heads / n_kv_heads`` times smaller.

Query head ``h`` uses key/value head ``h // (n_heads // n_kv_heads)``, the
convention of Hugging Face's ``repeat_kv`` and of llama.cpp.

Decoding with a cache: the keys and values of the tokens already processed are
kept (after RoPE), the ``L`` new tokens sit at positions ``S_past .. S_past + L - 1``,
and the causal mask between the ``L`` queries and the ``S = S_past + L`` keys is
aligned bottom-right (:func:`~transformer_lite.nn.masks.causal_mask`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import (
    check_attention_inputs,
    check_dropout,
    check_heads,
    check_heads_mask,
    check_positive_sizes,
    check_projection_inputs,
    check_sequences,
    check_shape,
)
from ..outputs import AttentionOutput, KeyValue
from .dtypes import compute_dtype
from .masks import attention_bias
from .positional import RotaryEmbedding

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention"]


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, returning the output **and** the attention weights.

    Computes ``softmax(Q K^T / sqrt(d_k) + M) V`` step by step (Vaswani et al.,
    2017, Eq. 1), not through PyTorch's fused kernel, so that every
    intermediate can be read.

    Args:
        query: ``(..., L, d_k)`` floating tensor (L = query length).
        key: ``(..., S, d_k)`` (S = key length), same dtype as ``query``.
        value: ``(..., S, d_v)``, same dtype as ``query``.
        attn_mask: optional mask broadcastable to ``(..., L, S)``. Bool:
            ``True`` = may attend (as in ``F.scaled_dot_product_attention``;
            note ``nn.MultiheadAttention`` uses the opposite polarity). Float:
            added to the scores (``-inf`` forbids; NaN and ``+inf`` are refused).
        is_causal: if True, also apply :func:`~transformer_lite.nn.masks.causal_mask`
            ``(L, S)``, aligned bottom-right when ``S > L``; combined with
            ``attn_mask`` if both are given (a key must be allowed by both).
        dropout_p: probability of zeroing an attention weight (applied to the
            weights that multiply ``V``; always applied when > 0, as in
            ``F.scaled_dot_product_attention``; pass 0.0 at evaluation).

    Returns:
        ``(output, weights)``: output ``(..., L, d_v)`` and weights ``(..., L, S)``,
        both in the input dtype. ``weights`` are the softmax probabilities
        *before* dropout; each row sums to 1 over the allowed keys. A query
        whose keys are all forbidden gets an all-zero row of weights and a
        zero output (not NaN), and zero gradients in the backward pass.

    Numerics:
        The softmax (``torch.softmax``) subtracts each row's maximum before
        exponentiating, so large logits do not overflow. float16/bfloat16
        inputs are computed in float32 and the results cast back.

    Raises:
        ValueError: for inputs, a mask or a ``dropout_p`` other than the above.
    """
    check_attention_inputs(scaled_dot_product_attention, query, key, value, attn_mask)
    check_dropout(scaled_dot_product_attention, dropout_p)
    L, S = query.shape[-2], key.shape[-2]
    bias = attention_bias(
        attn_mask, is_causal, L, S, dtype=compute_dtype(query.dtype), device=query.device
    )
    return _attention(query, key, value, bias, dropout_p)


def _attention(
    query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, dropout_p: float
) -> tuple[Tensor, Tensor]:
    """The steps of :func:`scaled_dot_product_attention`, for callers whose inputs are checked and
    whose mask is already the additive ``bias`` of :func:`~transformer_lite.nn.masks.attention_bias`
    (in the compute dtype)."""
    in_dtype = query.dtype
    dtype = compute_dtype(in_dtype)
    q, k, v = query.to(dtype), key.to(dtype), value.to(dtype)
    d_k = q.shape[-1]

    # 1. Scores: every query against every key, scaled by 1/sqrt(d_k). Scaling the queries
    #    (L x d_k numbers) costs less than scaling the scores (L x S) and gives the same result.
    scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., L, S)

    # 2. Masking: add M (0 = allowed, -inf = forbidden).
    if bias is not None:
        scores = scores + bias  # (..., L, S)

    # 3. Softmax over the keys. torch.softmax subtracts each row's maximum before exponentiating,
    #    so large logits do not overflow. A row whose keys are all forbidden would be
    #    exp(-inf) / sum(exp(-inf)) = 0/0 = NaN: such rows are given zero scores before the
    #    softmax and zero weights after it, which also keeps their gradients at zero.
    if bias is not None:
        blocked = torch.isneginf(bias).all(dim=-1, keepdim=True)  # (..., L, 1), from the small mask
        scores = scores.masked_fill(blocked, 0.0)
    weights = torch.softmax(scores, dim=-1)  # (..., L, S), each row sums to 1 over allowed keys
    if bias is not None:
        weights = weights.masked_fill(blocked, 0.0)

    # 4. Weighted sum of the values.
    dropped = F.dropout(weights, p=dropout_p, training=True) if dropout_p > 0 else weights
    output = dropped @ v  # (..., L, d_v)
    return output.to(in_dtype), weights.to(in_dtype)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017, Sec. 3.2.2), batch-first; grouped-query when
    ``n_kv_heads < n_heads`` (Ainslie et al., 2023, Sec. 2.2), multi-query when ``n_kv_heads = 1``
    (Shazeer, 2019).

    ``MultiHead(Q, K, V) = Concat(head_0, ..., head_{H-1}) W^O`` with
    ``head_h = Attention(Q W_h^Q, K W_h^K, V W_h^V)`` for ``h = 0, ..., H - 1``
    (heads counted from 0, as in the book and the code; the paper counts them
    from 1 and writes ``h`` for their number). Each head works in
    ``d_head = d_model / n_heads`` dimensions. Self-attention is ``attn(x)``;
    cross-attention passes the decoder states as query and the encoder output as key and
    value, ``attn(x, memory, memory)``. With ``n_kv_heads`` key/value heads, query head ``h``
    uses key/value head ``h // (n_heads // n_kv_heads)``. Rotary positions (Su et al., 2024,
    Sec. 3.4) and the key/value cache are for self-attention.

    Args:
        d_model: model width D (input and output features).
        n_heads: number of (query) heads H; must divide ``d_model``.
        n_kv_heads: number of key/value heads; must divide ``n_heads``; ``None`` means ``n_heads``.
        dropout: dropout probability on the attention weights (training only).
        bias: whether the four projections have biases (False in Llama/SmolLM2).
        rotary: a :class:`~transformer_lite.nn.positional.RotaryEmbedding` of width
            ``d_head`` applied to queries and keys (RoPE), or ``None`` for none.

    Attributes:
        q_proj: ``nn.Linear(d_model, n_heads * d_head)``;
        k_proj, v_proj: ``nn.Linear(d_model, n_kv_heads * d_head)``;
        out_proj: ``nn.Linear(n_heads * d_head, d_model)``.

    Raises:
        ValueError: for sizes, a dropout or a rotary embedding other than the above.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        extra = {} if n_kv_heads is None else {"n_kv_heads": n_kv_heads}
        check_positive_sizes(self, d_model=d_model, n_heads=n_heads, **extra)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_heads(self, d_model, n_heads, n_kv_heads)
        check_dropout(self, dropout)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.group_size = n_heads // n_kv_heads  # G query heads per key/value head
        if rotary is not None and rotary.d_head != self.d_head:
            raise ValueError(
                f"{type(self).__name__}: expected a RotaryEmbedding of d_head={self.d_head}, "
                f"received d_head={rotary.d_head}"
            )
        self.dropout, self.rotary = dropout, rotary
        self.q_proj = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)

    def _split_heads(self, x: Tensor, n_heads: int | None = None) -> Tensor:
        B, T, _ = x.shape
        # (B, T, n_heads * d_head) -> (B, n_heads, T, d_head); n_heads defaults to H
        return x.view(B, T, n_heads or self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,  # key and value None: self-attention
        value: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KeyValue | None = None,
    ) -> AttentionOutput:
        """Attend from ``query`` positions to ``key``/``value`` positions (to ``query``'s own
        positions, and the cached ones, in self-attention).

        Args:
            query: ``(B, L, d_model)``; in self-attention with a cache, the ``L`` new positions.
            key, value: ``(B, S, d_model)`` for cross-attention, or both ``None`` for
                self-attention.
            attn_mask: bool (``True`` = may attend) or float (added) mask of shape
                ``(L, S)``, ``(B, L, S)`` or ``(B|1, H|1, L, S)``, with ``S = S_past + L`` under
                a cache; e.g. :func:`~transformer_lite.nn.masks.padding_mask` gives
                ``(B, 1, 1, S)``.
            is_causal: apply the causal mask, aligned bottom-right (the ``L`` queries are the
                last ``L`` of the ``S`` positions).
            cache: self-attention only: the :class:`~transformer_lite.outputs.KeyValue` returned
                by a previous call, each ``(B, n_kv_heads, S_past, d_head)`` (keys already rotated).

        Returns:
            :class:`~transformer_lite.outputs.AttentionOutput` ``(output, weights, cache)``:
            ``(B, L, d_model)``, the per-head attention weights ``(B, H, L, S)`` (never averaged
            over heads), and the keys and values of all ``S`` positions (self-attention: pass
            them as ``cache`` at the next step) or of the memory (cross-attention).

        Raises:
            ValueError: for arguments other than the above.
        """
        if key is None and value is None:  # self-attention
            check_sequences(self, self.d_model, query=query)
            key = value = query
        else:
            if cache is not None or self.rotary is not None:
                raise ValueError(
                    f"{type(self).__name__}: a cache and rotary positions are for self-attention: "
                    "expected key=None and value=None with them, received key and value"
                )
            check_projection_inputs(self, self.d_model, query, key, value)
        B, L = query.shape[:2]
        H_kv, G, d_head = self.n_kv_heads, self.group_size, self.d_head
        S_past = 0 if cache is None else cache[0].shape[-2]
        for name, t in zip(("cached key", "cached value"), cache or ()):
            layout = "(B, n_kv_heads, S_past, d_head)"
            check_shape(self, name, t, (B, H_kv, S_past, d_head), layout, like=query)
        S = S_past + key.shape[1]
        check_heads_mask(self, attn_mask, self.n_heads, B, L, S)
        q = self._split_heads(self.q_proj(query))  # (B, H, L, d_head)
        k = self._split_heads(self.k_proj(key), H_kv)  # (B, H_kv, S_new, d_head)
        v = self._split_heads(self.v_proj(value), H_kv)  # (B, H_kv, S_new, d_head)
        if self.rotary is not None:  # the new rows sit at positions S_past .. S_past + L - 1
            q, k = self.rotary(q, offset=S_past), self.rotary(k, offset=S_past)
        if cache is not None:  # the cached positions first, then the new ones
            k = torch.cat((cache[0], k), dim=-2)  # (B, H_kv, S, d_head)
            v = torch.cat((cache[1], v), dim=-2)  # (B, H_kv, S, d_head)
        # Fold the query heads of a group into the query axis: the G heads that share a
        # key/value head become G*L rows against the same keys, one matrix product per
        # key/value head (no key/value head is copied G times). Row g*L + l is query l of
        # the group's head g. The same numbers as the plain form, which copies each key/value
        # head G times (Hugging Face's repeat_kv) and runs ordinary multi-head attention:
        #     k = k.repeat_interleave(G, dim=1); v = v.repeat_interleave(G, dim=1)
        #     out, weights = scaled_dot_product_attention(q, k, v, attn_mask, is_causal)
        # (tests/nn/test_attention_grouped.py checks the two agree). G = 1: no fold at all.
        q = q.reshape(B, H_kv, G * L, d_head)  # (B, H, L, d_head) -> (B, H_kv, G*L, d_head)
        # (B|1, H|1, L|1, S|1), in the compute dtype
        dtype = compute_dtype(query.dtype)
        bias = attention_bias(
            attn_mask, is_causal, L, S, dtype=dtype, device=query.device, heads=True
        )
        if bias is not None and G > 1:
            bias = self._fold_bias(bias, L)  # (B|1, H_kv|1, G*L|1, S|1)
        p = self.dropout if self.training else 0.0
        # out (B, H_kv, G*L, d_head), weights (B, H_kv, G*L, S)
        out, weights = _attention(q, k, v, bias, p)
        # (B, H_kv, G*L, d_head) -> (B, H, L, d_head) -> (B, L, H*d_head)
        out = out.reshape(B, self.n_heads, L, d_head).transpose(1, 2).reshape(B, L, -1)
        weights = weights.reshape(B, self.n_heads, L, S)  # (B, H_kv, G*L, S) -> (B, H, L, S)
        return AttentionOutput(self.out_proj(out), weights, KeyValue(k, v))

    def _fold_bias(self, bias: Tensor, L: int) -> Tensor:
        """Lay the additive mask out like the folded queries, whose row ``g * L + l`` is query ``l``
        of head ``g`` of a group: ``(B|1, H|1, L|1, S|1)`` -> ``(B|1, H_kv|1, G*L|1, S|1)``."""
        # (L, S) or fewer dimensions -> (1, 1, L|1, S|1)
        bias = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
        Bm, Hm, Lm, Sm = bias.shape
        G = self.group_size
        if Hm == 1:  # one mask for every head: repeat its rows for the G heads of a group
            # (B|1, 1, L, S) -> (B|1, 1, G*L, S); a mask of one row (Lm = 1) broadcasts as it is
            return bias.repeat(1, 1, G, 1) if Lm > 1 else bias
        # (B|1, H, L|1, S|1) -> (B|1, H, L, S|1) -> (B|1, H_kv, G*L, S|1): head h = h_kv * G + g
        return bias.expand(Bm, Hm, L, Sm).reshape(Bm, self.n_kv_heads, G * L, Sm)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a :class:`MultiHeadAttention` with the weights of a ``torch.nn.MultiheadAttention``
        (:func:`transformer_lite.interop.mha_from_torch`).

        Raises:
            ValueError: for another module, or one with options not supported here.
        """
        from ..interop import mha_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return mha_from_torch(m, cls)

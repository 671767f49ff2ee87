"""Attention, written out step by step: the function, multi-head and grouped-query attention.

:func:`scaled_dot_product_attention`, :class:`MultiHeadAttention`, :class:`GroupedQueryAttention`.

Source: Vaswani et al. (2017), "Attention Is All You Need", Sec. 3.2.1, Eq. (1),
with an additive mask ``M`` inside the softmax (the paper's Sec. 3.2.3 masks by
setting forbidden scores to -inf)

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

and Sec. 3.2.2 (multi-head attention). ``M`` is optional (0 = allowed,
-inf = forbidden; ``B`` is the batch size, as on the book's notation page).
Masks follow the package convention of :mod:`transformer_lite.nn.masks`:
boolean ``True`` = may attend.

Grouped-query self-attention, with optional RoPE and a key/value cache: Ainslie et al.
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
    check_positive_sizes,
    check_projection_inputs,
    check_sequences,
    check_shape,
    check_type,
    heads_mask,
)
from .dtypes import compute_dtype
from .masks import _causal, bool_to_additive_mask
from .positional import RotaryEmbedding

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "KVPair", "GroupedQueryAttention"]


def _mask_to_bias(
    attn_mask: Tensor | None,
    is_causal: bool,
    L: int,
    S: int,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor | None:
    """Turn the (checked) bool/float ``attn_mask`` and ``is_causal`` into one additive bias ``M`` (or None)."""
    bias = None
    if attn_mask is not None:
        bias = (
            bool_to_additive_mask(attn_mask, dtype)
            if attn_mask.dtype == torch.bool
            else attn_mask.to(dtype)
        )
    if is_causal:
        # (L, S): 0 on and below the diagonal
        causal = bool_to_additive_mask(_causal(L, S, device), dtype)
        bias = causal if bias is None else bias + causal
    return bias


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
    return _attention(query, key, value, attn_mask, is_causal, dropout_p)


def _attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
) -> tuple[Tensor, Tensor]:
    """The steps of :func:`scaled_dot_product_attention`, for callers whose inputs are checked."""
    in_dtype = query.dtype
    dtype = compute_dtype(in_dtype)
    q, k, v = query.to(dtype), key.to(dtype), value.to(dtype)
    L, S, d_k = q.shape[-2], k.shape[-2], q.shape[-1]

    # 1. Scores: every query against every key, scaled by 1/sqrt(d_k). Scaling the queries
    #    (L x d_k numbers) costs less than scaling the scores (L x S) and gives the same result.
    scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., L, S)

    # 2. Masking: add M (0 = allowed, -inf = forbidden).
    bias = _mask_to_bias(attn_mask, is_causal, L, S, dtype, q.device)
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
    """Multi-head attention (Vaswani et al., 2017, Sec. 3.2.2), batch-first.

    ``MultiHead(Q, K, V) = Concat(head_0, ..., head_{H-1}) W^O`` with
    ``head_h = Attention(Q W_h^Q, K W_h^K, V W_h^V)`` for ``h = 0, ..., H - 1``
    (heads counted from 0, as in the book and the code; the paper counts them
    from 1 and writes ``h`` for their number). Each head works in
    ``d_head = d_model / n_heads`` dimensions. Self-attention passes the same
    tensor as query, key and value; cross-attention passes the decoder states
    as query and the encoder output as key and value.

    Args:
        d_model: model width D (input and output features).
        n_heads: number of heads H; must divide ``d_model``.
        dropout: dropout probability on the attention weights (training only).
        bias: whether the four projections have biases.

    Attributes:
        q_proj, k_proj, v_proj, out_proj: ``nn.Linear(d_model, d_model)``.

    Raises:
        ValueError: for sizes or a dropout other than the above.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        check_positive_sizes(self, d_model=d_model, n_heads=n_heads)
        check_heads(self, d_model, n_heads)
        check_dropout(self, dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        # (B, T, D) -> (B, H, T, d_head)
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` positions to ``key``/``value`` positions.

        Args:
            query: ``(B, L, d_model)``.
            key: ``(B, S, d_model)``.
            value: ``(B, S, d_model)``.
            attn_mask: bool (``True`` = may attend) or float (added) mask of
                shape ``(L, S)``, ``(B, L, S)`` or ``(B|1, H|1, L, S)``; e.g.
                :func:`~transformer_lite.nn.masks.padding_mask` gives ``(B, 1, 1, S)``.
            is_causal: apply the bottom-right-aligned causal mask.

        Returns:
            ``(output, weights)``: ``(B, L, d_model)`` and the per-head
            attention weights ``(B, H, L, S)`` (never averaged over heads).

        Raises:
            ValueError: for inputs or a mask of other shapes or dtypes.
        """
        check_projection_inputs(self, self.d_model, query, key, value)
        (B, L, _), S = query.shape, key.shape[1]
        # (B, L, S) -> (B, 1, L, S): the same mask for every head
        attn_mask = heads_mask(self, attn_mask, self.n_heads, B, L, S)
        q = self._split_heads(self.q_proj(query))  # (B, H, L, d_head)
        k = self._split_heads(self.k_proj(key))  # (B, H, S, d_head)
        v = self._split_heads(self.v_proj(value))  # (B, H, S, d_head)
        p = self.dropout if self.training else 0.0
        heads, weights = _attention(q, k, v, attn_mask, is_causal, p)
        merged = heads.transpose(1, 2).reshape(B, L, self.d_model)  # (B, H, L, d_head) -> (B, L, D)
        return self.out_proj(merged), weights

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a :class:`MultiHeadAttention` with the weights of a ``torch.nn.MultiheadAttention``.

        Copies the packed input projection ``in_proj_weight`` (rows: query,
        key, value) and ``out_proj``; dtype and device follow ``m``. Our module
        is always batch-first, whatever ``m.batch_first`` says. Two differences in the
        call: ours returns the weights of every head ``(B, H, L, S)``, where torch averages
        them over the heads unless ``average_attn_weights=False`` (the chapters plot single
        heads); and a boolean ``attn_mask`` means ``True`` = may attend here, ``True`` =
        blocked in torch.

        Raises:
            ValueError: for another module, or one with options not supported here.
        """
        check_type(cls.from_torch, m, nn.MultiheadAttention)
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            raise ValueError(
                f"{cls.__name__}.from_torch: kdim/vdim != embed_dim, add_bias_kv and add_zero_attn are not supported"
            )
        D = m.embed_dim
        ours = cls(D, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None)
        ours = ours.to(dtype=m.in_proj_weight.dtype, device=m.in_proj_weight.device)
        with torch.no_grad():
            for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
                proj.weight.copy_(m.in_proj_weight[i * D : (i + 1) * D])
                if proj.bias is not None:
                    proj.bias.copy_(m.in_proj_bias[i * D : (i + 1) * D])
            ours.out_proj.weight.copy_(m.out_proj.weight)
            if ours.out_proj.bias is not None:
                ours.out_proj.bias.copy_(m.out_proj.bias)
        return ours


# The keys and values of one layer, each (B, n_kv_heads, S, d_head).
KVPair = tuple[Tensor, Tensor]


class GroupedQueryAttention(nn.Module):
    """Self-attention in which groups of query heads share key/value heads.

    Source: Ainslie et al. (2023), Sec. 2.2 (grouped-query attention); with ``n_kv_heads=1``,
    Shazeer (2019), multi-query attention. Rotary positions: Su et al. (2024), Sec. 3.4.
    Unlike :class:`MultiHeadAttention` its projections have no biases by default, as in Llama.

    Args:
        d_model: model width D (input and output features).
        n_heads: number of query heads H; must divide ``d_model`` (``d_head = d_model // n_heads``).
        n_kv_heads: number of key/value heads; must divide ``n_heads``. ``None`` means ``n_heads``.
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
        dropout: float = 0.0,
        bias: bool = False,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_positive_sizes(self, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads)
        check_heads(self, d_model, n_heads, n_kv_heads)
        check_dropout(self, dropout)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.group_size = n_heads // n_kv_heads  # G query heads per key/value head
        if rotary is not None and rotary.d_head != self.d_head:
            raise ValueError(
                f"{type(self).__name__}: expected a RotaryEmbedding of d_head={self.d_head}, received d_head={rotary.d_head}"
            )
        self.dropout, self.rotary = dropout, rotary
        self.q_proj = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)

    def _fold_mask(
        self,
        attn_mask: Tensor | None,
        is_causal: bool,
        B: int,
        L: int,
        S: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> Tensor | None:
        """The additive mask of the ``H`` heads' ``L`` queries, folded like the queries: ``(B|1, H_kv|1, G*L|1, S|1)``.

        Checks ``attn_mask``'s shape and dtype (as in :meth:`forward`), adds the causal mask (of ``L > 1``
        queries: a single new query is the last position and may see every key), and lays the
        mask out for the folded queries, whose row ``g * L + l`` is query ``l`` of head ``g`` of a
        group. The values are those the unfolded attention would add (``dtype``: the compute
        dtype). Returns ``None`` when nothing is masked.
        """
        # (B, L, S) -> (B, 1, L, S): the same mask for every head
        attn_mask = heads_mask(self, attn_mask, self.n_heads, B, L, S)
        # One additive mask M, built as scaled_dot_product_attention builds it; a single new
        # query (L = 1) is the last position and may see every key: no causal mask.
        attn_mask = _mask_to_bias(attn_mask, is_causal and L > 1, L, S, dtype, device)
        if attn_mask is not None:
            # (L, S) or fewer dimensions -> (1, 1, L|1, S|1)
            attn_mask = attn_mask.reshape((1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape))
        if attn_mask is None:
            return None
        Bm, Hm, Lm, Sm = attn_mask.shape
        G = self.group_size
        if Hm == 1:  # one mask for every head: repeat its rows for the G heads of a group
            # (B|1, 1, L, S) -> (B|1, 1, G*L, S); a mask of one row (Lm = 1) broadcasts as it is
            return attn_mask.repeat(1, 1, G, 1) if Lm > 1 else attn_mask
        # (B|1, H, L|1, S|1) -> (B|1, H, L, S|1) -> (B|1, H_kv, G*L, S|1): head h = h_kv * G + g
        return attn_mask.expand(Bm, Hm, L, Sm).reshape(Bm, self.n_kv_heads, G * L, Sm)

    def forward(
        self,
        x: Tensor,
        past_kv: KVPair | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor, KVPair]:
        """Attend from the ``L`` new positions to the cached and the new positions.

        Args:
            x: ``(B, L, d_model)``, the new positions.
            past_kv: ``None``, or the ``(keys, values)`` returned by a previous call,
                each ``(B, n_kv_heads, S_past, d_head)`` (keys already rotated).
            attn_mask: bool (``True`` = may attend) or float (added) mask of shape
                ``(L, S)``, ``(B, L, S)``, ``(B, 1, L, S)`` or ``(B, H, L, S)`` with
                ``S = S_past + L``; combined with the causal mask if ``is_causal``.
            is_causal: apply the causal mask, aligned bottom-right (the new
                positions are the last ``L`` of the ``S``).

        Returns:
            ``(output, weights, present_kv)``: output ``(B, L, d_model)``, the
            per-query-head attention weights ``(B, H, L, S)``, and the keys and
            values of all ``S`` positions, each ``(B, n_kv_heads, S, d_head)``, to
            pass as ``past_kv`` at the next step.

        Raises:
            ValueError: for an ``x``, a cache or a mask of other shapes or dtypes.
        """
        check_sequences(self, self.d_model, x=x)
        B, L, _ = x.shape
        H, H_kv, G, d_head = self.n_heads, self.n_kv_heads, self.group_size, self.d_head
        S_past = 0 if past_kv is None else past_kv[0].shape[-2]
        for name, t in zip(("cached key", "cached value"), past_kv or ()):
            layout = "(B, n_kv_heads, S_past, d_head)"
            check_shape(self, name, t, (B, H_kv, S_past, d_head), layout, like=x)
        # (B, L, H*d_head) -> (B, H, L, d_head)
        q = self.q_proj(x).view(B, L, H, d_head).transpose(1, 2)
        k = self.k_proj(x).view(B, L, H_kv, d_head).transpose(1, 2)  # (B, H_kv, L, d_head)
        v = self.v_proj(x).view(B, L, H_kv, d_head).transpose(1, 2)  # (B, H_kv, L, d_head)
        if self.rotary is not None:  # the new rows sit at positions S_past .. S_past + L - 1
            q, k = self.rotary(q, offset=S_past), self.rotary(k, offset=S_past)
        if past_kv is not None:  # the cached positions first, then the new ones
            k = torch.cat((past_kv[0], k), dim=-2)  # (B, H_kv, S, d_head)
            v = torch.cat((past_kv[1], v), dim=-2)  # (B, H_kv, S, d_head)
        S = k.shape[-2]
        # Fold the query heads of a group into the query axis: the G heads that share a
        # key/value head become G*L rows against the same keys, one matrix product per
        # key/value head (no key/value head is copied G times). Row g*L + l is query l of
        # the group's head g. The same numbers as the plain form, which copies each key/value
        # head G times (Hugging Face's repeat_kv) and runs ordinary multi-head attention:
        #     k = k.repeat_interleave(G, dim=1); v = v.repeat_interleave(G, dim=1)
        #     out, weights = scaled_dot_product_attention(q, k, v, attn_mask, is_causal)
        # (tests/nn/test_gqa.py checks the two agree).
        q_folded = q.reshape(B, H_kv, G * L, d_head)  # (B, H, L, d_head) -> (B, H_kv, G*L, d_head)
        # (B|1, H_kv|1, G*L|1, S|1)
        mask = self._fold_mask(attn_mask, is_causal, B, L, S, compute_dtype(x.dtype), x.device)
        p = self.dropout if self.training else 0.0
        # out (B, H_kv, G*L, d_head), weights (B, H_kv, G*L, S)
        out, weights = _attention(q_folded, k, v, mask, False, p)
        # (B, H_kv, G*L, d_head) -> (B, H, L, d_head) -> (B, L, H*d_head)
        out = out.reshape(B, H, L, d_head).transpose(1, 2).reshape(B, L, H * d_head)
        weights = weights.reshape(B, H, L, S)  # (B, H_kv, G*L, S) -> (B, H, L, S)
        return self.out_proj(out), weights, (k, v)

    @classmethod
    def from_mha(cls, m: MultiHeadAttention) -> GroupedQueryAttention:
        """The same function as a :class:`~transformer_lite.nn.attention.MultiHeadAttention` (``n_kv_heads = n_heads``).

        Copies the four projections (with their biases, if any); no rotary embedding.

        Raises:
            ValueError: for another module.
        """
        check_type(cls.from_mha, m, MultiHeadAttention)
        ours = cls(
            m.d_model, m.n_heads, m.n_heads, dropout=m.dropout, bias=m.q_proj.bias is not None
        )
        ours = ours.to(dtype=m.q_proj.weight.dtype, device=m.q_proj.weight.device)
        ours.load_state_dict(m.state_dict())
        return ours

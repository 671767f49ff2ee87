"""Grouped-query self-attention, with optional RoPE and a key/value cache.

Source: Ainslie et al. (2023), "GQA: Training Generalized Multi-Query Transformer
Models from Multi-Head Checkpoints", Sec. 2.2: the ``n_heads`` query heads are
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
aligned bottom-right (:func:`~transformer_lite.masks.causal_mask`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .positional import RotaryEmbedding

__all__ = ["GroupedQueryAttention"]

KVPair = tuple[Tensor, Tensor]


class GroupedQueryAttention(nn.Module):
    """Self-attention in which groups of query heads share key/value heads.

    Args:
        d_model: model width D (input and output features).
        n_heads: number of query heads H; must divide ``d_model`` (``d_head = d_model // n_heads``).
        n_kv_heads: number of key/value heads; must divide ``n_heads``. ``None`` means ``n_heads``.
        dropout: dropout probability on the attention weights (training only).
        bias: whether the four projections have biases (False in Llama/SmolLM2).
        rotary: a :class:`~transformer_lite.positional.RotaryEmbedding` of width
            ``d_head`` applied to queries and keys (RoPE), or ``None`` for none.

    Attributes:
        q_proj: ``nn.Linear(d_model, n_heads * d_head)``;
        k_proj, v_proj: ``nn.Linear(d_model, n_kv_heads * d_head)``;
        out_proj: ``nn.Linear(n_heads * d_head, d_model)``.

    Raises:
        ValueError: if a size is not positive, ``n_heads`` does not divide ``d_model``,
            ``n_kv_heads`` does not divide ``n_heads``, or ``rotary.d_head != d_head``.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, dropout: float = 0.0,
                 bias: bool = False, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model < 1 or n_heads < 1 or n_kv_heads < 1:
            raise ValueError(f"GroupedQueryAttention: expected positive d_model, n_heads, n_kv_heads, received "
                             f"{d_model}, {n_heads}, {n_kv_heads}")
        if d_model % n_heads != 0:
            raise ValueError(f"GroupedQueryAttention: d_model must be divisible by n_heads, received "
                             f"d_model={d_model}, n_heads={n_heads}")
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"GroupedQueryAttention: n_heads must be divisible by n_kv_heads, received "
                             f"n_heads={n_heads}, n_kv_heads={n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.group_size = n_heads // n_kv_heads  # G query heads per key/value head
        if rotary is not None and rotary.d_head != self.d_head:
            raise ValueError(f"GroupedQueryAttention: expected a RotaryEmbedding of d_head={self.d_head}, "
                             f"received d_head={rotary.d_head}")
        self.dropout, self.rotary = dropout, rotary
        self.q_proj = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)

    def _check(self, x: Tensor, past_kv: KVPair | None) -> int:
        """Validate the inputs and return the number of cached positions ``S_past``."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"GroupedQueryAttention: expected x of shape (B, L, {self.d_model}), "
                             f"received {tuple(x.shape)}")
        if past_kv is None:
            return 0
        past_k, past_v = past_kv
        S_past = past_k.shape[-2] if past_k.dim() == 4 else "S_past"
        expected = (x.shape[0], self.n_kv_heads, S_past, self.d_head)
        for name, t in (("key", past_k), ("value", past_v)):
            if tuple(t.shape) != expected:
                raise ValueError(f"GroupedQueryAttention: expected cached {name} of shape (B, n_kv_heads, S_past, "
                                 f"d_head) = {expected}, received {tuple(t.shape)}")
        return past_k.shape[-2]

    def _group_mask(self, attn_mask: Tensor | None) -> Tensor | None:
        """Reshape a mask broadcastable to ``(B, H, L, S)`` so that it broadcasts to ``(B, H_kv, G, L, S)``."""
        if attn_mask is None or attn_mask.dim() <= 2:
            return attn_mask  # (L, S) broadcasts as it is
        if attn_mask.dim() == 3:
            return attn_mask[:, None, None]  # (B, L, S) -> (B, 1, 1, L, S)
        if attn_mask.dim() == 4 and attn_mask.shape[1] == 1:
            return attn_mask[:, None]  # (B, 1, L, S) -> (B, 1, 1, L, S)
        if attn_mask.dim() == 4 and attn_mask.shape[1] == self.n_heads:
            Bm, _, Lm, Sm = attn_mask.shape
            return attn_mask.reshape(Bm, self.n_kv_heads, self.group_size, Lm, Sm)  # (B, H_kv, G, L, S)
        raise ValueError(f"GroupedQueryAttention: expected attn_mask of shape (L, S), (B, L, S), (B, 1, L, S) or "
                         f"(B, {self.n_heads}, L, S), received {tuple(attn_mask.shape)}")

    def forward(self, x: Tensor, past_kv: KVPair | None = None, attn_mask: Tensor | None = None,
                is_causal: bool = False) -> tuple[Tensor, Tensor, KVPair]:
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
            ValueError: if ``x`` is not ``(B, L, d_model)``, a cached tensor has the
                wrong shape, or the mask has an unsupported shape or dtype.
        """
        S_past = self._check(x, past_kv)
        B, L, _ = x.shape
        H, H_kv, G, d_head = self.n_heads, self.n_kv_heads, self.group_size, self.d_head
        q = self.q_proj(x).view(B, L, H, d_head).transpose(1, 2)  # (B, L, H*d_head) -> (B, H, L, d_head)
        k = self.k_proj(x).view(B, L, H_kv, d_head).transpose(1, 2)  # (B, H_kv, L, d_head)
        v = self.v_proj(x).view(B, L, H_kv, d_head).transpose(1, 2)  # (B, H_kv, L, d_head)
        if self.rotary is not None:  # the new rows sit at positions S_past .. S_past + L - 1
            q, k = self.rotary(q, offset=S_past), self.rotary(k, offset=S_past)
        if past_kv is not None:
            k = _cat_time(past_kv[0], k)  # (B, H_kv, S, d_head)
            v = _cat_time(past_kv[1], v)  # (B, H_kv, S, d_head)
        S = k.shape[-2]
        # Group the query heads: G of them share each key/value head. Broadcasting over
        # the group axis replaces copying each key/value head G times.
        q_grouped = q.reshape(B, H_kv, G, L, d_head)  # (B, H_kv, G, L, d_head)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q_grouped, k[:, :, None], v[:, :, None],  # keys/values (B, H_kv, 1, S, d_head)
            attn_mask=self._group_mask(attn_mask), is_causal=is_causal, dropout_p=p)
        out = out.reshape(B, H, L, d_head).transpose(1, 2).reshape(B, L, H * d_head)  # (B, L, H*d_head)
        weights = weights.reshape(B, H, L, S)  # (B, H_kv, G, L, S) -> (B, H, L, S)
        return self.out_proj(out), weights, (k, v)

    @classmethod
    def from_mha(cls, m: MultiHeadAttention) -> "GroupedQueryAttention":
        """The same function as a :class:`~transformer_lite.attention.MultiHeadAttention` (``n_kv_heads = n_heads``).

        Copies the four projections (with their biases, if any); no rotary embedding.

        Raises:
            ValueError: if ``m`` is not a :class:`MultiHeadAttention`.
        """
        if not isinstance(m, MultiHeadAttention):
            raise ValueError(f"GroupedQueryAttention.from_mha: expected MultiHeadAttention, "
                             f"received {type(m).__name__}")
        ours = cls(m.d_model, m.n_heads, m.n_heads, dropout=m.dropout, bias=m.q_proj.bias is not None)
        ours = ours.to(dtype=m.q_proj.weight.dtype, device=m.q_proj.weight.device)
        ours.load_state_dict(m.state_dict())
        return ours


def _cat_time(past: Tensor, new: Tensor) -> Tensor:
    """Append ``new`` ``(B, H_kv, L, d)`` after ``past`` ``(B, H_kv, S_past, d)`` along the position axis."""
    if past.dtype != new.dtype or past.device != new.device:
        raise ValueError(f"GroupedQueryAttention: expected a cache of dtype {new.dtype} on {new.device}, "
                         f"received {past.dtype} on {past.device}")
    return torch.cat((past, new), dim=-2)

"""Transformer blocks: attention and a feed-forward network, each in a residual connection.

A block is two ideas, both in this module, around attention (:mod:`.attention`) and the
norms (:mod:`.normalization`):

- Each sublayer sits in a residual connection with a normalization, post-norm (Vaswani et
  al., 2017, Sec. 3.1: ``LayerNorm(x + Sublayer(x))``) or pre-norm (Xiong et al., 2020:
  ``x + Sublayer(LayerNorm(x))``, used by GPT-2 and most recent LLMs). Each block's
  ``forward`` writes both formulas out, one branch each, as ``nn.TransformerEncoderLayer`` does.
- The feed-forward sublayer, applied to every position separately:
  :class:`PositionwiseFeedForward` (Vaswani et al., 2017, Sec. 3.3, Eq. 2:
  ``FFN(x) = max(0, x W1 + b1) W2 + b2``; BERT and GPT-2 use the GELU of Hendrycks & Gimpel,
  2016, instead of the ReLU) and :class:`SwiGLUFeedForward` (Shazeer, 2020, Sec. 2:
  ``FFN_SwiGLU(x) = (Swish_1(x W) * (x V)) W_2``, as in Llama and SmolLM2).
- The blocks. :class:`TransformerBlock`: self-attention and a feed-forward network. It is the
  encoder block (the original Transformer, BERT/MiniLM) and, called with ``is_causal=True``,
  the decoder-only (GPT-style) block, with grouped-query attention, rotary positions,
  RMSNorm/SwiGLU options and a key/value cache (Radford et al., 2019; Touvron et al., 2023,
  Sec. 2.2). :class:`DecoderBlock`: the decoder block of an encoder-decoder transformer,
  which adds a cross-attention sublayer between the two (Vaswani et al., 2017, Sec. 3.1:
  "the decoder inserts a third sub-layer, which performs multi-head attention over the
  output of the encoder stack"). Post-norm by default, pre-norm with ``norm_first=True``.

The feed-forward networks sit here, beside the blocks, as in ``torch.nn.TransformerEncoderLayer``
(whose ``linear1``/``linear2`` they match) and nanoGPT's ``MLP``: a GPT-style block reads in
this file, :mod:`.attention` and :mod:`.normalization`. The ``from_torch`` helpers that read
torch's layers come last.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import (
    check_choice,
    check_dropout,
    check_last_dim,
    check_positive_sizes,
    check_sequences,
    check_type,
)
from .attention import GroupedQueryAttention, KVPair, MultiHeadAttention
from .normalization import LayerNorm, RMSNorm
from .positional import RotaryEmbedding

__all__ = [
    "PositionwiseFeedForward",
    "SwiGLUFeedForward",
    "make_norm",
    "TransformerBlock",
    "DecoderBlock",
]

NORM_CLASSES = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


# gelu: the exact (erf) form, as in BERT and nn.Transformer*
_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
}


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with a nonlinearity between them, applied at every position.

    Source: Vaswani et al. (2017), Sec. 3.3, Eq. (2); GELU: Hendrycks & Gimpel (2016).

    ``y = linear2(dropout(activation(linear1(x))))``: the same weights act
    on each position, so positions do not interact here (only attention mixes them).

    Args:
        d_model: input and output width D.
        d_ff: hidden width (2048 in the base Transformer, typically 4 * d_model).
        activation: ``"relu"`` or ``"gelu"`` (exact, erf-based GELU).
        dropout: dropout probability after the activation (training only).

    Attributes:
        linear1: ``nn.Linear(d_model, d_ff)``; linear2: ``nn.Linear(d_ff, d_model)``.

    Raises:
        ValueError: for sizes, an activation or a dropout other than the above.
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0
    ) -> None:
        super().__init__()
        check_choice(self, "activation", activation, tuple(_ACTIVATIONS))
        check_positive_sizes(self, d_model=d_model, d_ff=d_ff)
        check_dropout(self, dropout)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(..., d_model)`` to ``(..., d_model)``.

        Raises:
            ValueError: for an ``x`` of another shape.
        """
        check_last_dim(self, x, self.d_model)
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (..., d_ff)
        return self.linear2(self.dropout(hidden))  # (..., D)


class SwiGLUFeedForward(nn.Module):
    """``down(silu(gate(x)) * up(x))``, applied at every position separately.

    Source: Shazeer (2020), Sec. 2, the FFN_SwiGLU variant; used by Llama (Touvron et al., 2023).

    Args:
        d_model: input and output width D.
        d_ff: hidden width (1536 in SmolLM2-135M, whose ``d_model`` is 576).
        dropout: dropout probability on the gated hidden vector (training only).
        bias: whether the three projections have biases (False in Shazeer 2020 and Llama).

    Attributes:
        gate_proj, up_proj: ``nn.Linear(d_model, d_ff)`` (``W`` and ``V`` above);
        down_proj: ``nn.Linear(d_ff, d_model)`` (``W_2``).

    Raises:
        ValueError: for sizes or a dropout other than the above.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        check_positive_sizes(self, d_model=d_model, d_ff=d_ff)
        check_dropout(self, dropout)
        self.d_model, self.d_ff = d_model, d_ff
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(..., d_model)`` to ``(..., d_model)``.

        Raises:
            ValueError: for an ``x`` of another shape.
        """
        check_last_dim(self, x, self.d_model)
        gate = F.silu(self.gate_proj(x))  # (..., d_ff): silu(z) = z * sigmoid(z)
        hidden = gate * self.up_proj(x)  # (..., d_ff): the gate scales each hidden unit
        return self.down_proj(self.dropout(hidden))  # (..., D)


def make_norm(kind: str, d_model: int, eps: float) -> nn.Module:
    """``LayerNorm`` for ``kind="layernorm"``, ``RMSNorm`` for ``kind="rmsnorm"``.

    Raises:
        ValueError: for another ``kind``, or as the norm's constructor.
    """
    check_choice(make_norm, "norm", kind, tuple(NORM_CLASSES))
    return NORM_CLASSES[kind](d_model, eps=eps)


class TransformerBlock(nn.Module):
    """One transformer block: self-attention and a feed-forward network, each in a residual connection.

    Post-norm (``norm_first=False``, the original Transformer and BERT)::

        x = norm1(x + dropout(self_attn(x)))
        x = norm2(x + dropout(ff(x)))

    Pre-norm (``norm_first=True``, GPT-2 and later)::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ff(norm2(x)))

    The same class is the encoder block (chapters 4 and 5, MiniLM) and, called with
    ``is_causal=True``, the decoder-only block (chapter 8, SmolLM2; Radford et al., 2019;
    Touvron et al., 2023, Sec. 2.2, for RMSNorm, SwiGLU and rotary positions).

    The self-attention is a :class:`MultiHeadAttention` (called ``self_attn(q, k, v)``, as in
    chapters 1 to 4) when ``n_kv_heads`` is ``None``, and a :class:`GroupedQueryAttention` with
    ``n_kv_heads`` key/value heads otherwise; only the latter takes a rotary embedding and a
    key/value cache. With ``n_kv_heads == n_heads`` the two have the same parameters (names,
    shapes, creation order) and compute the same output.

    Args:
        d_model: model width D.
        n_heads: number of attention heads H (must divide ``d_model``).
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on attention weights, in the feed-forward network and on each sublayer output.
        activation: ``"relu"`` or ``"gelu"`` (:class:`PositionwiseFeedForward`), or ``"swiglu"``
            (:class:`SwiGLUFeedForward`).
        norm_first: pre-norm if True, post-norm if False.
        eps: epsilon of the two norms.
        n_kv_heads: ``None`` for multi-head attention, or the number of key/value heads
            of grouped-query attention (must divide ``n_heads``).
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        bias: biases in the attention projections and in SwiGLU (the ReLU/GELU network always has them).
        rotary: a :class:`RotaryEmbedding` of width ``d_head`` for queries and keys, or ``None``
            (needs ``n_kv_heads``).

    Attributes:
        self_attn (MultiHeadAttention or GroupedQueryAttention), ff, norm1, norm2.

    Raises:
        ValueError: for options other than the above, or as the attention, feed-forward and norms.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        eps: float = 1e-5,
        n_kv_heads: int | None = None,
        norm: str = "layernorm",
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        check_dropout(self, dropout)  # here, so the message names this block
        if rotary is not None and n_kv_heads is None:
            raise ValueError(
                f"{type(self).__name__}: a rotary embedding needs grouped-query attention: expected n_kv_heads (n_heads for ordinary multi-head attention), received None"
            )
        self.norm_first = norm_first
        if n_kv_heads is None:
            self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias)
        else:
            self.self_attn = GroupedQueryAttention(
                d_model, n_heads, n_kv_heads, dropout=dropout, bias=bias, rotary=rotary
            )
        if activation == "swiglu":
            self.ff = SwiGLUFeedForward(d_model, d_ff, dropout=dropout, bias=bias)
        else:
            self.ff = PositionwiseFeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1 = make_norm(norm, d_model, eps)
        self.norm2 = make_norm(norm, d_model, eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        past_kv: KVPair | None = None,
        use_cache: bool = False,
    ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, KVPair]:
        """Apply the block to ``x`` of shape ``(B, L, d_model)``.

        Args:
            x: ``(B, L, d_model)``; with ``past_kv``, the ``L`` new positions.
            attn_mask: bool (``True`` = may attend) or float (added) mask, ``(L, S)``,
                ``(B, L, S)`` or ``(B, H|1, L, S)``, as in the attention module.
            is_causal: apply the causal mask (aligned bottom-right when keys are cached).
            past_kv: cached ``(keys, values)`` of this block, each ``(B, n_kv_heads, S_past,
                d_head)``, or ``None`` (grouped-query attention only).
            use_cache: also return this block's keys and values for all ``S = S_past + L``
                positions (grouped-query attention only).

        Returns:
            ``(y, weights)``: ``y`` ``(B, L, d_model)`` and the self-attention weights
            ``(B, H, L, S)``; with ``use_cache=True``, ``(y, weights, present_kv)``, the
            keys and values to pass as ``past_kv`` at the next step (as Hugging Face's ``use_cache``).

        Raises:
            ValueError: for a cache of a multi-head-attention block, or as the attention module.
        """
        grouped = isinstance(self.self_attn, GroupedQueryAttention)
        if not grouped and (past_kv is not None or use_cache):
            raise ValueError(
                f"{type(self).__name__}: a key/value cache needs grouped-query attention: build the block with n_kv_heads"
            )
        if self.norm_first:  # pre-norm: x + Sublayer(LN(x))
            h, weights, present = self._self_attention(self.norm1(x), attn_mask, is_causal, past_kv)
            x = x + self.dropout1(h)
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:  # post-norm: LN(x + Sublayer(x))
            h, weights, present = self._self_attention(x, attn_mask, is_causal, past_kv)
            x = self.norm1(x + self.dropout1(h))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return (x, weights, present) if use_cache else (x, weights)

    def _self_attention(
        self, h: Tensor, attn_mask: Tensor | None, is_causal: bool, past_kv: KVPair | None
    ) -> tuple[Tensor, Tensor, KVPair | None]:
        """``(out, weights, present_kv)`` of the self-attention on ``h`` (``present_kv`` None for
        multi-head attention, which keeps no cache)."""
        if isinstance(self.self_attn, GroupedQueryAttention):
            return self.self_attn(h, past_kv, attn_mask=attn_mask, is_causal=is_causal)
        out, weights = self.self_attn(h, h, h, attn_mask=attn_mask, is_causal=is_causal)
        return out, weights, None

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerBlock:
        """Build a :class:`TransformerBlock` computing the same function as an ``nn.TransformerEncoderLayer``.

        Unlike the torch layer, which returns the output tensor only, ours returns
        ``(y, weights)``: the chapters plot what each head attends to.

        Copies the attention, feed-forward and both layer norms, and reads
        ``norm_first``, the activation (ReLU or GELU), dropout and eps. Remember
        that the torch layer's boolean ``src_mask`` means ``True`` = blocked,
        the opposite of ours.

        Raises:
            ValueError: for another layer, or one with another activation or ``bias=False``.
        """
        return _block_from_torch(cls, layer, nn.TransformerEncoderLayer, self_attn="self_attn")


class DecoderBlock(nn.Module):
    """One decoder block: masked self-attention, cross-attention over ``memory``, feed-forward.

    Source: Vaswani et al. (2017), Sec. 3.1 (the decoder's third sub-layer) and Sec. 3.2.3.
    This is the block of an encoder-decoder model; the decoder-only (GPT-style) block is
    :class:`TransformerBlock` called with ``is_causal=True``.

    Post-norm (``norm_first=False``, the original Transformer)::

        x = norm1(x + dropout(self_attn(x, x, x)))
        x = norm2(x + dropout(cross_attn(x, memory, memory)))
        x = norm3(x + dropout(ff(x)))

    Pre-norm (``norm_first=True``)::

        x = x + dropout(self_attn(norm1(x), norm1(x), norm1(x)))
        x = x + dropout(cross_attn(norm2(x), memory, memory))
        x = x + dropout(ff(norm3(x)))

    In cross-attention the queries come from the decoder and the keys and
    values from ``memory`` (the encoder's output), so each target position
    reads from the source. ``memory`` is used as given in both variants (in a
    pre-norm model the encoder stack's final LayerNorm has already normalized it).

    Args:
        d_model, n_heads, d_ff, dropout, norm_first, eps: as :class:`TransformerBlock`.
        activation: ``"relu"`` or ``"gelu"`` (exact GELU).

    Attributes:
        self_attn, cross_attn (MultiHeadAttention), ff (PositionwiseFeedForward), norm1, norm2, norm3 (LayerNorm).

    Raises:
        ValueError: as :class:`MultiHeadAttention` and :class:`PositionwiseFeedForward`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        check_dropout(self, dropout)  # here, so the message names this block
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1 = LayerNorm(d_model, eps=eps)
        self.norm2 = LayerNorm(d_model, eps=eps)
        self.norm3 = LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        attn_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Apply the block to target states ``x`` attending to the encoder output ``memory``.

        The block does not make itself causal: pass ``is_causal=True`` (or a
        causal ``attn_mask``) for a decoder that must not see future targets,
        as with ``nn.TransformerDecoderLayer``.

        Args:
            x: ``(B, L, d_model)`` target-side states (L = target length).
            memory: ``(B, S, d_model)`` encoder output (S = source length).
            attn_mask: mask for the self-attention, bool (``True`` = may attend)
                or float (added), shape ``(L, L)``, ``(B, L, L)`` or ``(B|1, H|1, L, L)``.
            memory_mask: mask for the cross-attention, shape ``(L, S)``,
                ``(B, L, S)`` or ``(B|1, H|1, L, S)``; e.g. ``padding_mask(src_valid)``
                ``(B, 1, 1, S)`` hides padded source positions.
            is_causal: apply the bottom-right-aligned causal mask to the self-attention
                (combined with ``attn_mask`` if both are given).

        Returns:
            ``(y, self_weights, cross_weights)``: ``y`` ``(B, L, d_model)``; the
            self-attention weights ``(B, H, L, L)``; the cross-attention weights
            ``(B, H, L, S)`` (row ``i`` shows how target position ``i`` spreads
            its attention over the source positions).

        Raises:
            ValueError: for inputs or masks of other shapes or dtypes.
        """
        check_sequences(self, self.d_model, x=x, memory=memory)
        # cross-attention: queries from the decoder, keys and values from the memory
        if self.norm_first:  # pre-norm: x + Sublayer(LN(x))
            h = self.norm1(x)
            a, self_weights = self.self_attn(h, h, h, attn_mask=attn_mask, is_causal=is_causal)
            x = x + self.dropout1(a)
            a, cross_weights = self.cross_attn(self.norm2(x), memory, memory, attn_mask=memory_mask)
            x = x + self.dropout2(a)
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:  # post-norm: LN(x + Sublayer(x))
            a, self_weights = self.self_attn(x, x, x, attn_mask=attn_mask, is_causal=is_causal)
            x = self.norm1(x + self.dropout1(a))
            a, cross_weights = self.cross_attn(x, memory, memory, attn_mask=memory_mask)
            x = self.norm2(x + self.dropout2(a))
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return x, self_weights, cross_weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """Build a :class:`DecoderBlock` computing the same function as an ``nn.TransformerDecoderLayer``.

        Unlike the torch layer, which returns the output tensor only, ours returns
        ``(y, self_weights, cross_weights)``: the chapters plot what each head attends to.

        Copies both attentions (``self_attn`` and torch's ``multihead_attn``),
        the feed-forward network and the three layer norms, and reads
        ``norm_first``, the activation, dropout and eps; dtype and device
        follow ``layer``. Our block is batch-first whatever ``layer.batch_first``
        says. torch's boolean ``tgt_mask``/``memory_mask`` and key-padding
        masks mean ``True`` = blocked, the opposite of ours.

        Raises:
            ValueError: for another layer, or one with another activation or ``bias=False``.
        """
        return _block_from_torch(
            cls,
            layer,
            nn.TransformerDecoderLayer,
            self_attn="self_attn",
            cross_attn="multihead_attn",
        )


# Reading torch's layers (``from_torch``).


def _torch_activation_name(fn) -> str | None:
    """``"relu"`` or ``"gelu"`` for the activations our feed-forward network computes exactly, else ``None``.

    Accepts what ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer`` store in
    ``.activation``: ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()``. ``nn.GELU(approximate="tanh")``
    is a different function and gives ``None``.
    """
    if fn is F.relu or isinstance(fn, nn.ReLU):
        return "relu"
    if fn is F.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return "gelu"
    return None


def _block_from_torch(cls: type, layer: nn.Module, expected: type, **attentions: str):
    """Our block ``cls`` with the options and weights of the torch layer ``layer``.

    ``attentions`` names each of our attention modules after torch's (``cross_attn="multihead_attn"``);
    the norms (``norm1``, ``norm2``, ...) and the feed-forward network's ``linear1``/``linear2``
    have the same names in both. The block is built in ``layer``'s dtype before the weights
    are copied: copying float64 weights into float32 parameters would round them.
    """
    check_type(cls.from_torch, layer, expected)
    activation = _torch_activation_name(layer.activation)
    if activation is None:
        raise ValueError(
            f"{cls.__name__}.from_torch: expected a ReLU or exact GELU activation, "
            f"received {layer.activation!r}"
        )
    if layer.linear1.bias is None:
        raise ValueError(
            f"{cls.__name__}.from_torch: layers built with bias=False are not supported"
        )
    w = layer.linear1.weight
    ours = cls(
        d_model=layer.self_attn.embed_dim,
        n_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        activation=activation,
        norm_first=layer.norm_first,
        eps=layer.norm1.eps,
    ).to(dtype=w.dtype, device=w.device)
    for ours_name, torch_name in attentions.items():
        setattr(ours, ours_name, MultiHeadAttention.from_torch(getattr(layer, torch_name)))
    for name, module in list(ours.named_children()):
        if isinstance(module, LayerNorm):
            setattr(ours, name, LayerNorm.from_torch(getattr(layer, name)))
    ours.ff.linear1.load_state_dict(layer.linear1.state_dict())
    ours.ff.linear2.load_state_dict(layer.linear2.state_dict())
    return ours.to(dtype=w.dtype, device=w.device)

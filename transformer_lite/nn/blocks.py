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
this file, :mod:`.attention` and :mod:`.normalization`. Reading torch's layers (``from_torch``)
is :mod:`transformer_lite.interop`.
"""

from __future__ import annotations

import typing

import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import (
    check_choice,
    check_dropout,
    check_last_dim,
    check_positive_sizes,
    check_sequences,
)
from ..config import Activation, FFActivation, Norm
from ..outputs import AttentionOutput, DecoderBlockOutput, KeyValue
from .attention import MultiHeadAttention
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
        self, d_model: int, d_ff: int, activation: FFActivation = "relu", dropout: float = 0.0
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


def make_norm(kind: Norm, d_model: int, eps: float) -> nn.Module:
    """``LayerNorm`` for ``kind="layernorm"``, ``RMSNorm`` for ``kind="rmsnorm"``.

    Raises:
        ValueError: for another ``kind``, or as the norm's constructor.
    """
    check_choice(make_norm, "norm", kind, tuple(NORM_CLASSES))
    return NORM_CLASSES[kind](d_model, eps=eps)


class TransformerBlock(nn.Module):
    """One transformer block: self-attention and a feed-forward network, each in a residual connection.

    Post-norm (``norm_first=False``, the original Transformer and BERT; Vaswani et al., 2017,
    Sec. 3.1)::

        x = norm1(x + dropout(self_attn(x)))
        x = norm2(x + dropout(ff(x)))

    Pre-norm (``norm_first=True``, GPT-2 and later; Xiong et al., 2020)::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ff(norm2(x)))

    The same class is the encoder block (chapters 4 and 5, MiniLM) and, called with
    ``is_causal=True``, the decoder-only block (chapter 8, SmolLM2; Radford et al., 2019;
    Touvron et al., 2023, Sec. 2.2, for RMSNorm, SwiGLU, grouped-query attention and rotary
    positions), with a key/value cache.

    Args:
        d_model: model width D.
        n_heads: number of attention heads H (must divide ``d_model``).
        d_ff: hidden width of the feed-forward network.
        n_kv_heads: key/value heads of the attention (must divide ``n_heads``); ``None``
            means ``n_heads`` (ordinary multi-head attention).
        dropout: dropout on attention weights, in the feed-forward network and on each sublayer output.
        activation: ``"relu"`` or ``"gelu"`` (:class:`PositionwiseFeedForward`), or ``"swiglu"``
            (:class:`SwiGLUFeedForward`).
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        norm_first: pre-norm if True, post-norm if False.
        eps: epsilon of the two norms.
        bias: biases in the attention projections and in SwiGLU (the ReLU/GELU network always has them).
        rotary: a :class:`RotaryEmbedding` of width ``d_head`` for queries and keys, or ``None``.

    Attributes:
        self_attn (MultiHeadAttention), ff, norm1, norm2.

    Raises:
        ValueError: for options other than the above, or as the attention, feed-forward and norms.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        n_kv_heads: int | None = None,
        dropout: float = 0.0,
        activation: Activation = "relu",
        norm: Norm = "layernorm",
        norm_first: bool = False,
        eps: float = 1e-5,
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        # here, so the messages name this block (before any submodule is built)
        check_choice(self, "activation", activation, typing.get_args(Activation))
        check_choice(self, "norm", norm, tuple(NORM_CLASSES))
        check_dropout(self, dropout)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
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
        *,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KeyValue | None = None,
    ) -> AttentionOutput:
        """Apply the block to ``x`` of shape ``(B, L, d_model)``.

        Args:
            x: ``(B, L, d_model)``; with ``cache``, the ``L`` new positions.
            attn_mask: bool (``True`` = may attend) or float (added) mask, ``(L, S)``,
                ``(B, L, S)`` or ``(B, H|1, L, S)``, as in :class:`MultiHeadAttention`.
            is_causal: apply the causal mask (aligned bottom-right when keys are cached).
            cache: this block's :class:`~transformer_lite.outputs.KeyValue` from the previous
                step, each ``(B, n_kv_heads, S_past, d_head)``, or ``None``.

        Returns:
            :class:`~transformer_lite.outputs.AttentionOutput` ``(output, weights, cache)``:
            ``(B, L, d_model)``, the self-attention weights ``(B, H, L, S)``, and the keys and
            values of all ``S = S_past + L`` positions, to pass as ``cache`` at the next step.

        Raises:
            ValueError: for an ``x`` of another shape, or as the attention module.
        """
        check_sequences(self, self.self_attn.d_model, x=x)
        if self.norm_first:  # pre-norm: x + Sublayer(LN(x))
            a = self.self_attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal, cache=cache)
            x = x + self.dropout1(a.output)
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:  # post-norm: LN(x + Sublayer(x))
            a = self.self_attn(x, attn_mask=attn_mask, is_causal=is_causal, cache=cache)
            x = self.norm1(x + self.dropout1(a.output))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return AttentionOutput(x, a.weights, a.cache)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerBlock:
        """Build a :class:`TransformerBlock` computing the same function as an
        ``nn.TransformerEncoderLayer``: its attention, ``linear1``/``linear2`` (our ``ff``) and two
        norms copied (:func:`transformer_lite.interop.block_from_torch`).

        Raises:
            ValueError: for another layer, or one with another activation or ``bias=False``.
        """
        from ..interop import block_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return block_from_torch(layer, cls)


class DecoderBlock(nn.Module):
    """One decoder block: masked self-attention, cross-attention over ``memory``, feed-forward.

    Source: Vaswani et al. (2017), Sec. 3.1 (the decoder's third sub-layer) and Sec. 3.2.3.
    This is the block of an encoder-decoder model; the decoder-only (GPT-style) block is
    :class:`TransformerBlock` called with ``is_causal=True``.

    Post-norm (``norm_first=False``, the original Transformer)::

        x = norm1(x + dropout(self_attn(x)))
        x = norm2(x + dropout(cross_attn(x, memory, memory)))
        x = norm3(x + dropout(ff(x)))

    Pre-norm (``norm_first=True``)::

        x = x + dropout(self_attn(norm1(x)))
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
        *,
        dropout: float = 0.0,
        activation: FFActivation = "relu",
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
        *,
        attn_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> DecoderBlockOutput:
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
            :class:`~transformer_lite.outputs.DecoderBlockOutput` ``(output, weights,
            cross_weights)``: ``(B, L, d_model)``; the self-attention weights ``(B, H, L, L)``;
            the cross-attention weights ``(B, H, L, S)`` (row ``i`` shows how target position
            ``i`` spreads its attention over the source positions).

        Raises:
            ValueError: for inputs or masks of other shapes or dtypes.
        """
        check_sequences(self, self.d_model, x=x, memory=memory)
        # cross-attention: queries from the decoder, keys and values from the memory
        if self.norm_first:  # pre-norm: x + Sublayer(LN(x))
            a = self.self_attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal)
            x = x + self.dropout1(a.output)
            c = self.cross_attn(self.norm2(x), memory, memory, attn_mask=memory_mask)
            x = x + self.dropout2(c.output)
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:  # post-norm: LN(x + Sublayer(x))
            a = self.self_attn(x, attn_mask=attn_mask, is_causal=is_causal)
            x = self.norm1(x + self.dropout1(a.output))
            c = self.cross_attn(x, memory, memory, attn_mask=memory_mask)
            x = self.norm2(x + self.dropout2(c.output))
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return DecoderBlockOutput(x, a.weights, c.weights)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """Build a :class:`DecoderBlock` computing what an ``nn.TransformerDecoderLayer`` computes;
        torch's ``multihead_attn`` is our ``cross_attn``
        (:func:`transformer_lite.interop.decoder_block_from_torch`).

        Raises:
            ValueError: for another layer, or one with another activation or ``bias=False``.
        """
        from ..interop import decoder_block_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return decoder_block_from_torch(layer, cls)

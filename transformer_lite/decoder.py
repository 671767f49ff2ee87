"""The decoder block of an encoder-decoder transformer: self-attention, cross-attention, feed-forward.

Source: Vaswani et al. (2017), Sec. 3.1: "In addition to the two sub-layers in
each encoder layer, the decoder inserts a third sub-layer, which performs
multi-head attention over the output of the encoder stack"; each sublayer has
a residual connection and layer normalization, and the decoder's
self-attention is masked so that position ``i`` sees positions ``<= i`` only.
Pre-norm as in Xiong et al. (2020). This is the same computation as
``torch.nn.TransformerDecoderLayer`` (see :meth:`DecoderBlock.from_torch`).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .feedforward import PositionwiseFeedForward
from .normalization import LayerNorm

__all__ = ["DecoderBlock"]


def _torch_activation_name(fn) -> str | None:
    """'relu' or 'gelu' for the activations our feed-forward computes exactly, else None."""
    if fn is F.relu or isinstance(fn, nn.ReLU):
        return "relu"
    if fn is F.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return "gelu"  # nn.GELU(approximate="tanh") is a different function: not accepted
    return None


class DecoderBlock(nn.Module):
    """One decoder block: masked self-attention, cross-attention over ``memory``, feed-forward.

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
        d_model: model width D.
        n_heads: number of attention heads H (must divide ``d_model``).
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on attention weights, in the feed-forward network and on each sublayer output.
        activation: ``"relu"`` or ``"gelu"`` (exact GELU).
        norm_first: pre-norm if True, post-norm if False.
        eps: LayerNorm epsilon.

    Attributes:
        self_attn, cross_attn (MultiHeadAttention), ff (PositionwiseFeedForward), norm1, norm2, norm3 (LayerNorm).

    Raises:
        ValueError: as :class:`MultiHeadAttention` and :class:`PositionwiseFeedForward`.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
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

    def _self_block(self, x: Tensor, attn_mask: Tensor | None, is_causal: bool) -> tuple[Tensor, Tensor]:
        out, weights = self.self_attn(x, x, x, attn_mask=attn_mask, is_causal=is_causal)
        return self.dropout1(out), weights

    def _cross_block(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None) -> tuple[Tensor, Tensor]:
        out, weights = self.cross_attn(x, memory, memory, attn_mask=memory_mask)
        return self.dropout2(out), weights

    def forward(self, x: Tensor, memory: Tensor, attn_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                is_causal: bool = False) -> tuple[Tensor, Tensor, Tensor]:
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
            ValueError: if ``x`` or ``memory`` is not ``(B, len, d_model)`` with one
                batch size, or a mask has an unsupported shape or dtype.
        """
        for name, t in (("x", x), ("memory", memory)):
            if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(f"DecoderBlock: expected {name} of shape (B, len, {self.d_model}), received {shape}")
        if x.shape[0] != memory.shape[0]:
            raise ValueError(f"DecoderBlock: expected x and memory with one batch size, received x {tuple(x.shape)} "
                             f"and memory {tuple(memory.shape)}")
        if self.norm_first:
            out, self_weights = self._self_block(self.norm1(x), attn_mask, is_causal)
            x = x + out
            out, cross_weights = self._cross_block(self.norm2(x), memory, memory_mask)
            x = x + out
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:
            out, self_weights = self._self_block(x, attn_mask, is_causal)
            x = self.norm1(x + out)
            out, cross_weights = self._cross_block(x, memory, memory_mask)
            x = self.norm2(x + out)
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return x, self_weights, cross_weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "DecoderBlock":
        """Build a :class:`DecoderBlock` computing the same function as an ``nn.TransformerDecoderLayer``.

        Copies both attentions (``self_attn`` and torch's ``multihead_attn``),
        the feed-forward network and the three layer norms, and reads
        ``norm_first``, the activation, dropout and eps; dtype and device
        follow ``layer``. Our block is batch-first whatever ``layer.batch_first``
        says. torch's boolean ``tgt_mask``/``memory_mask`` and key-padding
        masks mean ``True`` = blocked, the opposite of ours.

        Raises:
            ValueError: if ``layer`` is not an ``nn.TransformerDecoderLayer``, its
                activation is not ReLU or the exact GELU (``"relu"``/``"gelu"``,
                ``F.relu``/``F.gelu``, ``nn.ReLU()``/``nn.GELU()``; not
                ``nn.GELU(approximate="tanh")``), or it was built with ``bias=False``.
        """
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise ValueError(f"DecoderBlock.from_torch: expected nn.TransformerDecoderLayer, "
                             f"received {type(layer).__name__}")
        activation = _torch_activation_name(layer.activation)
        if activation is None:
            raise ValueError(f"DecoderBlock.from_torch: expected a ReLU or exact GELU activation, "
                             f"received {layer.activation!r}")
        if layer.linear1.bias is None:
            raise ValueError("DecoderBlock.from_torch: layers built with bias=False are not supported")
        dtype, device = layer.linear1.weight.dtype, layer.linear1.weight.device
        ours = cls(layer.self_attn.embed_dim, layer.self_attn.num_heads, layer.linear1.out_features,
                   dropout=layer.dropout.p, activation=activation, norm_first=layer.norm_first, eps=layer.norm1.eps)
        # Cast before copying: copying float64 weights into float32 parameters would round them.
        ours = ours.to(dtype=dtype, device=device)
        ours.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        ours.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        ours.norm1 = LayerNorm.from_torch(layer.norm1)
        ours.norm2 = LayerNorm.from_torch(layer.norm2)
        ours.norm3 = LayerNorm.from_torch(layer.norm3)
        ours.ff.load_state_dict({"linear1.weight": layer.linear1.weight, "linear1.bias": layer.linear1.bias,
                                 "linear2.weight": layer.linear2.weight, "linear2.bias": layer.linear2.bias})
        return ours.to(dtype=dtype, device=device)

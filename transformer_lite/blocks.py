"""The transformer (encoder) block: self-attention and feed-forward sublayers,
each wrapped in a residual connection and layer normalization.

Sources: Vaswani et al. (2017), Sec. 3.1 (post-norm: ``LayerNorm(x + Sublayer(x))``);
Xiong et al. (2020), "On Layer Normalization in the Transformer Architecture"
(pre-norm: ``x + Sublayer(LayerNorm(x))``), used by GPT-2 and most recent LLMs.
"""

from __future__ import annotations

from torch import Tensor, nn

from .attention import MultiHeadAttention
from .feedforward import PositionwiseFeedForward
from .normalization import LayerNorm

__all__ = ["TransformerBlock"]


class TransformerBlock(nn.Module):
    """One transformer encoder block (or a decoder-only block when used with ``is_causal=True``).

    Post-norm (``norm_first=False``, the original Transformer and BERT)::

        x = norm1(x + dropout(self_attn(x)))
        x = norm2(x + dropout(ff(x)))

    Pre-norm (``norm_first=True``, GPT-2 and later)::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ff(norm2(x)))

    Args:
        d_model: model width D.
        n_heads: number of attention heads H (must divide ``d_model``).
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on attention weights, in the feed-forward network and on each sublayer output.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: pre-norm if True, post-norm if False.
        eps: LayerNorm epsilon.

    Attributes:
        self_attn (MultiHeadAttention), ff (PositionwiseFeedForward), norm1, norm2 (LayerNorm).

    Raises:
        ValueError: as :class:`MultiHeadAttention` and :class:`PositionwiseFeedForward`.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1 = LayerNorm(d_model, eps=eps)
        self.norm2 = LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x: Tensor, attn_mask: Tensor | None, is_causal: bool) -> tuple[Tensor, Tensor]:
        out, weights = self.self_attn(x, x, x, attn_mask=attn_mask, is_causal=is_causal)
        return self.dropout1(out), weights

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False) -> tuple[Tensor, Tensor]:
        """Apply the block to ``x`` of shape ``(B, L, d_model)``.

        Args:
            x: ``(B, L, d_model)``.
            attn_mask: bool (``True`` = may attend) or float mask, as in :class:`MultiHeadAttention`.
            is_causal: apply the causal mask.

        Returns:
            ``(y, weights)``: ``y`` of shape ``(B, L, d_model)`` and the self-attention
            weights ``(B, H, L, L)``.

        Raises:
            ValueError: as :meth:`MultiHeadAttention.forward`.
        """
        if self.norm_first:
            attn_out, weights = self._attend(self.norm1(x), attn_mask, is_causal)
            x = x + attn_out
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:
            attn_out, weights = self._attend(x, attn_mask, is_causal)
            x = self.norm1(x + attn_out)
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """Build a :class:`TransformerBlock` computing the same function as an ``nn.TransformerEncoderLayer``.

        Copies the attention, feed-forward and both layer norms, and reads
        ``norm_first``, the activation (ReLU or GELU), dropout and eps. Remember
        that the torch layer's boolean ``src_mask`` means ``True`` = blocked,
        the opposite of ours.

        Raises:
            ValueError: if ``layer`` is not an ``nn.TransformerEncoderLayer``, has an
                activation other than ReLU or the exact GELU, or was built with ``bias=False``.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise ValueError(f"TransformerBlock.from_torch: expected nn.TransformerEncoderLayer, "
                             f"received {type(layer).__name__}")
        activation = {1: "relu", 2: "gelu"}.get(layer.activation_relu_or_gelu)
        if getattr(layer.activation, "approximate", "none") != "none":
            activation = None  # nn.GELU(approximate="tanh") is not the exact GELU computed here
        if activation is None:
            raise ValueError(f"TransformerBlock.from_torch: expected a ReLU or GELU activation, "
                             f"received {layer.activation!r}")
        if layer.linear1.bias is None:
            raise ValueError("TransformerBlock.from_torch: layers built with bias=False are not supported")
        ours = cls(layer.self_attn.embed_dim, layer.self_attn.num_heads, layer.linear1.out_features,
                   dropout=layer.dropout.p, activation=activation, norm_first=layer.norm_first, eps=layer.norm1.eps)
        # Cast before copying: load_state_dict copies into the existing (float32) parameters, which would round.
        ours = ours.to(dtype=layer.linear1.weight.dtype, device=layer.linear1.weight.device)
        ours.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        ours.norm1 = LayerNorm.from_torch(layer.norm1)
        ours.norm2 = LayerNorm.from_torch(layer.norm2)
        ours.ff.load_state_dict({"linear1.weight": layer.linear1.weight, "linear1.bias": layer.linear1.bias,
                                 "linear2.weight": layer.linear2.weight, "linear2.bias": layer.linear2.bias})
        return ours.to(dtype=layer.linear1.weight.dtype, device=layer.linear1.weight.device)

"""Post-norm against pre-norm at depth: a per-position classifier on an encoder stack, the same weights
in both variants, and the gradient norm of every layer.

Source: Xiong et al. (2020), "On Layer Normalization in the Transformer
Architecture", Sec. 3 (gradients of post-LN and pre-LN Transformers at
initialization; Fig. 3 plots them layer by layer). Post-norm and pre-norm
blocks have exactly the same parameters (one attention, one feed-forward, two
layer norms), so one set of weights can be run both ways; only the pre-norm
stack has one more LayerNorm at the end, which starts as the identity
(weight 1, bias 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..checks import check_dropout, check_positive_int, check_token_ids
from ..models.encoder_decoder import TransformerEncoder

__all__ = ["EncoderTagger", "with_norm_first", "layer_gradient_norms"]


class EncoderTagger(nn.Module):
    """Token embedding, a :class:`~transformer_lite.models.encoder_decoder.TransformerEncoder`, and a linear classifier at every position.

    No position information is added: the tasks it is used for here (such as
    counting how often each symbol occurs) do not depend on order.

    Args:
        vocab_size: number of input ids.
        n_classes: number of output classes per position.
        n_layers, d_model, n_heads, d_ff: sizes of the encoder stack.
        norm_first: pre-norm if True (the stack then ends with a final LayerNorm), post-norm if False.
        dropout: dropout probability inside every block (attention weights, feed-forward hidden units,
            each sublayer's output before the residual add; see :class:`~transformer_lite.nn.blocks.TransformerBlock`).
            The embeddings and the classifier input are not dropped. Active in ``train()`` mode only.

    Attributes:
        embed (nn.Embedding), encoder (TransformerEncoder), head (nn.Linear(d_model, n_classes)).

    Raises:
        ValueError: for sizes that are not positive ints, ``dropout`` outside [0, 1), or as ``TransformerEncoder``.
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        norm_first: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_positive_int("EncoderTagger", "vocab_size", vocab_size)
        check_positive_int("EncoderTagger", "n_classes", n_classes)
        check_dropout("EncoderTagger", dropout)
        self.sizes = dict(
            vocab_size=vocab_size,
            n_classes=n_classes,
            n_layers=n_layers,
            d_model=d_model,
            n_heads=n_heads,
            d_ff=d_ff,
            dropout=dropout,
        )
        self.embed = nn.Embedding(vocab_size, d_model)
        self.encoder = TransformerEncoder(
            n_layers, d_model, n_heads, d_ff, dropout=dropout, norm_first=norm_first
        )
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, ids: Tensor) -> Tensor:
        """Map ``ids`` ``(B, L)`` (int64) to logits ``(B, L, n_classes)``.

        Raises:
            ValueError: if ``ids`` is not a 2-D integer tensor.
        """
        check_token_ids("EncoderTagger", "ids", ids, self.embed.num_embeddings)
        h, _ = self.encoder(self.embed(ids))  # (B, L, D)
        return self.head(h)  # (B, L, n_classes)


def with_norm_first(model: EncoderTagger, norm_first: bool = True) -> EncoderTagger:
    """A copy of ``model`` with every block switched to ``norm_first``, holding the same weights.

    The attention, feed-forward and layer-norm parameters of every block, the
    embedding and the classifier are copied; a pre-norm copy's final LayerNorm
    is new (weight 1, bias 0: the identity at initialization).

    Raises:
        ValueError: if ``model`` is not an :class:`EncoderTagger`.
    """
    if not isinstance(model, EncoderTagger):
        raise ValueError(
            f"with_norm_first: expected an EncoderTagger, received {type(model).__name__}"
        )
    copy = EncoderTagger(**model.sizes, norm_first=norm_first)
    missing, unexpected = copy.load_state_dict(model.state_dict(), strict=False)
    # Only the final norm may differ: present in a pre-norm stack, absent in a post-norm one.
    assert set(missing) | set(unexpected) <= {"encoder.norm.weight", "encoder.norm.bias"}, (
        missing,
        unexpected,
    )
    return copy


def layer_gradient_norms(layers: Sequence[nn.Module]) -> list[float]:
    """The L2 norm of the gradient of each layer's parameters, after ``loss.backward()``.

    All parameters of a layer are taken together: ``sqrt(sum of squared partial derivatives)``.

    Args:
        layers: e.g. ``model.encoder.layers``.

    Returns:
        One float per layer, first layer first.

    Raises:
        ValueError: if a layer has no parameter with a gradient (backward not run yet).
    """
    norms = []
    for i, layer in enumerate(layers):
        grads = [p.grad.flatten() for p in layer.parameters() if p.grad is not None]
        if not grads:
            raise ValueError(
                f"layer_gradient_norms: layer {i} has no gradients; call loss.backward() first"
            )
        norms.append(float(torch.cat(grads).double().norm()))
    return norms

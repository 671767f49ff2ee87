"""Post-norm against pre-norm at depth: the gradient norm of every layer.

The model compared, a per-position classifier runnable both ways with the same weights, is
:class:`~transformer_lite.models.tagger.EncoderTagger` (with
:func:`~transformer_lite.models.tagger.with_norm_first`).

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
from torch import nn

__all__ = ["layer_gradient_norms"]


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

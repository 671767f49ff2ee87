"""Layer normalization, written out.

Source: Ba, Kiros & Hinton (2016), "Layer Normalization", Eq. (4): each
position's feature vector is normalized by its own mean and (biased)
variance, then scaled and shifted by learned per-feature parameters.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LayerNorm"]


class LayerNorm(nn.Module):
    """Layer normalization over the last (feature) dimension.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` where ``mean`` and the
    **biased** variance ``var`` (divide by D, not D - 1) are taken over the
    ``d_model`` features of each position separately: no statistics are shared
    across positions or across examples of a batch.

    Args:
        d_model: number of features D.
        eps: added to the variance *inside* the square root (1e-5 as in
            ``nn.LayerNorm``; BERT-style models use 1e-12).

    Attributes:
        weight: ``(d_model,)`` learned scale, initialised to 1.
        bias: ``(d_model,)`` learned shift, initialised to 0.

    Raises:
        ValueError: if ``d_model`` is not positive or ``eps`` is negative.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        if d_model < 1 or eps < 0:
            raise ValueError(f"LayerNorm: expected d_model >= 1 and eps >= 0, received d_model={d_model}, eps={eps}")
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Normalize ``x`` of shape ``(..., d_model)``; returns the same shape and dtype.

        Raises:
            ValueError: if the last dimension of ``x`` is not ``d_model``.
        """
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"LayerNorm: expected input of shape (..., {self.d_model}), received {tuple(x.shape)}")
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by D
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., D)
        return x_hat * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"

    @classmethod
    def from_torch(cls, m: nn.LayerNorm) -> "LayerNorm":
        """Build a :class:`LayerNorm` equal to a ``torch.nn.LayerNorm`` over one dimension.

        A module without affine parameters (``elementwise_affine=False`` or
        ``bias=False``) becomes weight 1 / bias 0.

        Raises:
            ValueError: if ``m`` is not an ``nn.LayerNorm`` or normalizes over more than one dimension.
        """
        if not isinstance(m, nn.LayerNorm) or len(m.normalized_shape) != 1:
            shape = getattr(m, "normalized_shape", None)
            raise ValueError(f"LayerNorm.from_torch: expected nn.LayerNorm over one dimension (d_model,), "
                             f"received {type(m).__name__} with normalized_shape {shape}")
        ours = cls(m.normalized_shape[0], eps=m.eps)
        ref = m.weight if m.weight is not None else m.bias
        if ref is not None:
            ours = ours.to(dtype=ref.dtype, device=ref.device)
        with torch.no_grad():
            if m.weight is not None:
                ours.weight.copy_(m.weight)
            if m.bias is not None:
                ours.bias.copy_(m.bias)
        return ours

"""Layer normalization, written out.

Source: Ba, Kiros & Hinton (2016), "Layer Normalization", Eq. (4): each
position's feature vector is normalized by its own mean and (biased)
variance, then scaled and shifted by learned per-feature parameters.

Root-mean-square layer normalization (RMSNorm).

Source: Zhang & Sennrich (2019), "Root Mean Square Layer Normalization", Eq. (4):

    y = x / RMS(x) * g,    RMS(x) = sqrt(mean_i(x_i^2))

with, as in every implementation, a small ``eps`` added under the square root
so that an all-zero vector does not divide by zero.

Compared with :class:`~transformer_lite.nn.normalization.LayerNorm` there is no
mean subtraction and no bias: only the scale of each position's feature vector
is normalized. Llama-family models (SmolLM2 among them) use it before every
sublayer and before the language-model head.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..checks import check_last_dim
from .dtypes import compute_dtype

__all__ = ["LayerNorm", "RMSNorm"]


class _Norm(nn.Module):
    """What LayerNorm and RMSNorm share: the width ``d_model``, ``eps``, a gain ``weight`` initialised to 1."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        if not (d_model >= 1 and eps >= 0):
            raise ValueError(
                f"{type(self).__name__}: expected d_model >= 1 and eps >= 0, received d_model={d_model}, eps={eps}"
            )
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class LayerNorm(_Norm):
    """Layer normalization over the last (feature) dimension.

    Source: Ba, Kiros & Hinton (2016), Eq. (4).

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
        ValueError: for ``d_model < 1`` or ``eps < 0``.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__(d_model, eps)  # weight
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Normalize ``x`` of shape ``(..., d_model)``; returns the same shape and dtype.

        Raises:
            ValueError: for an ``x`` of another shape.
        """
        check_last_dim(self, x, self.d_model)
        h = x.to(compute_dtype(x.dtype))  # half precision: the statistics in float32
        mean = h.mean(dim=-1, keepdim=True)  # (..., 1)
        var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by D
        h_hat = (h - mean) / torch.sqrt(var + self.eps)  # (..., D)
        return (h_hat * self.weight + self.bias).to(x.dtype)

    @classmethod
    def from_torch(cls, m: nn.LayerNorm) -> LayerNorm:
        """Build a :class:`LayerNorm` equal to a ``torch.nn.LayerNorm`` over one dimension.

        A module without affine parameters (``elementwise_affine=False`` or
        ``bias=False``) becomes weight 1 / bias 0.

        Raises:
            ValueError: for another module, or a norm over more than one dimension.
        """
        from ..interop import layer_norm_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return layer_norm_from_torch(m, cls)


class RMSNorm(_Norm):
    """RMS normalization over the last (feature) dimension, with a learned gain.

    Source: Zhang & Sennrich (2019), Eq. (4).

    ``y = x / sqrt(mean(x**2) + eps) * weight``, the mean taken over the
    ``d_model`` features of each position separately.

    Args:
        d_model: number of features D.
        eps: added to the mean square *inside* the square root (1e-5 in Llama
            and SmolLM2; ``nn.RMSNorm`` defaults to the dtype's machine epsilon).

    Attributes:
        weight: ``(d_model,)`` learned gain ``g``, initialised to 1.

    Raises:
        ValueError: as :class:`LayerNorm`.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__(d_model, eps)  # weight

    def forward(self, x: Tensor) -> Tensor:
        """Normalize ``x`` of shape ``(..., d_model)``; as :meth:`LayerNorm.forward`."""
        check_last_dim(self, x, self.d_model)
        h = x.to(compute_dtype(x.dtype))  # half precision: the statistics in float32
        mean_square = (h * h).mean(dim=-1, keepdim=True)  # (..., 1)
        return (h * torch.rsqrt(mean_square + self.eps) * self.weight).to(x.dtype)  # (..., D)

    @classmethod
    def from_torch(cls, m: nn.RMSNorm) -> RMSNorm:
        """Build an :class:`RMSNorm` equal to a ``torch.nn.RMSNorm`` over one dimension.

        ``m.eps=None`` (torch's default) means the machine epsilon of the
        weight's dtype; a module without a weight (``elementwise_affine=False``)
        becomes gain 1.

        Raises:
            ValueError: for another module, or a norm over more than one dimension.
        """
        from ..interop import rms_norm_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return rms_norm_from_torch(m, cls)

"""The SwiGLU feed-forward network: a gated linear unit with the SiLU (Swish) gate.

Source: Shazeer (2020), "GLU Variants Improve Transformer", Sec. 2, the FFN_SwiGLU variant:

    FFN_SwiGLU(x) = (Swish_1(x W) * (x V)) W_2

with ``Swish_1(z) = z * sigmoid(z)`` (= SiLU) and ``*`` the element-wise
product, no biases. Llama-family models (SmolLM2 among them) use it; their
weights call ``W`` the *gate*, ``V`` the *up* and ``W_2`` the *down* projection.
With three matrices instead of two, a SwiGLU network with hidden width
``2/3 * 4 * d_model`` has about as many parameters as a ReLU network with ``4 * d_model``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["SwiGLUFeedForward"]


class SwiGLUFeedForward(nn.Module):
    """``down(silu(gate(x)) * up(x))``, applied at every position separately.

    Args:
        d_model: input and output width D.
        d_ff: hidden width (1536 in SmolLM2-135M, whose ``d_model`` is 576).
        dropout: dropout probability on the gated hidden vector (training only).
        bias: whether the three projections have biases (False in Shazeer 2020 and Llama).

    Attributes:
        gate_proj, up_proj: ``nn.Linear(d_model, d_ff)`` (``W`` and ``V`` above);
        down_proj: ``nn.Linear(d_ff, d_model)`` (``W_2``).

    Raises:
        ValueError: if ``d_model`` or ``d_ff`` is not positive.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        if d_model < 1 or d_ff < 1:
            raise ValueError(f"SwiGLUFeedForward: expected positive d_model and d_ff, received {d_model}, {d_ff}")
        self.d_model, self.d_ff = d_model, d_ff
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(..., d_model)`` to ``(..., d_model)``.

        Raises:
            ValueError: if the last dimension of ``x`` is not ``d_model``.
        """
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"SwiGLUFeedForward: expected input of shape (..., {self.d_model}), "
                             f"received {tuple(x.shape)}")
        gate = F.silu(self.gate_proj(x))  # (..., d_ff): silu(z) = z * sigmoid(z)
        hidden = gate * self.up_proj(x)  # (..., d_ff): the gate scales each hidden unit
        return self.down_proj(self.dropout(hidden))  # (..., D)

"""The position-wise feed-forward network.

Source: Vaswani et al. (2017), Sec. 3.3, Eq. (2): ``FFN(x) = max(0, x W1 + b1) W2 + b2``,
the same two-layer network applied to every position separately. BERT and
GPT-2 replace the ReLU by the GELU (Hendrycks & Gimpel, 2016).

The SwiGLU feed-forward network: a gated linear unit with the SiLU (Swish) gate.

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

from ..checks import check_last_dim, check_positive_sizes

__all__ = ["PositionwiseFeedForward", "SwiGLUFeedForward"]


# gelu: the exact (erf) form, as in BERT and nn.Transformer*
_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
}


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with a nonlinearity between them, applied at every position.

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
        ValueError: for an unknown activation or non-positive sizes.
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"PositionwiseFeedForward: expected activation 'relu' or 'gelu', received {activation!r}"
            )
        check_positive_sizes("PositionwiseFeedForward", d_model=d_model, d_ff=d_ff)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(..., d_model)`` to ``(..., d_model)``.

        Raises:
            ValueError: if the last dimension of ``x`` is not ``d_model``.
        """
        check_last_dim("PositionwiseFeedForward", x, self.d_model)
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (..., d_ff)
        return self.linear2(self.dropout(hidden))  # (..., D)


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
        check_positive_sizes("SwiGLUFeedForward", d_model=d_model, d_ff=d_ff)
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
        check_last_dim("SwiGLUFeedForward", x, self.d_model)
        gate = F.silu(self.gate_proj(x))  # (..., d_ff): silu(z) = z * sigmoid(z)
        hidden = gate * self.up_proj(x)  # (..., d_ff): the gate scales each hidden unit
        return self.down_proj(self.dropout(hidden))  # (..., D)

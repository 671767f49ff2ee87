"""Exercise checkers of chapter 6, ``notebooks/06_rnn_gradients.ipynb``:
an RNN step's Jacobian.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ._checking import _call, _check_tensor, _checker, _close, _diagnose, _gen

__all__ = [
    "check_rnn_step_jacobian",
]


# --------------------------------------------------------------------------- chapter 6: an RNN step's Jacobian


def _rnn_case(g, B, H):
    """A recurrent matrix and a tanh state with entries of both signs and magnitudes up to ~0.95."""
    w = torch.randn(H, H, generator=g, dtype=torch.float64) / math.sqrt(H)  # (H, H), not symmetric
    h = torch.tanh(1.8 * torch.randn(B, H, generator=g, dtype=torch.float64))  # (B, H), in (-1, 1)
    return w, h


@_checker("check_rnn_step_jacobian")
def check_rnn_step_jacobian(fn: Callable) -> None:
    """Check ``fn(weight_hh, h) -> J``: the step Jacobian of the Elman RNN ``h_t = tanh(a_t)``.

    ``weight_hh`` is ``(H, H)`` (the ``W_hh`` of ``a_t = W_ih x_t + W_hh h_{t-1} + b``) and ``h`` is
    ``(B, H)``, the *new* state ``h_t = tanh(a_t)``. Expected ``J`` of shape ``(B, H, H)`` with
    ``J[b, i, j] = d h_t[b, i] / d h_{t-1}[b, j] = (1 - h_t[b, i]**2) * W_hh[i, j]``, i.e.
    ``diag(1 - h_t**2) W_hh`` (:func:`transformer_lite.book.jacobians.rnn_step_jacobians`; Pascanu et al.,
    2013, Eq. 5). Cases include ``H = 1``, odd ``H`` and ``B = 1``; ``W_hh`` is never symmetric.

    Raises:
        AssertionError: naming the likely mistake (missing tanh derivative, transposed W_hh, ``1 - h``
            instead of ``1 - h**2``, ``tanh'`` applied to ``h`` as if it were the pre-activation, columns
            scaled instead of rows).
    """
    g = _gen(23)
    for B, H in [(3, 5), (1, 1), (2, 8), (1, 7)]:
        case = f"weight_hh of shape {(H, H)}, h of shape {(B, H)}"
        w, h = _rnn_case(g, B, H)
        out = _call(fn, w.clone(), h.clone())
        _check_tensor(out, "Jacobian", (B, H, H), case)
        ref = (1 - h**2)[:, :, None] * w  # (B, H, 1) * (H, H): row i scaled by tanh'(a_i)
        if _close(out, ref):
            continue
        variants = {
            "missing the tanh derivative: J = diag(1 - h_t**2) W_hh, not W_hh alone": w.expand(
                B, H, H
            ),
            "1 - h instead of 1 - h**2: tanh'(a) = 1 - tanh(a)**2": (1 - h)[:, :, None] * w,
            "transposed W_hh: row i of J is d h_t[i] / d h_{t-1}, which is row i of W_hh, scaled by "
            "1 - h_t[i]**2": (1 - h**2)[:, :, None] * w.T,
            "applied tanh' to h_t as if it were the pre-activation: h_t is already tanh(a_t), so "
            "tanh'(a_t) = 1 - h_t**2": (1 - torch.tanh(h) ** 2)[:, :, None] * w,
            "scaled the columns instead of the rows: J = diag(1 - h_t**2) W_hh multiplies row i by "
            "1 - h_t[i]**2": w * (1 - h**2)[:, None, :],
        }
        raise _diagnose(out, variants, case, "Jacobian", ref)

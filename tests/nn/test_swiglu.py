"""Tests for transformer_lite.nn.blocks.SwiGLUFeedForward.

Oracles: a hand-computed one-unit case; the formula of Shazeer (2020, Eq. 6)
written with ``F.silu`` and matrix products in float64; the SiLU written as
``z * sigmoid(z)``; gradcheck; dropout behaviour; error paths.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import F64
from transformer_lite.nn.blocks import SwiGLUFeedForward


def test_hand_computed_single_unit():
    ff = SwiGLUFeedForward(1, 1).double()
    with torch.no_grad():
        ff.gate_proj.weight.fill_(1.0)
        ff.up_proj.weight.fill_(3.0)
        ff.down_proj.weight.fill_(0.5)
    x = torch.tensor([[2.0]], dtype=F64)
    # gate = silu(2) = 2 * sigmoid(2); up = 6; out = 0.5 * gate * up.
    expected = 0.5 * (2.0 / (1.0 + math.exp(-2.0))) * 6.0
    assert ff(x).item() == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize("bias", [False, True])
def test_matches_formula_with_silu(bias):
    torch.manual_seed(0)
    ff = SwiGLUFeedForward(6, 10, bias=bias).double()
    x = torch.randn(2, 4, 6, dtype=F64)
    Wg, Wu, Wd = ff.gate_proj.weight, ff.up_proj.weight, ff.down_proj.weight
    bg, bu, bd = (
        (ff.gate_proj.bias, ff.up_proj.bias, ff.down_proj.bias) if bias else (0.0, 0.0, 0.0)
    )
    gate = x @ Wg.T + bg
    expected = (F.silu(gate) * (x @ Wu.T + bu)) @ Wd.T + bd
    torch.testing.assert_close(ff(x), expected, atol=1e-13, rtol=1e-12)
    swish = gate * torch.sigmoid(gate)  # Swish_1 written out: the same as F.silu
    torch.testing.assert_close(
        (swish * (x @ Wu.T + bu)) @ Wd.T + bd, expected, atol=1e-13, rtol=1e-12
    )
    assert (ff.gate_proj.bias is None) == (not bias)


def test_parameter_count_and_shapes():
    ff = SwiGLUFeedForward(576, 1536)
    # SmolLM2's feed-forward, no biases
    assert sum(p.numel() for p in ff.parameters()) == 3 * 576 * 1536
    assert ff(torch.randn(3, 7, 576)).shape == (3, 7, 576)
    assert ff(torch.randn(576)).shape == (576,)


def test_dropout_only_in_training():
    torch.manual_seed(0)
    ff = SwiGLUFeedForward(4, 8, dropout=0.5).double()
    x = torch.randn(5, 4, dtype=F64)
    ff.eval()
    torch.testing.assert_close(ff(x), ff(x))
    ff.train()
    assert not torch.allclose(ff(x), ff.eval()(x))


def test_gradcheck():
    ff = SwiGLUFeedForward(3, 5, bias=True).double()
    x = torch.randn(2, 3, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(ff, (x,))


def test_errors():
    with pytest.raises(ValueError, match="positive int d_model and d_ff"):
        SwiGLUFeedForward(0, 4)
    with pytest.raises(ValueError, match="positive int d_model and d_ff"):
        SwiGLUFeedForward(4, 0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\), received \(2, 3\)"):
        SwiGLUFeedForward(4, 8)(torch.randn(2, 3))

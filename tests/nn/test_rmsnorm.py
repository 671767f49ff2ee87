"""Tests for transformer_lite.nn.normalization.RMSNorm.

Oracles: a hand-computed case; ``torch.nn.RMSNorm`` in float64 with copied
weights (``RMSNorm.from_torch``); LayerNorm, which equals RMSNorm on inputs whose
features have zero mean; properties (scale invariance, unit RMS); gradcheck;
every error path.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.conftest import F64
from transformer_lite import LayerNorm
from transformer_lite.nn.normalization import RMSNorm


def test_hand_computed():
    # x = (3, 4): mean square (9 + 16) / 2 = 12.5, so y = x / sqrt(12.5 + eps) * g.
    norm = RMSNorm(2, eps=0.5).double()
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, -2.0]))
    y = norm(torch.tensor([[3.0, 4.0]], dtype=F64))
    expected = torch.tensor([[3.0 / math.sqrt(13.0), -8.0 / math.sqrt(13.0)]], dtype=F64)
    torch.testing.assert_close(
        y,
        expected,
        atol=1e-14,
        rtol=0,
        msg="is eps inside the square root, and is the mean taken over squares?",
    )


@pytest.mark.parametrize("eps", [1e-5, 1e-2, None])
def test_matches_torch_rmsnorm(eps):
    torch.manual_seed(0)
    ref = nn.RMSNorm(16, eps=eps, dtype=F64)
    with torch.no_grad():
        ref.weight.copy_(1 + 0.5 * torch.randn(16, dtype=F64))
    ours = RMSNorm.from_torch(ref)
    assert ours.weight.dtype == F64 and ours.eps == (
        eps if eps is not None else torch.finfo(F64).eps
    )
    x = torch.randn(3, 5, 16, dtype=F64) * 3 + 1  # non-zero mean: RMSNorm must not subtract it
    torch.testing.assert_close(ours(x), ref(x), atol=1e-13, rtol=1e-12)


def test_equals_layernorm_on_zero_mean_features():
    x = torch.randn(6, 10, dtype=F64)
    x = x - x.mean(dim=-1, keepdim=True)  # zero mean: variance == mean square
    rms, ln = RMSNorm(10, eps=1e-5).double(), LayerNorm(10, eps=1e-5).double()
    torch.testing.assert_close(rms(x), ln(x), atol=1e-13, rtol=0)
    y = x + 1.0  # a shift: LayerNorm removes it, RMSNorm does not
    assert not torch.allclose(rms(y), ln(y), atol=1e-3)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(d=st.integers(1, 32), scale=st.floats(1e-3, 1e3), seed=st.integers(0, 10_000))
def test_scale_invariance_and_unit_rms(d, scale, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, d, generator=g, dtype=F64) + 0.1
    norm = RMSNorm(d, eps=0.0).double()
    y = norm(x)
    torch.testing.assert_close(norm(scale * x), y, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(y.pow(2).mean(dim=-1), torch.ones(3, dtype=F64), atol=1e-12, rtol=0)


def test_keeps_dtype_and_gradcheck():
    assert RMSNorm(4)(torch.randn(2, 4)).dtype == torch.float32
    norm = RMSNorm(5, eps=1e-3).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(5, dtype=F64))
    x = torch.randn(3, 5, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))
    assert torch.autograd.gradcheck(
        lambda w: torch.func.functional_call(norm, {"weight": w}, (x,)),
        (norm.weight.detach().clone().requires_grad_(),),
    )


def test_errors():
    with pytest.raises(ValueError, match="d_model >= 1"):
        RMSNorm(0)
    with pytest.raises(ValueError, match="eps >= 0"):
        RMSNorm(4, eps=-1.0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\), received \(2, 5\)"):
        RMSNorm(4)(torch.randn(2, 5))
    with pytest.raises(ValueError, match="nn.RMSNorm"):
        RMSNorm.from_torch(nn.LayerNorm(4))
    with pytest.raises(ValueError, match="one dimension"):
        RMSNorm.from_torch(nn.RMSNorm([2, 4]))

"""Tests for transformer_lite.chapters.analysis.softmax_jacobian (chapter 1's scaling measurement).

Oracles: torch.func.jacrev of torch.softmax in float64 (autograd, independent of
the closed form), for random shapes (hypothesis); two hand cases worked out on
paper: two weights of 1/2 give [[1/4, -1/4], [-1/4, 1/4]], whose largest
eigenvalue is 1/2, and a one-hot row gives the zero matrix (a saturated softmax).
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite.chapters.analysis import softmax_jacobian


def test_two_equal_weights_by_hand():
    jac = softmax_jacobian(torch.tensor([0.5, 0.5], dtype=torch.float64))
    expected = torch.tensor([[0.25, -0.25], [-0.25, 0.25]], dtype=torch.float64)
    torch.testing.assert_close(jac, expected)
    assert torch.linalg.eigvalsh(jac)[-1].item() == pytest.approx(0.5)


def test_one_hot_row_has_zero_jacobian():
    jac = softmax_jacobian(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    assert torch.equal(jac, torch.zeros(3, 3, dtype=torch.float64))


@settings(max_examples=30, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    n_keys=st.integers(1, 9),
    scale=st.floats(0.1, 20.0),
    seed=st.integers(0, 2**16),
)
def test_matches_autograd(batch, n_keys, scale, seed):
    g = torch.Generator().manual_seed(seed)
    z = scale * torch.randn(*batch, n_keys, generator=g, dtype=torch.float64)
    flat = z.reshape(-1, n_keys)
    # autograd: one (S, S) Jacobian of softmax per row
    expected = torch.stack([torch.func.jacrev(torch.softmax)(row, -1) for row in flat])
    ours = softmax_jacobian(torch.softmax(z, dim=-1))
    assert ours.shape == (*batch, n_keys, n_keys)
    torch.testing.assert_close(ours.reshape(-1, n_keys, n_keys), expected)
    # symmetric, rows sum to 0, spectral norm in [0, 1/2]
    torch.testing.assert_close(ours, ours.transpose(-2, -1))
    torch.testing.assert_close(ours.sum(-1), torch.zeros_like(z), atol=1e-12, rtol=0)
    top = torch.linalg.eigvalsh(ours)[..., -1]
    assert (top >= -1e-12).all() and (top <= 0.5 + 1e-12).all()


def test_rejects_a_scalar():
    with pytest.raises(ValueError, match=r"expected weights of shape \(\.\.\., S\)"):
        softmax_jacobian(torch.tensor(1.0))

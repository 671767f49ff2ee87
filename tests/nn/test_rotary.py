"""Rotary position embedding (RoPE). Oracles: the rotation written with complex numbers
(RoFormer, Su et al., Sec. 3.2: pair (x_2j, x_2j+1) is the complex number x_2j + i x_2j+1,
multiplied by exp(i m theta_j)); hand-computed angles; the relative-position property;
gradcheck; error paths."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite import RotaryEmbedding, apply_rotary


def complex_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.complex(x[..., 0::2], x[..., 1::2])  # (..., L, d/2)
    rot = torch.polar(torch.ones_like(theta), positions.double()[:, None] * theta)  # exp(i m theta)
    out = z * rot
    return torch.stack((out.real, out.imag), dim=-1).flatten(-2)


def test_matches_complex_multiplication():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 8, generator=g, dtype=torch.float64)
    pos = torch.arange(5, 12)
    assert torch.allclose(apply_rotary(x, pos), complex_rope(x, pos), atol=1e-12)


def test_hand_computed_two_features():
    # d = 2: one pair, theta_0 = 1, so position m rotates by m radians.
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    out = apply_rotary(x, torch.tensor([0, 1, 2]))
    expected = torch.tensor(
        [[1.0, 0.0], [math.cos(1), math.sin(1)], [-math.sin(2), math.cos(2)]], dtype=torch.float64
    )
    assert torch.allclose(out, expected, atol=1e-12)


def test_position_zero_is_identity_and_norms_are_kept():
    x = torch.randn(4, 6, 16, dtype=torch.float64)
    assert torch.equal(apply_rotary(x[:, :1], torch.tensor([0])), x[:, :1])
    out = RotaryEmbedding(16)(x, offset=100)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-12)


def test_non_interleaved_is_a_feature_permutation_of_interleaved():
    x = torch.randn(5, 12, dtype=torch.float64)
    pos = torch.arange(5)
    # interleaved index -> half layout
    perm = torch.cat([torch.arange(0, 12, 2), torch.arange(1, 12, 2)])
    half = apply_rotary(x[:, perm], pos, interleaved=False)
    assert torch.allclose(half, apply_rotary(x, pos)[:, perm], atol=1e-12)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    m=st.integers(0, 500),
    n=st.integers(0, 500),
    shift=st.integers(-200, 200),
    half=st.integers(1, 8),
)
def test_score_depends_only_on_offset(m, n, shift, half):
    d = 2 * half
    g = torch.Generator().manual_seed(m * 1000 + n)
    q, k = (
        torch.randn(1, d, generator=g, dtype=torch.float64),
        torch.randn(1, d, generator=g, dtype=torch.float64),
    )
    shift = max(shift, -min(m, n))
    score = (apply_rotary(q, torch.tensor([m])) * apply_rotary(k, torch.tensor([n]))).sum()
    shifted = (
        apply_rotary(q, torch.tensor([m + shift])) * apply_rotary(k, torch.tensor([n + shift]))
    ).sum()
    assert torch.allclose(score, shifted, atol=1e-9)


def test_offset_matches_explicit_positions_and_dtype_kept():
    x = torch.randn(3, 5, 8)
    assert torch.allclose(
        RotaryEmbedding(8, base=100000.0)(x, offset=7),
        apply_rotary(x, torch.arange(7, 12), base=100000.0),
    )
    assert RotaryEmbedding(8)(x.to(torch.bfloat16)).dtype == torch.bfloat16


def test_gradcheck():
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: RotaryEmbedding(6)(t, offset=3), (x,))


def test_errors():
    with pytest.raises(ValueError, match="even"):
        apply_rotary(torch.randn(3, 5), torch.arange(3))
    with pytest.raises(
        ValueError, match=r"positions of shape \(L,\), received \(3, 4\) and \(4,\)"
    ):
        apply_rotary(torch.randn(3, 4), torch.arange(4))
    with pytest.raises(ValueError, match="positive even d_head"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match=r"\(\.\.\., 8\), received \(2, 6\)"):
        RotaryEmbedding(8)(torch.randn(2, 6))


# --- the cached cosines and sines of RotaryEmbedding (issue 13: faster decoding) ---


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("interleaved", [True, False])
def test_cached_module_equals_recomputed_rotation_bit_for_bit(dtype, interleaved):
    # Decoding: a prompt, then one position at a time, past the first cache size (the cache grows).
    rope = RotaryEmbedding(8, base=500.0, interleaved=interleaved)
    g = torch.Generator().manual_seed(1)
    steps = [(0, 5)] + [(s, 1) for s in range(5, 23)] + [(23, 40)]
    for offset, L in steps:
        x = torch.randn(2, 3, L, 8, generator=g, dtype=dtype)
        expected = apply_rotary(
            x, torch.arange(offset, offset + L), base=500.0, interleaved=interleaved
        )
        assert torch.equal(rope(x, offset=offset), expected)
    # and against the complex-number oracle, for the float64 case
    if dtype == torch.float64 and interleaved:
        x = torch.randn(1, 4, 8, generator=g, dtype=dtype)
        close = torch.allclose(
            rope(x, offset=60), complex_rope(x, torch.arange(60, 64), base=500.0), atol=1e-12
        )
        assert close


def test_cache_is_computed_once_per_dtype_and_grows_only_when_needed():
    rope = RotaryEmbedding(4)
    cos, sin = rope.cos_sin(10, torch.float32, "cpu")
    assert cos.shape == sin.shape == (10, 2)
    again = rope.cos_sin(7, torch.float32, "cpu")
    assert again[0] is cos and again[1] is sin  # shorter contexts reuse the cached rows
    grown = rope.cos_sin(11, torch.float32, "cpu")
    assert grown[0].shape[0] >= 11 and torch.equal(grown[0][:10], cos)
    assert rope.cos_sin(3, torch.float64, "cpu")[0].dtype == torch.float64  # one cache per dtype
    assert rope.state_dict() == {}  # nothing cached is saved with a model


def test_cache_filled_under_inference_mode_serves_training():
    rope = RotaryEmbedding(4)
    with torch.inference_mode():
        rope(torch.randn(1, 6, 4))
    x = torch.randn(1, 6, 4, requires_grad=True)
    rope(x).sum().backward()  # would raise "Inference tensors cannot be saved for backward"
    assert x.grad is not None


@pytest.mark.parametrize("d", [1, 2, 7, 64])
def test_rotation_frequencies_against_the_papers_formula(d):
    from transformer_lite.nn.positional import rotation_frequencies

    expected = [10000.0 ** (-2 * i / d) for i in range((d + 1) // 2)]  # omega_i = 10000^(-2i/d)
    assert rotation_frequencies(d).tolist() == pytest.approx(expected, rel=1e-15)

"""Tests for the sinusoidal position encoding (transformer_lite.nn.positional) and permutation equivariance.

Oracles: values written out by hand from Vaswani et al. (2017), Sec. 3.5
(``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(...)``); the
independent reference in ``transformer_lite.chapters.exercises``; the rotation matrix
built from the angle-addition identities; the closed form of the dot product
``PE[p] . PE[p+k] = sum_i cos(k omega_i)``. Permutation equivariance: attention
with no positional information is checked against the permuted output; with
sinusoids, and with RoPE (relative biases: tests/nn/test_relative_position.py), it must fail.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import F64, close
from transformer_lite import (
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    apply_rotary,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from transformer_lite.chapters.exercises import (
    check_sinusoidal_positional_encoding,
    reference_sinusoidal_positional_encoding,
)


def pe64(seq_len, d_model, **kw):
    return sinusoidal_positional_encoding(seq_len, d_model, dtype=F64, **kw)


def rotation_for_offset(k, d_model, base=10000.0):
    """M_k with PE[p + k] = M_k @ PE[p]: one 2x2 rotation per (sin, cos) pair, from
    sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b."""
    n_pairs = d_model // 2  # for an odd d_model the lone last sine is left out
    m = torch.zeros(2 * n_pairs, 2 * n_pairs, dtype=F64)
    for i in range(n_pairs):
        w = k / base ** (2 * i / d_model)
        c, s = math.cos(w), math.sin(w)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=F64)
    return m


# --------------------------------------------------------------------------- hand-computed values


def test_hand_computed_odd_d_model_3():
    # d_model = 3: pair 0 (features 0, 1) has omega = 1; pair 1 is a lone sine (feature 2),
    # omega = 1 / 10000^(2/3) = 10^(-8/3) = 0.0021544346900318843.
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0],  # pos 0: sin 0, cos 0, sin 0
            # sin 1, cos 1, sin(10^(-8/3))
            [
                0.8414709848078965,
                0.5403023058681398,
                0.0021544330233656045,
            ],
        ],
        dtype=F64,
    )
    close(pe64(2, 3), expected, atol=1e-15)


def test_hand_computed_d_model_4():
    # d_model = 4: omega_0 = 1, omega_1 = 1 / 10000^(2/4) = 0.01.
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            # sin/cos 1, 0.01
            [
                0.8414709848078965,
                0.5403023058681398,
                0.009999833334166664,
                0.9999500004166653,
            ],
            # sin/cos 2, 0.02
            [
                0.9092974268256817,
                -0.4161468365471424,
                0.01999866669333308,
                0.9998000066665778,
            ],
        ],
        dtype=F64,
    )
    close(pe64(3, 4), expected, atol=1e-15)


def test_d_model_1_is_a_single_sine():
    close(pe64(6, 1)[:, 0], torch.sin(torch.arange(6, dtype=F64)))


def test_layout_is_interleaved_not_concatenated():
    pe = pe64(7, 6)
    pos = torch.arange(7, dtype=F64)
    close(pe[:, 0], torch.sin(pos), msg="feature 0 must be sin(pos)")
    close(pe[:, 1], torch.cos(pos), msg="feature 1 must be cos(pos): sines and cosines interleave")
    close(
        pe[:, 4], torch.sin(pos / 10000 ** (4 / 6)), msg="feature 2i = 4 uses exponent 2i/d = 4/6"
    )


@pytest.mark.parametrize("d_model", [1, 2, 3, 5, 8, 17, 64, 65])
@pytest.mark.parametrize("seq_len", [1, 3, 100])
def test_agrees_with_exercise_reference(seq_len, d_model):
    close(pe64(seq_len, d_model), reference_sinusoidal_positional_encoding(seq_len, d_model))


def test_exercise_checker_accepts_the_package_function(capsys):
    check_sinusoidal_positional_encoding(sinusoidal_positional_encoding)
    assert "all checks passed" in capsys.readouterr().out


def test_dtype_device_and_range():
    pe = sinusoidal_positional_encoding(50, 16)
    assert pe.dtype == torch.float32 and pe.shape == (50, 16) and pe.device.type == "cpu"
    assert pe.abs().max() <= 1.0
    assert sinusoidal_positional_encoding(3, 4, dtype=torch.bfloat16).dtype == torch.bfloat16
    close(pe.double(), pe64(50, 16), atol=1e-6, rtol=0)


def test_base_argument():
    # 100^(2/4) = 10
    close(pe64(5, 4, base=100.0)[:, 2], torch.sin(torch.arange(5, dtype=F64) / 10.0))


# --------------------------------------------------------------------------- the offset property


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@settings(max_examples=30, deadline=None, derandomize=True)
@given(half=st.integers(1, 12), k=st.integers(0, 300))
def test_shift_by_k_is_one_rotation_for_every_position(half, k):
    d = 2 * half
    pe = pe64(200 + k, d)
    m = rotation_for_offset(k, d)
    close(pe[k:], pe[:200] @ m.T, atol=1e-9, rtol=0)  # row p + k == M_k @ row p, for all p = 0..199
    close(m @ m.T, torch.eye(d, dtype=F64), atol=1e-12, rtol=0)  # a rotation: orthogonal


def test_shift_map_found_from_data_is_the_rotation():
    # Independent of the construction above: fit the linear map PE[p] -> PE[p + k] by least squares
    # over many positions (base 100 keeps the low frequency well conditioned) and compare.
    d, k, base = 4, 3, 100.0
    pe = sinusoidal_positional_encoding(80, d, base=base, dtype=F64)
    fitted = torch.linalg.lstsq(
        pe[:-k], pe[k:]
    ).solution.T  # (d, d) with pe[k:] ~= pe[:-k] @ fitted.T
    close(fitted, rotation_for_offset(k, d, base=base), atol=1e-9, rtol=0)


def test_odd_d_model_shift_holds_for_all_features_but_the_lone_sine():
    pe = pe64(60, 7)
    m = rotation_for_offset(5, 7)  # (6, 6): the three full pairs, omega_i = 10000^(-2i/7)
    close(pe[5:, :6], pe[:55, :6] @ m.T, atol=1e-9, rtol=0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    half=st.integers(1, 16),
    p1=st.integers(0, 500),
    p2=st.integers(0, 500),
    k=st.integers(-200, 200),
)
def test_dot_product_depends_only_on_offset(half, p1, p2, k):
    d = 2 * half
    p1, p2 = max(p1, -k), max(p2, -k)  # keep p + k >= 0
    pe = pe64(max(p1, p2) + max(k, 0) + 1, d)
    omegas = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    closed_form = torch.cos(
        k * omegas
    ).sum()  # sum_i sin(a)sin(a+b) + cos(a)cos(a+b) = sum_i cos(b)
    close(pe[p1] @ pe[p1 + k], closed_form, atol=1e-9, rtol=0)
    close(pe[p2] @ pe[p2 + k], closed_form, atol=1e-9, rtol=0)


def test_dot_product_for_odd_d_model_has_a_position_dependent_term():
    # Documented caveat: the lone sine adds sin(p w) sin((p + k) w), which depends on p.
    d, k = 3, 4
    pe = pe64(200, d)
    w = 10000 ** (-2 / 3)
    for p in (0, 50, 150):
        expected = math.cos(k) + math.sin(p * w) * math.sin((p + k) * w)
        assert pe[p] @ pe[p + k] == pytest.approx(expected, abs=1e-12)
    assert abs(float(pe[0] @ pe[k] - pe[150] @ pe[150 + k])) > 1e-3


# --------------------------------------------------------------------------- the module


def test_module_adds_encoding_with_offset():
    mod = SinusoidalPositionalEncoding(6, max_len=20)
    x = torch.randn(2, 5, 6, dtype=F64)
    close(mod(x), x + pe64(5, 6))
    close(mod(x, offset=7), x + pe64(12, 6)[7:])
    assert list(mod.parameters()) == [] and mod.state_dict() == {}


def test_module_offset_step_by_step_equals_whole_sequence():
    mod = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.randn(1, 10, 8, dtype=F64)
    steps = torch.cat([mod(x[:, t : t + 1], offset=t) for t in range(10)], dim=1)
    close(steps, mod(x))


def test_module_keeps_dtype_and_is_exact_in_float64_after_float32_cast():
    mod = SinusoidalPositionalEncoding(4, max_len=8).float()
    x = torch.zeros(1, 8, 4, dtype=F64)
    close(mod(x)[0], pe64(8, 4), atol=1e-15)
    assert mod(torch.zeros(1, 3, 4, dtype=torch.bfloat16)).dtype == torch.bfloat16


def test_module_dropout_only_in_training():
    torch.manual_seed(0)
    mod = SinusoidalPositionalEncoding(16, max_len=32, dropout=0.5)
    x = torch.randn(2, 10, 16)
    assert torch.equal(mod.eval()(x), x + sinusoidal_positional_encoding(10, 16))
    y = mod.train()(x)
    assert (y == 0).float().mean() > 0.2


def test_errors():
    with pytest.raises(ValueError, match="seq_len to be a positive int, received 0"):
        sinusoidal_positional_encoding(0, 4)
    with pytest.raises(ValueError, match="d_model to be a positive int, received True"):
        sinusoidal_positional_encoding(3, True)
    with pytest.raises(ValueError, match="base > 1"):
        sinusoidal_positional_encoding(3, 4, base=1.0)
    with pytest.raises(
        ValueError, match="floating dtype, received base=10000.0, dtype torch.int64"
    ):
        sinusoidal_positional_encoding(3, 4, dtype=torch.int64)
    with pytest.raises(ValueError, match="max_len to be a positive int"):
        SinusoidalPositionalEncoding(4, 0)
    with pytest.raises(ValueError, match="dropout probability 0 <= p < 1"):
        SinusoidalPositionalEncoding(4, 8, dropout=1.0)
    mod = SinusoidalPositionalEncoding(4, max_len=8)
    with pytest.raises(
        ValueError, match=r"positions 6..8 requested, but max_len=8 allows positions 0..7"
    ):
        mod(torch.zeros(1, 3, 4), offset=6)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, len, 4\), received \(3, 4\)"):
        mod(torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"received \(1, 3, 5\)"):
        mod(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="int offset >= 0, received -1"):
        mod(torch.zeros(1, 3, 4), offset=-1)


# --------------------------------------------------------------------------- permutation equivariance


def _attention(seed=0, d=8, h=2):
    torch.manual_seed(seed)
    return MultiHeadAttention(d, h).to(F64).eval()


def _rope_self_attention(mha, x):
    """Self-attention of ``mha`` with RoPE applied to its per-head queries and keys."""
    B, L, _ = x.shape
    pos = torch.arange(L)
    q = apply_rotary(mha._split_heads(mha.q_proj(x)), pos)  # (B, H, L, d_head)
    k = apply_rotary(mha._split_heads(mha.k_proj(x)), pos)
    v = mha._split_heads(mha.v_proj(x))
    heads, _ = scaled_dot_product_attention(q, k, v)
    return mha.out_proj(heads.transpose(1, 2).reshape(B, L, mha.d_model))


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), L=st.integers(2, 9))
def test_self_attention_without_positions_is_permutation_equivariant(seed, L):
    mha = _attention(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, L, 8, dtype=F64, generator=g)
    perm = torch.randperm(L, generator=g)
    y, w, _ = mha(x, x, x)
    y_p, w_p, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    close(y_p, y[:, perm])  # permuting the inputs permutes the outputs, exactly
    close(w_p, w[:, :, perm][:, :, :, perm])


def _a_permutation_that_moves_something(L, seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(L, generator=g)
        if not torch.equal(perm, torch.arange(L)):
            return perm


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sinusoidal_positions_break_permutation_equivariance(seed):
    mha = _attention(seed)
    pos = SinusoidalPositionalEncoding(8, max_len=16)
    x = torch.randn(2, 6, 8, dtype=F64, generator=torch.Generator().manual_seed(seed))
    perm = _a_permutation_that_moves_something(6, seed)
    xp = pos(x)
    y = mha(xp, xp, xp)[0]
    xq = pos(x[:, perm])
    y_p = mha(xq, xq, xq)[0]
    assert (y_p - y[:, perm]).abs().max() > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rope_breaks_permutation_equivariance(seed):
    mha = _attention(seed)
    x = torch.randn(2, 6, 8, dtype=F64, generator=torch.Generator().manual_seed(seed))
    perm = _a_permutation_that_moves_something(6, seed)
    # Control: at position 0 for every row (no rotation) the helper is plain attention.
    close(_rope_self_attention(mha, x[:, :1]), mha(x[:, :1], x[:, :1], x[:, :1])[0])
    y = _rope_self_attention(mha, x)
    y_p = _rope_self_attention(mha, x[:, perm])
    assert (y_p - y[:, perm]).abs().max() > 1e-3

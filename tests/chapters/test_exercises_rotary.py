"""Tests for transformer_lite.chapters.exercises.check_rotary: it must accept RoPE and name each classic mistake.

Oracle: learner-style implementations written here from the paper's formula (Su et al., RoFormer,
Eq. 34), independently of the checker's variants (which call ``apply_rotary``): a reference that
treats each feature pair as a complex number and multiplies it by ``exp(i m theta_j)``, a loop
over pairs with explicit cos/sin, and one deliberately wrong implementation per mistake; each
must be rejected with a message naming *that* mistake.
"""

import math

import pytest
import torch

from transformer_lite.chapters.exercises import check_rotary


def _theta(d, exponent_numerator=2.0):
    j = torch.arange(d // 2, dtype=torch.float64)
    return 10000.0 ** (-exponent_numerator * j / d)  # (d/2,)


def rope_complex(x, positions):
    """Pairs (2j, 2j+1) as complex numbers a + ib, multiplied by exp(i * m * theta_j)."""
    # (..., L, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    angles = positions.double()[:, None] * _theta(x.shape[-1])  # (L, d/2)
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def rope_loop(x, positions):
    out = x.clone()
    d = x.shape[-1]
    for m, pos in enumerate(positions.tolist()):
        for j in range(d // 2):
            c, s = math.cos(pos * 10000 ** (-2 * j / d)), math.sin(pos * 10000 ** (-2 * j / d))
            a, b = x[..., m, 2 * j], x[..., m, 2 * j + 1]
            out[..., m, 2 * j], out[..., m, 2 * j + 1] = a * c - b * s, a * s + b * c
    return out


def _rotate(x, a_idx, b_idx, angles):
    a, b = x[..., a_idx], x[..., b_idx]
    out = x.clone()
    out[..., a_idx] = a * torch.cos(angles) - b * torch.sin(angles)
    out[..., b_idx] = a * torch.sin(angles) + b * torch.cos(angles)
    return out


def rope_pairs_j_and_j_plus_half(x, positions):
    d = x.shape[-1]
    return _rotate(x, slice(0, d // 2), slice(d // 2, d), positions.double()[:, None] * _theta(d))


def rope_wrong_sign(x, positions):
    d = x.shape[-1]
    return _rotate(x, slice(0, d, 2), slice(1, d, 2), -positions.double()[:, None] * _theta(d))


def rope_positions_plus_one(x, positions):
    d = x.shape[-1]
    return _rotate(x, slice(0, d, 2), slice(1, d, 2), (positions.double()[:, None] + 1) * _theta(d))


def rope_positions_minus_one(x, positions):
    d = x.shape[-1]
    return _rotate(x, slice(0, d, 2), slice(1, d, 2), (positions.double()[:, None] - 1) * _theta(d))


def rope_ignores_positions(x, positions):
    d, L = x.shape[-1], x.shape[-2]
    return _rotate(
        x, slice(0, d, 2), slice(1, d, 2), torch.arange(L, dtype=torch.float64)[:, None] * _theta(d)
    )


def rope_exponent_j_over_d(x, positions):
    d = x.shape[-1]
    return _rotate(x, slice(0, d, 2), slice(1, d, 2), positions.double()[:, None] * _theta(d, 1.0))


def rope_identity(x, positions):
    return x.clone()


def _not_implemented(x, positions):
    raise NotImplementedError


@pytest.mark.parametrize("reference", [rope_complex, rope_loop])
def test_reference_passes(reference, capsys):
    assert check_rotary(reference) is None
    assert "check_rotary: all checks passed" in capsys.readouterr().out


def test_float32_reference_passes(capsys):
    assert check_rotary(lambda x, p: rope_complex(x.float(), p).float()) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, expected_message",
    [
        (rope_pairs_j_and_j_plus_half, r"Likely mistake: wrong pairing"),
        (rope_wrong_sign, r"Likely mistake: wrong sign"),
        (rope_positions_plus_one, r"Likely mistake: positions off by one \(one too far\)"),
        (rope_positions_minus_one, r"Likely mistake: positions off by one \(one short\)"),
        (rope_ignores_positions, r"Likely mistake: positions argument ignored"),
        (rope_exponent_j_over_d, r"Likely mistake: wrong exponent"),
        (rope_identity, r"Likely mistake: no rotation"),
    ],
    ids=lambda v: v.__name__ if callable(v) else "",
)
def test_wrong_implementation_is_named(wrong, expected_message):
    with pytest.raises(AssertionError, match=expected_message):
        check_rotary(wrong)


def test_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_rotary(lambda x, p: x * 2)


def test_wrong_shape_reports_expected_shape():
    with pytest.raises(
        AssertionError, match=r"expected shape \(2, 3, 4, 6\), received \(3, 4, 6\)"
    ):
        check_rotary(lambda x, p: rope_complex(x, p)[0])


def test_crash_is_reported_as_a_failed_check():
    with pytest.raises(AssertionError, match="your function raised ZeroDivisionError"):
        check_rotary(lambda x, p: 1 / 0)


def test_not_implemented_prints_and_returns_none(capsys):
    assert check_rotary(_not_implemented) is None
    assert "not implemented yet" in capsys.readouterr().out

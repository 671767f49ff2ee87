"""Exercise checkers of chapter 3, ``notebooks/03_positional_encodings.ipynb``:
the sinusoidal encoding and rotary position embedding.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ...nn.positional import apply_rotary
from ._checking import _call, _check_tensor, _checker, _close, _diagnose, _gen

__all__ = [
    "reference_sinusoidal_positional_encoding",
    "check_sinusoidal_positional_encoding",
    "check_rotary",
]


# --------------------------------------------------------------------------- sinusoidal encoding


def reference_sinusoidal_positional_encoding(
    seq_len: int,
    d_model: int,
    base: float = 10000.0,
    start: int = 0,
    layout: str = "interleaved",
    exponent: str = "2i",
) -> Tensor:
    """The fixed encoding of Vaswani et al. (2017), Sec. 3.5, and the variants the checker recognises.

    ``PE[pos, 2i] = sin(pos / base^(2i/d_model))``, ``PE[pos, 2i+1] = cos(pos / base^(2i/d_model))``;
    for odd ``d_model`` the last feature is a sine. Returns float64 ``(seq_len, d_model)``.
    """
    pos = torch.arange(start, start + seq_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    rate = two_i / 2 if exponent == "i" else two_i
    angles = pos / base ** (rate / d_model)  # (L, ceil(D/2))
    n_cos = d_model // 2
    pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles[:, :n_cos])
    elif layout == "swapped":
        pe[:, 0::2] = torch.cos(angles)
        pe[:, 1::2] = torch.sin(angles[:, :n_cos])
    else:  # "concatenated": all sines, then all cosines
        n_sin = angles.shape[1]
        pe[:, :n_sin] = torch.sin(angles)
        pe[:, n_sin:] = torch.cos(angles[:, :n_cos])
    return pe


@_checker("check_sinusoidal_positional_encoding")
def check_sinusoidal_positional_encoding(fn: Callable) -> None:
    """Check ``fn(seq_len, d_model) -> (seq_len, d_model)``, the interleaved sinusoidal encoding (Vaswani et al., 2017).

    Raises:
        AssertionError: naming the likely mistake (sin/cos halves concatenated, wrong base, positions starting
            at 1, sin and cos swapped, exponent i/d instead of 2i/d).
    """
    for seq_len, d_model in [(6, 8), (50, 16), (9, 7), (30, 33), (1, 4)]:
        case = f"seq_len={seq_len}, d_model={d_model}"
        pe = _call(fn, seq_len, d_model)
        _check_tensor(pe, "encoding", (seq_len, d_model), case)
        ref = reference_sinusoidal_positional_encoding(seq_len, d_model)
        if _close(pe, ref):
            continue
        r = reference_sinusoidal_positional_encoding
        variants = {
            "sin and cos halves concatenated instead of interleaved: even features 2i are sines, odd 2i+1 cosines": r(
                seq_len, d_model, layout="concatenated"
            ),
            "sin and cos swapped: even features 2i must be sines and odd features 2i+1 cosines": r(
                seq_len, d_model, layout="swapped"
            ),
            "off-by-one position: positions start at 0": r(seq_len, d_model, start=1),
            "wrong base: the wavelengths grow as 10000^(2i/d_model)": r(
                seq_len, d_model, base=1000.0
            ),
            "wrong base (100000): the wavelengths grow as 10000^(2i/d_model)": r(
                seq_len, d_model, base=1e5
            ),
            "wrong exponent: use 2i/d_model (i indexes feature pairs), not i/d_model": r(
                seq_len, d_model, exponent="i"
            ),
        }
        raise _diagnose(pe, variants, case, "encoding", ref)


# --------------------------------------------------------------------------- rotary position embedding


@_checker("check_rotary")
def check_rotary(fn: Callable) -> None:
    """Check ``fn(x, positions) -> x rotated``: RoPE (Su et al., RoFormer, Eq. 34), interleaved pairs.

    ``x`` has shape ``(..., L, d)`` with ``d`` even and ``positions`` shape ``(L,)`` (int64). Pair ``j`` =
    features ``(2j, 2j + 1)`` of row ``m`` is rotated by the angle ``positions[m] * theta_j`` with
    ``theta_j = 10000^(-2j/d)``: ``(a, b) -> (a cos - b sin, a sin + b cos)``. The result has the shape of ``x``.
    Cases include a single row, positions that do not start at 0, and ``d = 6`` (an odd number of pairs).

    Raises:
        AssertionError: naming the likely mistake (pairs (j, j + d/2) instead of (2j, 2j + 1), rotation in the
            wrong direction, positions off by one, positions argument ignored, exponent j/d instead of
            2j/d, no rotation at all).
    """
    g = _gen(17)
    # The first case has several rows and starts at 7, so "positions ignored" (rows at 0..L-1) and "no
    # rotation" differ there; with a single row at position 0 they would coincide.
    for batch, L, d, start in [((2, 3), 4, 6, 7), ((2,), 5, 8, 0), ((), 1, 4, 3), ((1,), 6, 16, 2)]:
        case = f"x of shape {(*batch, L, d)}, positions {start}..{start + L - 1}"
        x = torch.randn(*batch, L, d, generator=g, dtype=torch.float64)
        positions = torch.arange(start, start + L)
        out = _call(fn, x.clone(), positions.clone())
        _check_tensor(out, "output", x.shape, case)
        ref = apply_rotary(x, positions)
        if _close(out, ref):
            continue
        variants = {
            "wrong pairing: rotate features (2j, 2j+1) together, not (j, j + d/2) (that is the GPT-NeoX "
            "'rotate_half' layout)": apply_rotary(x, positions, interleaved=False),
            "wrong sign: rotated the other way; (a, b) -> (a cos - b sin, a sin + b cos)": apply_rotary(
                x, -positions
            ),
            "positions off by one (one too far): use the positions as given": apply_rotary(
                x, positions + 1
            ),
            "positions off by one (one short): use the positions as given": apply_rotary(
                x, positions - 1
            ),
            "positions argument ignored: row m sits at positions[m], not at m": apply_rotary(
                x, torch.arange(L)
            ),
            "wrong exponent: theta_j = 10000^(-2j/d) (j indexes pairs), not 10000^(-j/d)": apply_rotary(
                x, positions, base=100.0
            ),
            "no rotation: the output equals the input": x,
        }
        raise _diagnose(out, variants, case, "output", ref)

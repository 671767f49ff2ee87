"""Exercise checkers of chapter 2, ``notebooks/02_causal_masks.ipynb``:
the causal mask, attention with a key/value cache, positions read from the mask.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...nn.attention import scaled_dot_product_attention
from ...nn.masks import causal_mask
from ._checking import _call, _check_tensor, _checker, _close, _diagnose, _gen

__all__ = [
    "check_causal_mask",
    "check_cached_causal_attention",
    "check_causal_positions",
]


# --------------------------------------------------------------------------- causal mask


@_checker("check_causal_mask")
def check_causal_mask(fn: Callable) -> None:
    """Check ``fn(L) -> bool tensor (L, L)``, ``True`` on and below the diagonal (query i may attend to keys <= i).

    Raises:
        AssertionError: naming the likely mistake (float dtype, inverted polarity, transpose, shifted diagonal).
    """
    for L in (5, 8, 2, 1):  # the most telling size first
        case = f"L={L}"
        m = _call(fn, L)
        _check_tensor(m, "mask", (L, L), case)
        ref = causal_mask(L)
        if m.dtype != torch.bool:
            raise AssertionError(
                f"mask for {case}: expected dtype torch.bool (True = may attend), received "
                f"{m.dtype}; build it with torch.ones(L, L, dtype=torch.bool)"
            )
        if torch.equal(m, ref):
            continue
        ones = torch.ones(L, L, dtype=torch.bool)
        variants = {
            "inverted polarity: True must mean 'may attend' (keep the past), not 'blocked'": ~ref,
            "transposed: rows are queries, so True belongs on and below the diagonal (torch.tril, not triu)": ref.T,
            "diagonal shifted down: a query must be allowed to attend to itself (the diagonal is True)": torch.tril(
                ones, diagonal=-1
            ),
            "diagonal shifted up: each query may see the next token, a future-position leak": torch.tril(
                ones, diagonal=1
            ),
            "everything allowed: no future position is masked": ones,
        }
        for mistake, value in variants.items():
            if torch.equal(m, value):
                raise AssertionError(f"mask is wrong for {case}. Likely mistake: {mistake}")
        bad = (m != ref).nonzero()[0].tolist()
        raise AssertionError(
            f"mask is wrong for {case}: entry (query {bad[0]}, key {bad[1]}) should be "
            f"{bool(ref[bad[0], bad[1]])}"
        )


# --------------------------------------------------------------------------- decoding with a cache


@_checker("check_cached_causal_attention")
def check_cached_causal_attention(fn: Callable) -> None:
    """Check ``fn(query, key, value) -> output`` for the *last* L positions of a causal sequence.

    ``query (..., L, d)`` holds the queries of positions ``S-L .. S-1``; ``key``/``value (..., S, d)`` hold
    all positions (the cache plus the new ones). Query ``i`` may attend to keys ``0 .. S-L+i``
    (bottom-right alignment). Expected output ``(..., L, d)``.

    Raises:
        AssertionError: naming the likely mistake (top-left alignment, as torch's is_causal; no mask).
    """
    g = _gen(11)
    for batch, L, S, d in [((), 1, 6, 4), ((2,), 3, 7, 8), ((2, 2), 4, 4, 4)]:
        case = f"query {(*batch, L, d)}, key/value {(*batch, S, d)}"
        q = torch.randn(*batch, L, d, generator=g, dtype=torch.float64)
        k = torch.randn(*batch, S, d, generator=g, dtype=torch.float64)
        v = torch.randn(*batch, S, d, generator=g, dtype=torch.float64)
        out = _call(fn, q.clone(), k.clone(), v.clone())
        if isinstance(out, tuple):
            out = out[0]
        _check_tensor(out, "output", (*batch, L, d), case)
        ref = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(L, S))[0]
        if _close(out, ref):
            continue
        variants = {
            "top-left alignment (as torch's is_causal=True): the new queries are the LAST L positions, so query "
            "i sees keys 0 .. S-L+i": scaled_dot_product_attention(
                q, k, v, attn_mask=torch.ones(L, S, dtype=torch.bool).tril()
            )[0],
            "no causal mask: a query sees keys after its own position": scaled_dot_product_attention(
                q, k, v
            )[0],
        }
        raise _diagnose(out, variants, case, "output", ref)


# --------------------------------------------------------------------------- chapter 2: positions from the mask


@_checker("check_causal_positions")
def check_causal_positions(fn: Callable) -> None:
    """Check ``fn(x) -> positions``: read each token's position from one causal attention layer.

    ``x (B, L, D)`` carries no positional information except that token 0 is a distinct
    beginning-of-sequence token: feature 0 of ``x`` is 1 at position 0 and 0 at every other position (the
    other features are arbitrary). Expected: ``positions (B, L)``, floating, equal to ``0, 1, ..., L-1`` in
    every row (up to rounding). A causal layer with uniform weights averages feature 0 over the ``i + 1``
    tokens that query ``i`` sees, giving ``1 / (i + 1)``: the mechanism Haviv et al. (2022) conjecture
    lets causal language models without positional encodings infer positions.

    Raises:
        AssertionError: naming the likely mistake (returned the signal 1/(i+1), or the count i+1 of tokens
            seen instead of the position i, or attended without the causal mask).
    """
    g = _gen(77)
    for B, L, D in [(2, 5, 4), (3, 9, 6), (1, 16, 2), (1, 1, 3)]:  # L = 1 last: there 0 = L - 1
        case = f"x {(B, L, D)}"
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        x[:, :, 0] = 0.0
        x[:, 0, 0] = 1.0  # the beginning-of-sequence marker
        got = _call(fn, x.clone())
        _check_tensor(got, "positions", (B, L), case)
        expected = torch.arange(L, dtype=torch.float64).expand(B, L)
        if _close(got, expected):
            continue
        signal = 1.0 / (expected + 1.0)
        variants = {
            "returned the attention output 1/(i+1) itself: invert it to get the position i": signal,
            "off by one: 1/signal counts the tokens query i sees, i + 1; the position is one less": expected
            + 1,
            "no causal mask: every query sees all L tokens, so every row reads the same value; pass "
            "is_causal=True": torch.full((B, L), L - 1.0, dtype=torch.float64),
        }
        raise _diagnose(got, variants, case, "positions", expected)

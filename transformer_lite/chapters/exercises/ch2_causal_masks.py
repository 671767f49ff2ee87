"""Exercise checkers of chapter 2, ``notebooks/02_causal_masks.ipynb``:
the causal mask, attention with a key/value cache, positions read from the mask, and a causal
self-attention module with a key/value cache.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ...nn.attention import MultiHeadAttention, scaled_dot_product_attention
from ...nn.masks import causal_mask
from . import _checking as checking

__all__ = [
    "check_causal_mask",
    "check_cached_causal_attention",
    "check_causal_positions",
    "check_causal_self_attention_module",
]


# --------------------------------------------------------------------------- causal mask


@checking.checker("check_causal_mask")
def check_causal_mask(fn: Callable) -> None:
    """Check ``fn(L) -> bool tensor (L, L)``, ``True`` on and below the diagonal (query i may attend to keys <= i).

    Raises:
        AssertionError: naming the likely mistake (float dtype, inverted polarity, transpose, shifted diagonal).
    """
    for L in (5, 8, 2, 1):  # the most telling size first
        case = f"L={L}"
        m = checking.call(fn, L)
        checking.check_tensor(m, "mask", (L, L), case)
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


@checking.checker("check_cached_causal_attention")
def check_cached_causal_attention(fn: Callable) -> None:
    """Check ``fn(query, key, value) -> output`` for the *last* L positions of a causal sequence.

    ``query (..., L, d)`` holds the queries of positions ``S-L .. S-1``; ``key``/``value (..., S, d)`` hold
    all positions (the cache plus the new ones). Query ``i`` may attend to keys ``0 .. S-L+i``
    (bottom-right alignment). Expected output ``(..., L, d)``.

    Raises:
        AssertionError: naming the likely mistake (top-left alignment, as torch's is_causal; no mask).
    """
    g = checking.gen(11)
    for batch, L, S, d in [((), 1, 6, 4), ((2,), 3, 7, 8), ((2, 2), 4, 4, 4)]:
        case = f"query {(*batch, L, d)}, key/value {(*batch, S, d)}"
        q = torch.randn(*batch, L, d, generator=g, dtype=torch.float64)
        k = torch.randn(*batch, S, d, generator=g, dtype=torch.float64)
        v = torch.randn(*batch, S, d, generator=g, dtype=torch.float64)
        out = checking.call(fn, q.clone(), k.clone(), v.clone())
        if isinstance(out, tuple):
            out = out[0]
        checking.check_tensor(out, "output", (*batch, L, d), case)
        ref = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(L, S))[0]
        if checking.close(out, ref):
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
        raise checking.diagnose(out, variants, case, "output", ref)


# --------------------------------------------------------------------------- chapter 2: positions from the mask


@checking.checker("check_causal_positions")
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
    g = checking.gen(77)
    for B, L, D in [(2, 5, 4), (3, 9, 6), (1, 16, 2), (1, 1, 3)]:  # L = 1 last: there 0 = L - 1
        case = f"x {(B, L, D)}"
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        x[:, :, 0] = 0.0
        x[:, 0, 0] = 1.0  # the beginning-of-sequence marker
        got = checking.call(fn, x.clone())
        checking.check_tensor(got, "positions", (B, L), case)
        expected = torch.arange(L, dtype=torch.float64).expand(B, L)
        if checking.close(got, expected):
            continue
        signal = 1.0 / (expected + 1.0)
        variants = {
            "returned the attention output 1/(i+1) itself: invert it to get the position i": signal,
            "off by one: 1/signal counts the tokens query i sees, i + 1; the position is one less": expected
            + 1,
            "no causal mask: every query sees all L tokens, so every row reads the same value; pass "
            "is_causal=True": torch.full((B, L), L - 1.0, dtype=torch.float64),
        }
        raise checking.diagnose(got, variants, case, "positions", expected)


# --------------------------------------------------------------------------- chapter 2: a causal self-attention module

_CSA_NAMES = "q_proj, k_proj, v_proj, out_proj (each nn.Linear(d_model, d_model), with a bias)"
_CAT_DIM = (
    "the cache concatenated on the wrong dimension: keys and values are (B, H, S, d_head); append the "
    "new positions after the cached ones along the positions, torch.cat((past_k, k), dim=2)"
)
_STALE = (
    "new keys not appended / cache returned stale: the cache must come back holding all S = S_past + L "
    "positions, the cached ones and the new ones, torch.cat((past_k, k), dim=2), and attention reads "
    "all of them"
)
_NEW_ONLY = (
    "only the new positions returned as the cache: return the keys and values of all S = S_past + L "
    "positions (the concatenation), or the next step forgets the earlier tokens"
)
_NOT_READ = (
    "cache not read: the new queries attend to the new keys only; concatenate the cached keys and values "
    "first, torch.cat((past_k, k), dim=2), and attend to all S = S_past + L positions"
)


def _csa_variant(m, x, past_kv, mistake=None):
    """Causal self-attention with the weights of ``m`` (a :class:`MultiHeadAttention`) and the
    cache ``past_kv``, written out, or with one classic mistake.
    Returns ``(output, weights, (keys, values))``."""
    B, L, D = x.shape
    H = m.n_heads
    d_head = D // H

    def split(t):  # (B, L, D) -> (B, H, L, d_head)
        if mistake == "split order":
            return t.reshape(B, H, L, d_head)
        return t.view(B, L, H, d_head).transpose(1, 2)

    q, k, v = split(m.q_proj(x)), split(m.k_proj(x)), split(m.v_proj(x))
    new_k, new_v = k, v
    if past_kv is not None and mistake != "cache not read":
        k, v = torch.cat((past_kv[0], k), dim=-2), torch.cat((past_kv[1], v), dim=-2)
    S = k.shape[-2]
    mask = {
        "top-left": torch.ones(L, S, dtype=torch.bool).tril(),
        "no mask": torch.ones(L, S, dtype=torch.bool),
        "diagonal excluded": torch.ones(L, S, dtype=torch.bool).tril(S - L - 1),
    }.get(mistake, causal_mask(L, S))
    scale = {"no scale": 1.0, "sqrt(D)": D**-0.5}.get(mistake, d_head**-0.5)
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, L, S)
    if mistake == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    elif mistake != "after softmax":
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # (B, H, L, S)
    if mistake == "after softmax":
        w = w * mask
    heads = w @ v  # (B, H, L, d_head)
    if mistake == "merge order":
        merged = heads.reshape(B, L, D)
    else:
        merged = heads.transpose(1, 2).reshape(B, L, D)
    present = (new_k, new_v) if mistake == "cache not read" else (k, v)
    return m.out_proj(merged), w, present


_CSA_MISTAKES = {
    "causal mask aligned top-left (the is_causal=True trap: torch's F.scaled_dot_product_attention and "
    "torch.ones(L, S).tril() align it top-left): with a cache the L new queries are the LAST L of the "
    "S positions, query i sits at S_past + i and sees keys 0 .. S_past + i; use tril(diagonal=S - L) "
    "as in the exercise above, or tl.causal_mask(L, S)": "top-left",
    "inverted mask polarity: True means 'may attend'; block the scores where the causal mask is "
    "False": "inverted",
    "mask applied after the softmax: the rows no longer sum to 1; fill the forbidden scores with -inf "
    "before it": "after softmax",
    "no causal mask: a query sees the positions after its own": "no mask",
    "scores not scaled: divide them by sqrt(d_head), the width of one head": "no scale",
    "scores scaled by sqrt(d_model) instead of sqrt(d_head): each head's dot products have d_head "
    "terms": "sqrt(D)",
    "diagonal excluded from the causal mask: a query may attend to its own position (keys 0 .. i, "
    "inclusive)": "diagonal excluded",
    _NOT_READ: "cache not read",
    "heads split in the wrong order: view (B, L, D) as (B, L, H, d_head), then transpose(1, 2) "
    "(exercise 1.2)": "split order",
    "heads merged without undoing the transpose: (B, H, L, d_head) -> transpose(1, 2) -> (B, L, D) "
    "(exercise 1.2)": "merge order",
}


def _csa_call(student, x: Tensor, past_kv, case: str):
    """``student(x)`` or ``student(x, past_kv=...)``, a crash with a cache explained."""
    try:
        if past_kv is None:
            return checking.call(student, x.clone())
        return checking.call(student, x.clone(), past_kv=tuple(t.clone() for t in past_kv))
    except AssertionError as exc:
        msg = str(exc)
        if past_kv is not None and "Sizes of tensors must match except in dimension" in msg:
            raise AssertionError(f"for {case}: {msg} Likely mistake: {_CAT_DIM}") from exc
        if past_kv is not None:
            raise AssertionError(
                f"for {case}: {msg} With a cache of S_past positions the keys and values are "
                "(B, H, S_past + L, d_head), concatenated along dim=2, and the causal mask is (L, S), "
                "S = S_past + L, aligned bottom-right"
            ) from exc
        raise


def _check_csa_shapes(result, B, H, L, S_past, D, case: str) -> None:
    """The result must be ``(output (B, L, D), weights (B, H, L, S), (keys, values) (B, H, S, d_head))``,
    and the classic wrong shapes are named."""
    if not isinstance(result, tuple) or len(result) != 3:
        raise AssertionError(
            f"for {case}: expected a tuple (output, weights, (keys, values)), as "
            f"tl.MultiHeadAttention returns, received {type(result).__name__}"
        )
    out, w, present = result
    S, d = S_past + L, D // H
    if S_past and isinstance(w, Tensor) and tuple(w.shape) == (B, H, L, S_past):
        raise AssertionError(
            f"wrong weights for {case}: shape {tuple(w.shape)}, the cached positions only. Likely "
            f"mistake: {_STALE}"
        )
    if S_past and isinstance(w, Tensor) and tuple(w.shape) == (B, H, L, L):
        raise AssertionError(
            f"wrong weights for {case}: shape {tuple(w.shape)}, the new positions only. Likely "
            f"mistake: {_NOT_READ}"
        )
    checking.check_cached_result(out, w, present, (B, H, L, S), (B, L, D), case)
    for what, t in zip(("keys", "values"), present):
        shape = tuple(t.shape) if isinstance(t, Tensor) else None
        mistake = None
        if shape == (B, H, S, d):
            pass
        elif S_past and shape == (B, H, S_past, d):
            mistake = _STALE
        elif S_past and shape == (B, H, L, d):
            mistake = _NEW_ONLY
        elif shape in {(B, S, D), (B, S_past, D)}:
            mistake = (
                "the cache kept before the split into heads: store the keys and values as the "
                "package does, (B, H, S, d_head), after the split"
            )
        elif S_past and shape in {(B, H, L, 2 * d), (B, 2 * H, L, d), (2 * B, H, L, d)}:
            mistake = _CAT_DIM
        if mistake:
            raise AssertionError(
                f"wrong cached {what} for {case}: shape {shape}. Likely mistake: {mistake}"
            )
        checking.check_tensor(t, f"cached {what}", (B, H, S, d), case)


def _compare_csa(result, ref, x: Tensor, past_kv, case: str, rows: slice | None = None) -> None:
    """Compare the learner's result with the package's ``ref`` (with variants named)."""
    out, w, (keys, values) = result
    with torch.no_grad():
        ref_out, ref_w, (ref_k, ref_v) = ref(x, cache=past_kv, is_causal=True)
        variants = {msg: _csa_variant(ref, x, past_kv, m) for msg, m in _CSA_MISTAKES.items()}
    mask = causal_mask(x.shape[1], ref_k.shape[-2])
    if not checking.close(w, ref_w) and checking.looks_inverted(w, mask):
        raise AssertionError(
            f"wrong weights for {case}. Likely mistake: inverted mask polarity: True means 'may "
            "attend'; block the scores where the causal mask is False"
        )
    for what, got, expected, i in (("weights", w, ref_w, 1), ("output", out, ref_out, 0)):
        if not checking.close(got, expected):
            raise checking.diagnose(
                got, {m: r[i] for m, r in variants.items()}, case, what, expected
            )
    if not checking.close(keys, ref_k):
        if checking.close(keys, ref_v):
            raise AssertionError(
                f"wrong cached keys for {case}. Likely mistake: keys and values swapped in the "
                "returned cache: return (keys, values), in that order"
            )
        raise checking.diagnose(keys, {}, case, "cached keys", ref_k)
    if not checking.close(values, ref_v):
        raise checking.diagnose(values, {}, case, "cached values", ref_v)


def _csa_pair(cls, D: int, H: int, g: torch.Generator, owner: str):
    """The learner's module and the package's (float64, eval), with the package's weights copied in."""
    seed = int(torch.randint(0, 10_000, (1,), generator=g))
    student = checking.build(cls, (D, H), {}, seed=seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        ref = MultiHeadAttention(D, H).double().eval()
    checking.load_reference(student, ref, owner, _CSA_NAMES)
    return student.eval(), ref


# (B, L, d_model, n_heads): the full sequence at once, odd sizes, a single position
_CSA_FULL = [(2, 5, 12, 3), (3, 4, 8, 2), (1, 1, 6, 3), (2, 7, 6, 3)]
# (B, S_past, L, d_model, n_heads): several new tokens after a package cache; one token, odd sizes
_CSA_CHUNKS = [(3, 4, 3, 8, 2), (2, 5, 1, 6, 3), (1, 2, 5, 12, 4)]


@checking.checker("check_causal_self_attention_module")
def check_causal_self_attention_module(cls) -> None:
    """Check a module class ``cls(d_model, n_heads)``: causal multi-head self-attention with a key/value
    cache, as :class:`~transformer_lite.nn.attention.MultiHeadAttention` computes with
    ``is_causal=True``.

    ``forward(x, past_kv=None)`` takes the ``L`` new positions ``x (B, L, d_model)`` and ``None`` or the
    ``(keys, values)`` a previous call returned, each ``(B, H, S_past, d_head)``, and returns ``(output,
    weights, (keys, values))``: ``(B, L, d_model)``, ``(B, H, L, S)`` and the keys and values of all
    ``S = S_past + L`` positions. Query ``i`` sits at position ``S_past + i`` and may attend to keys
    ``0 .. S_past + i`` (bottom-right alignment). The package's weights are copied in (``q_proj``,
    ``k_proj``, ``v_proj``, ``out_proj``); in float64: the whole sequence at once (odd sizes, one
    position); a prompt, then one-token steps each fed the cache the learner's module returned, which
    must give the rows of the whole sequence; several new tokens after a cache; outputs, weights, the
    cache, and the gradients with respect to ``x`` and every weight.

    Raises:
        AssertionError: naming the likely mistake (a top-left causal mask with a cache, inverted
            polarity, the mask after the softmax, no mask, the diagonal excluded, scores not scaled or
            scaled by sqrt(d_model), the cache concatenated on the wrong dimension, not read, returned
            stale or holding the new positions only, kept before the split into heads, keys and values
            swapped, heads split or merged in the wrong order, gradients cut).
    """
    owner = "check_causal_self_attention_module"
    g = checking.gen(23)
    name = getattr(cls, "__name__", "your module")
    for B, L, D, H in _CSA_FULL:
        case = f"{name}({D}, {H}) on x of shape {(B, L, D)}, no cache"
        student, ref = _csa_pair(cls, D, H, g, owner)
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        with torch.no_grad():
            result = _csa_call(student, x, None, case)
        _check_csa_shapes(result, B, H, L, 0, D, case)
        _compare_csa(result, ref, x, None, case)
        upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        checking.compare_grads(student, ref, x, upstream, case, ref_kwargs={"is_causal": True})

    # a prompt, then one token at a time, each step fed the cache the learner's module returned
    B, P, steps, D, H = 2, 4, 3, 12, 3
    student, ref = _csa_pair(cls, D, H, g, owner)
    x = torch.randn(B, P + steps, D, generator=g, dtype=torch.float64)
    past, ref_past = None, None
    for a, b in [(0, P)] + [(t, t + 1) for t in range(P, P + steps)]:
        case = (
            f"{name}({D}, {H}): the prompt x[:, :{P}] of shape {(B, P, D)}"
            if a == 0
            else f"{name}({D}, {H}): the token x[:, {a}:{b}] after a cache of {a} positions that your "
            "module returned"
        )
        with torch.no_grad():
            result = _csa_call(student, x[:, a:b], past, case)
        _check_csa_shapes(result, B, H, b - a, a, D, case)
        _compare_csa(result, ref, x[:, a:b], ref_past, case)
        past = result[2]
        with torch.no_grad():
            ref_past = ref(x[:, a:b], cache=ref_past, is_causal=True)[2]
            whole = ref(x[:, :b], is_causal=True)[0][:, a:b]  # the rows of the whole sequence
        if not checking.close(
            result[0], whole
        ):  # the claim of the cache: the rows of the whole sequence
            raise checking.diagnose(result[0], {}, case, "output", whole)

    # several new tokens after a cache (the package's), and gradients through a cached step
    for B, S_past, L, D, H in _CSA_CHUNKS:
        case = f"{name}({D}, {H}) on x of shape {(B, L, D)} after a cache of {S_past} positions"
        student, ref = _csa_pair(cls, D, H, g, owner)
        with torch.no_grad():
            x_past = torch.randn(B, S_past, D, generator=g, dtype=torch.float64)
            past = ref(x_past, is_causal=True)[2]
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        with torch.no_grad():
            result = _csa_call(student, x, past, case)
        _check_csa_shapes(result, B, H, L, S_past, D, case)
        _compare_csa(result, ref, x, past, case)
        upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        ref_kwargs = {"is_causal": True}
        checking.compare_grads(student, ref, x, upstream, case, ref_kwargs=ref_kwargs, cache=past)

"""Checkers for the book's exercises: they test a learner's function and name the likely mistake.

Each ``check_*`` function calls the learner's function on seeded, distinct
inputs of several shapes (L != S, odd ``d_model``, a single position, masks),
compares with this package's reference in float64, and

* returns ``None`` (after printing a short confirmation) when every case agrees;
* raises ``AssertionError`` whose message names the classic mistake that
  reproduces the wrong answer (e.g. "scaled by d_k instead of sqrt(d_k)"),
  or, when no known mistake fits, says which case failed and how;
* prints ``not implemented yet`` and returns ``None`` when the function raises
  ``NotImplementedError`` (the stubs of the student edition do), so that a
  notebook still runs from top to bottom.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer, KVCache
from ..nn.attention import scaled_dot_product_attention
from ..nn.blocks import TransformerBlock
from ..nn.masks import causal_mask
from ..nn.positional import apply_rotary

__all__ = [
    "check_scaled_dot_product_attention", "check_causal_mask", "check_layer_norm",
    "check_sinusoidal_positional_encoding", "check_split_merge_heads",
    "check_cached_causal_attention", "reference_sinusoidal_positional_encoding",
    "check_score_spread", "check_causal_positions", "check_rotary", "check_pre_norm_block",
    "check_shift_right", "check_rnn_step_jacobian", "check_online_softmax_merge",
    "check_next_token_loss", "check_temperature_top_k", "check_loss_units", "check_kv_cache_bytes",
]

ATOL = 1e-6


class _NotImplementedYet(Exception):
    pass


def _call(fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise _NotImplementedYet from exc
    except Exception as exc:  # a crash in the learner's code: report it as a failed check, with a hint
        hint = ""
        if "view size is not compatible" in str(exc):
            hint = " Hint: after transpose() a tensor is not contiguous; use reshape() (or .contiguous().view())."
        shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
        raise AssertionError(f"your function raised {type(exc).__name__} on inputs of shapes {shapes}: {exc}.{hint}") \
            from exc


def _checker(name: str):
    """Wrap a check so NotImplementedError prints 'not implemented yet' and success prints a confirmation."""
    def wrap(check):
        def run(*fns):
            try:
                check(*fns)
            except _NotImplementedYet:
                print(f"{name}: not implemented yet (your function raises NotImplementedError)")
                return None
            print(f"{name}: all checks passed")
            return None
        run.__name__, run.__qualname__, run.__doc__ = name, name, check.__doc__
        return run
    return wrap


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b) -> bool:
    return isinstance(a, Tensor) and a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=ATOL, rtol=1e-5)


def _diagnose(got: Tensor, variants: dict[str, Tensor], case: str, what: str, expected: Tensor) -> AssertionError:
    for mistake, value in variants.items():
        if _close(got, value):
            return AssertionError(f"wrong {what} for {case}. Likely mistake: {mistake}")
    err = (got.double() - expected.double()).abs().max().item()
    return AssertionError(f"wrong {what} for {case}: largest difference from the reference {err:.3g}, and it "
                          "matches none of the usual mistakes; print both and compare")


def _check_tensor(value, name: str, shape: tuple, case: str) -> None:
    if not isinstance(value, Tensor):
        raise AssertionError(f"{name} for {case}: expected a torch.Tensor, received {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise AssertionError(f"{name} for {case}: expected shape {tuple(shape)}, received {tuple(value.shape)}")


# --------------------------------------------------------------------------- attention

def _attention_variant(q, k, v, mask, scale, softmax_dim=-1, mask_mode="normal"):
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None and mask_mode == "normal":
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after_softmax":
        w = w * mask
    w = torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def _looks_inverted(w: Tensor, mask: Tensor) -> bool:
    """True if, in every row with both allowed and forbidden keys, the allowed keys get (almost) no weight."""
    mixed = mask.any(-1) & (~mask).any(-1)  # (L,)
    if not mixed.any():
        return False
    rows = w.double()[..., mixed, :]  # (..., n_mixed, S)
    allowed = mask[mixed].expand_as(rows)
    return bool(torch.isfinite(rows).all()) and bool((rows[allowed].abs() < 1e-9).all()) and bool(
        (rows[~allowed] > 0).any())


def _attention_cases():
    g = _gen(1234)
    cases = []
    for (batch, L, S, d_k, d_v, masked) in [((), 3, 3, 16, 16, False), ((2,), 2, 5, 9, 3, False),
                                            ((2, 3), 4, 4, 16, 5, "causal"), ((), 1, 1, 4, 4, False),
                                            ((3,), 5, 3, 8, 8, "random")]:
        q = torch.randn(*batch, L, d_k, generator=g, dtype=torch.float64) * 1.5
        k = torch.randn(*batch, S, d_k, generator=g, dtype=torch.float64) * 1.5
        v = torch.randn(*batch, S, d_v, generator=g, dtype=torch.float64)
        mask = None
        if masked == "causal":
            mask = causal_mask(L, S)
        elif masked == "random":
            mask = torch.rand(L, S, generator=g) < 0.6
            mask[:, 0] = True  # every query keeps at least one key
            mask[0, 1:] = False
        desc = f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}" + (
            f", {masked} bool mask {tuple(mask.shape)}" if mask is not None else ", no mask")
        cases.append((q, k, v, mask, desc))
    # Last, so that every other mistake is named first: a query with no allowed key (a padding query, or an early
    # query when there are fewer keys than queries). Expected: zero weights and a zero output, as the package gives.
    q = torch.randn(2, 4, 8, generator=g, dtype=torch.float64) * 1.5
    k = torch.randn(2, 5, 8, generator=g, dtype=torch.float64) * 1.5
    v = torch.randn(2, 5, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(4, 5, generator=g) < 0.6
    mask[:, 0] = True
    mask[0, 1:] = False
    mask[2] = False  # query 2 may attend to nothing
    cases.append((q, k, v, mask, f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}, bool mask "
                                 f"{tuple(mask.shape)} whose row 2 is all False (a query with no allowed key)"))
    return cases


def _check_fully_masked_rows(out: Tensor, w: Tensor, mask: Tensor, case: str) -> None:
    """Rows of ``mask`` with no ``True`` must give zero weights and a zero output; name NaN and -1e9 answers."""
    empty = ~mask.any(dim=-1)  # (L,): queries with no allowed key
    if not empty.any():
        return
    w_empty = w.double()[..., empty, :]  # (..., n_empty, S)
    out_empty = out.double()[..., empty, :]  # (..., n_empty, d_v)
    if torch.isnan(w_empty).any() or torch.isnan(out_empty).any():
        raise AssertionError(f"wrong weights for {case}. Likely mistake: a fully masked row gives NaN: the softmax of "
                             "a row of all -inf is 0/0; return zeros for such rows (zero weights, so a zero output), "
                             "e.g. give their scores any finite value before the softmax and zero their weights after")
    if (w_empty.abs() > ATOL).any():
        S = w.shape[-1]
        hint = ""
        if torch.allclose(w_empty, torch.full_like(w_empty, 1.0 / S), atol=ATOL):
            hint = (" Likely mistake: the forbidden scores were filled with a large finite number (e.g. -1e9) "
                    "instead of -inf, which makes such a row uniform over the keys it must not see")
        raise AssertionError(f"wrong weights for {case}: a query whose keys are all masked must get zero weights and "
                             f"a zero output, received weights summing to {w_empty.sum(-1).max().item():.3g}.{hint}")
    if (out_empty.abs() > ATOL).any():
        raise AssertionError(f"wrong output for {case}: a query whose keys are all masked must get a zero output "
                             "(its weights are all zero), received nonzero values")


@_checker("check_scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Check ``fn(query, key, value, attn_mask=None) -> (output, weights)``.

    ``query (..., L, d_k)``, ``key (..., S, d_k)``, ``value (..., S, d_v)``; ``attn_mask`` a bool
    ``(L, S)`` tensor with ``True`` = may attend. Expected: ``output (..., L, d_v)`` and
    ``weights (..., L, S)`` equal to softmax(Q K^T / sqrt(d_k)) V (Vaswani et al., 2017, Eq. 1). The last
    case has a query whose keys are all masked: it must get zero weights and a zero output (not NaN), as
    :func:`~transformer_lite.nn.attention.scaled_dot_product_attention` gives.

    Raises:
        AssertionError: naming the likely mistake.
    """
    for q, k, v, mask, case in _attention_cases():
        result = _call(fn, q.clone(), k.clone(), v.clone(), attn_mask=None if mask is None else mask.clone())
        if not isinstance(result, tuple) or len(result) != 2:
            raise AssertionError(f"for {case}: expected a tuple (output, weights), received {type(result).__name__}")
        out, w = result
        L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        _check_tensor(w, "weights", (*q.shape[:-2], L, S), case)
        _check_tensor(out, "output", (*q.shape[:-2], L, d_v), case)
        ref_out, ref_w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if mask is not None:
            _check_fully_masked_rows(out, w, mask, case)
        if mask is not None and _looks_inverted(w, mask):
            raise AssertionError(f"wrong weights for {case}. Likely mistake: inverted mask polarity: True means "
                                 "'may attend' (as in F.scaled_dot_product_attention), fill the scores where the "
                                 "mask is False")
        if mask is not None and (w.double()[..., ~mask].abs() > 0).any() and not _close(
                w, _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="inverted")[1]):
            raise AssertionError(f"wrong weights for {case}. Likely mistake: a future-position leak / mask not "
                                 "applied: a query gives weight to a key the mask forbids (False = blocked). Fill "
                                 "the forbidden scores with -inf before the softmax")
        variants = {
            "no scaling: divide the scores by sqrt(d_k)": _attention_variant(q, k, v, mask, 1.0),
            "scaled by d_k instead of sqrt(d_k)": _attention_variant(q, k, v, mask, 1 / d_k),
            "scaled by sqrt(d_v) instead of sqrt(d_k)": _attention_variant(q, k, v, mask, 1 / math.sqrt(d_v)),
            "softmax over the wrong axis: normalize over the keys (dim=-1), so each row sums to 1":
                _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), softmax_dim=-2),
        }
        if mask is not None:
            variants["inverted mask polarity: True means 'may attend' (as in F.scaled_dot_product_attention), "
                     "fill the scores where the mask is False"] = _attention_variant(
                q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="inverted")
            variants["mask applied after the softmax: rows no longer sum to 1; add -inf to the scores before it"] = \
                _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="after_softmax")
        if not _close(w, ref_w):
            w_variants = {m: vw for m, (_, vw) in variants.items()}
            if L == S:
                w_variants["returned the weights transposed: rows are queries, columns keys, shape (..., L, S)"] = (
                    ref_w.transpose(-2, -1))
            raise _diagnose(w, w_variants, case, "weights", ref_w)
        if not _close(out, ref_out):
            out_variants = {m: vo for m, (vo, _) in variants.items()}
            if L == S:
                out_variants["multiplied the values by the transposed weights: use weights @ value"] = (
                    ref_w.transpose(-2, -1) @ v)
            raise _diagnose(out, out_variants, case, "output", ref_out)


# --------------------------------------------------------------------------- chapter 1: a head's score spread

@_checker("check_score_spread")
def check_score_spread(fn: Callable) -> None:
    """Check ``fn(weights) -> spread``: the spread over the keys of the scores behind each row of weights.

    ``weights (..., L, S)`` are softmax rows ``a_ij = exp(s_ij) / sum_m exp(s_im)`` with every key allowed
    (all weights > 0). Since ``log a_ij = s_ij - log sum_m exp(s_im)``, the log-weights of a row are its
    scores shifted by one constant, so their population standard deviation over the keys (divide by S,
    ``correction=0``) is that of the scores. Expected: ``(..., L)``, equal to ``scores.std(-1, correction=0)``.

    Raises:
        AssertionError: naming the likely mistake (std of the weights, not of their logarithm; the sample
            std with correction=1; the spread over the queries instead of the keys).
    """
    g = _gen(2024)
    for batch, L, S, scale in [((), 3, 3, 1.0), ((2,), 4, 7, 3.0), ((2, 3), 5, 5, 0.5), ((), 1, 9, 6.0)]:
        case = f"weights {(*batch, L, S)} from scores of spread about {scale}"
        scores = torch.randn(*batch, L, S, generator=g, dtype=torch.float64) * scale
        scores = scores * torch.rand(*batch, L, 1, generator=g, dtype=torch.float64).add(0.5)  # rows differ
        weights = torch.softmax(scores, dim=-1)
        got = _call(fn, weights.clone())
        _check_tensor(got, "spread", (*batch, L), case)
        expected = scores.std(dim=-1, correction=0)
        if _close(got, expected):
            continue
        log_w = weights.log()
        variants = {
            "the spread of the weights themselves: take the standard deviation of log(weights), which are the "
            "scores up to one constant per row": weights.std(dim=-1, correction=0),
            "sample standard deviation (correction=1): use the population one, correction=0, dividing by S":
                log_w.std(dim=-1, correction=1) if S > 1 else expected,
            "returned the variance: take its square root": log_w.var(dim=-1, correction=0),
        }
        if L == S:  # otherwise the shape check above already failed
            variants["spread over the queries (dim=-2): a row is one query, its spread runs over the keys "
                     "(dim=-1)"] = log_w.std(dim=-2, correction=0)
        raise _diagnose(got, variants, case, "spread", expected)


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
            raise AssertionError(f"mask for {case}: expected dtype torch.bool (True = may attend), received "
                                 f"{m.dtype}; build it with torch.ones(L, L, dtype=torch.bool)")
        if torch.equal(m, ref):
            continue
        ones = torch.ones(L, L, dtype=torch.bool)
        variants = {
            "inverted polarity: True must mean 'may attend' (keep the past), not 'blocked'": ~ref,
            "transposed: rows are queries, so True belongs on and below the diagonal (torch.tril, not triu)":
                ref.T,
            "diagonal shifted down: a query must be allowed to attend to itself (the diagonal is True)":
                torch.tril(ones, diagonal=-1),
            "diagonal shifted up: each query may see the next token, a future-position leak":
                torch.tril(ones, diagonal=1),
            "everything allowed: no future position is masked": ones,
        }
        for mistake, value in variants.items():
            if torch.equal(m, value):
                raise AssertionError(f"mask is wrong for {case}. Likely mistake: {mistake}")
        bad = (m != ref).nonzero()[0].tolist()
        raise AssertionError(f"mask is wrong for {case}: entry (query {bad[0]}, key {bad[1]}) should be "
                             f"{bool(ref[bad[0], bad[1]])}")


# --------------------------------------------------------------------------- layer norm

def _layer_norm_variant(x, weight, bias, eps, dim=-1, unbiased=False, eps_outside=False, affine=True):
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    x_hat = (x - mean) / (torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps))
    return x_hat * weight + bias if affine else x_hat


@_checker("check_layer_norm")
def check_layer_norm(fn: Callable) -> None:
    """Check ``fn(x, weight, bias, eps=1e-5)``: layer normalization over the last dimension (Ba et al., 2016).

    ``x (..., D)``, ``weight (D,)``, ``bias (D,)``; expected
    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance (divide by D).

    Raises:
        AssertionError: naming the likely mistake (unbiased variance, eps outside the square root, wrong axis,
            missing scale/shift).
    """
    g = _gen(7)
    for shape, eps in [((2, 3, 5), 1e-5), ((4, 7), 0.5), ((3, 1, 6), 0.1), ((1, 4), 1e-5)]:
        D = shape[-1]
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 0.8 + 0.3
        weight = torch.rand(D, generator=g, dtype=torch.float64) + 0.5
        bias = torch.randn(D, generator=g, dtype=torch.float64)
        case = f"x of shape {shape}, eps={eps}"
        y = _call(fn, x.clone(), weight.clone(), bias.clone(), eps=eps)
        _check_tensor(y, "output", shape, case)
        ref = _layer_norm_variant(x, weight, bias, eps)
        if _close(y, ref):
            continue
        variants = {
            "unbiased variance: layer norm divides by D, not D - 1 (use unbiased=False / correction=0)":
                _layer_norm_variant(x, weight, bias, eps, unbiased=True),
            "epsilon outside the square root: use sqrt(var + eps), not sqrt(var) + eps":
                _layer_norm_variant(x, weight, bias, eps, eps_outside=True),
            "normalizing over the wrong axis: take mean and variance over the last dimension (features), "
            "per position": _layer_norm_variant(x, weight, bias, eps, dim=-2),
            "normalizing over the wrong axis (the first): statistics must be per position, over features":
                _layer_norm_variant(x, weight, bias, eps, dim=0),
            "forgot the learned scale and shift: multiply by weight and add bias":
                _layer_norm_variant(x, weight, bias, eps, affine=False),
            "eps left out: divide by sqrt(var + eps), which also keeps constant inputs finite":
                _layer_norm_variant(x, weight, bias, 0.0),
        }
        if eps != 1e-5:
            variants["eps ignored: use the eps argument inside the square root"] = _layer_norm_variant(
                x, weight, bias, 1e-5)
        raise _diagnose(y, variants, case, "output", ref)


# --------------------------------------------------------------------------- sinusoidal encoding

def reference_sinusoidal_positional_encoding(seq_len: int, d_model: int, base: float = 10000.0,
                                             start: int = 0, layout: str = "interleaved",
                                             exponent: str = "2i") -> Tensor:
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
            "sin and cos halves concatenated instead of interleaved: even features 2i are sines, odd 2i+1 cosines":
                r(seq_len, d_model, layout="concatenated"),
            "sin and cos swapped: even features 2i must be sines and odd features 2i+1 cosines": r(seq_len, d_model,
                                                                                    layout="swapped"),
            "off-by-one position: positions start at 0": r(seq_len, d_model, start=1),
            "wrong base: the wavelengths grow as 10000^(2i/d_model)": r(seq_len, d_model, base=1000.0),
            "wrong base (100000): the wavelengths grow as 10000^(2i/d_model)": r(seq_len, d_model, base=1e5),
            "wrong exponent: use 2i/d_model (i indexes feature pairs), not i/d_model":
                r(seq_len, d_model, exponent="i"),
        }
        raise _diagnose(pe, variants, case, "encoding", ref)


# --------------------------------------------------------------------------- heads

@_checker("check_split_merge_heads")
def check_split_merge_heads(split_fn: Callable, merge_fn: Callable) -> None:
    """Check ``split_fn(x (B, L, D), n_heads) -> (B, H, L, D/H)`` and ``merge_fn(heads) -> (B, L, D)``.

    Head ``h`` must hold features ``h*d_head .. (h+1)*d_head - 1`` of every position, and
    ``merge_fn(split_fn(x, H))`` must give ``x`` back.

    Raises:
        AssertionError: naming the likely mistake (reshaping straight to (B, H, L, d_head), which mixes
            positions into heads; merging without undoing the transpose).
    """
    g = _gen(3)
    for B, L, D, H in [(2, 5, 12, 3), (1, 1, 8, 2), (3, 4, 6, 6)]:
        case = f"x of shape {(B, L, D)}, n_heads={H}"
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        ref = x.view(B, L, H, D // H).transpose(1, 2)
        heads = _call(split_fn, x.clone(), H)
        _check_tensor(heads, "split_fn output", (B, H, L, D // H), case)
        if not _close(heads, ref):
            if _close(heads, x.reshape(B, H, L, D // H)):
                raise AssertionError(f"split_fn is wrong for {case}. Likely mistake: reshaped straight to "
                                     "(B, H, L, d_head), which mixes positions into heads; view as "
                                     "(B, L, H, d_head), then transpose(1, 2)")
            raise _diagnose(heads, {}, case, "split_fn output", ref)
        for layout, heads_in in (("transposed view", ref.clone()), ("contiguous", ref.contiguous())):
            merged = _call(merge_fn, heads_in)
            _check_tensor(merged, f"merge_fn output ({layout} input)", (B, L, D), case)
            if not _close(merged, x):
                break
        if not _close(merged, x):
            if _close(merged, ref.reshape(B, L, D)):
                raise AssertionError(f"merge_fn is wrong for {case}. Likely mistake: reshaped (B, H, L, d_head) "
                                     "straight to (B, L, D); transpose(1, 2) back first")
            raise _diagnose(merged, {}, case, "merge_fn output", x)


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
                q, k, v, attn_mask=torch.ones(L, S, dtype=torch.bool).tril())[0],
            "no causal mask: a query sees keys after its own position": scaled_dot_product_attention(q, k, v)[0],
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
            "off by one: 1/signal counts the tokens query i sees, i + 1; the position is one less": expected + 1,
            "no causal mask: every query sees all L tokens, so every row reads the same value; pass "
            "is_causal=True": torch.full((B, L), L - 1.0, dtype=torch.float64),
        }
        raise _diagnose(got, variants, case, "positions", expected)


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
            "wrong sign: rotated the other way; (a, b) -> (a cos - b sin, a sin + b cos)": apply_rotary(x, -positions),
            "positions off by one (one too far): use the positions as given": apply_rotary(x, positions + 1),
            "positions off by one (one short): use the positions as given": apply_rotary(x, positions - 1),
            "positions argument ignored: row m sits at positions[m], not at m": apply_rotary(x, torch.arange(L)),
            "wrong exponent: theta_j = 10000^(-2j/d) (j indexes pairs), not 10000^(-j/d)":
                apply_rotary(x, positions, base=100.0),
            "no rotation: the output equals the input": x,
        }
        raise _diagnose(out, variants, case, "output", ref)


# --------------------------------------------------------------------------- chapter 4: a pre-norm block

def _pre_norm_variant(block, x, mistake=None):
    attn = lambda h: block.self_attn(h, h, h)[0]  # noqa: E731
    n1, n2 = block.norm1, block.norm2
    if mistake == "post-norm":
        x = n1(x + attn(x))
        return n2(x + block.ff(x))
    if mistake == "one norm":
        x = x + attn(n1(x))
        return x + block.ff(n1(x))
    if mistake == "attention reads x":
        h = n1(x)
        x = x + block.self_attn(h, x, x)[0]
        return x + block.ff(n2(x))
    if mistake == "residual of the normalized input":
        h = n1(x)
        x = h + attn(h)
        h = n2(x)
        return h + block.ff(h)
    if mistake == "no residual (attention)":
        x = attn(n1(x))
        return x + block.ff(n2(x))
    if mistake == "no residual (feed-forward)":
        x = x + attn(n1(x))
        return block.ff(n2(x))
    x = x + attn(n1(x))
    return x + block.ff(n2(x))


@_checker("check_pre_norm_block")
def check_pre_norm_block(fn: Callable) -> None:
    """Check ``fn(block, x) -> y``: the pre-norm forward pass of a :class:`~transformer_lite.nn.blocks.TransformerBlock`.

    ``y = h + ff(norm2(h))`` with ``h = x + self_attn(norm1(x))`` (Xiong et al., 2020), using the block's own
    submodules (``block.self_attn(q, k, v)`` returns ``(output, weights)``); ``x`` and ``y`` are ``(B, L, D)``.

    Raises:
        AssertionError: naming the likely mistake (post-norm order, one norm for both sublayers, a missing
            residual, a residual taken after the norm, keys/values not normalized).
    """
    g = _gen(21)
    for B, L, D, H in [(2, 5, 8, 2), (1, 1, 6, 3), (3, 4, 12, 4)]:
        case = f"x of shape {(B, L, D)}, n_heads={H}"
        with torch.random.fork_rng():  # seeded weights, without touching the caller's random state
            torch.manual_seed(int(torch.randint(0, 10_000, (1,), generator=g)))
            block = TransformerBlock(D, H, 2 * D + 1, norm_first=True).double().eval()
        with torch.no_grad():  # layer norms that are not the identity, so that norm1 and norm2 differ
            for norm in (block.norm1, block.norm2):
                norm.weight.copy_(torch.rand(D, generator=g, dtype=torch.float64) + 0.5)
                norm.bias.copy_(torch.randn(D, generator=g, dtype=torch.float64) * 0.5)
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64) * 2.0 + 0.5
        with torch.no_grad():
            y = _call(fn, block, x.clone())
            if isinstance(y, tuple):
                y = y[0]
            _check_tensor(y, "output", (B, L, D), case)
            ref = block(x)[0]
            if _close(y, ref):
                continue
            names = {
                "post-norm order: pre-norm normalizes the sublayer's INPUT, x + sublayer(norm(x)), and never the sum":
                    "post-norm",
                "one layer norm for both sublayers: use norm1 before attention and norm2 before the feed-forward":
                    "one norm",
                "keys and values read the un-normalized x: pass norm1(x) as query, key and value":
                    "attention reads x",
                "residual taken from the normalized input: add the sublayer output to x itself, not to norm(x)":
                    "residual of the normalized input",
                "no residual connection around the attention: h = x + self_attn(norm1(x))":
                    "no residual (attention)",
                "no residual connection around the feed-forward: y = h + ff(norm2(h))":
                    "no residual (feed-forward)",
            }
            variants = {msg: _pre_norm_variant(block, x, mistake) for msg, mistake in names.items()}
            raise _diagnose(y, variants, case, "output", ref)


# --------------------------------------------------------------------------- chapter 5: teacher forcing

@_checker("check_shift_right")
def check_shift_right(fn: Callable) -> None:
    """Check ``fn(tgt, bos_id) -> decoder_input``: teacher forcing's shift (Vaswani et al., 2017, Sec. 3.1).

    ``tgt (B, T)`` int64; expected ``(B, T)``: ``bos_id`` in column 0, then ``tgt[:, :-1]``.

    Raises:
        AssertionError: naming the likely mistake (shifted left, BOS appended instead of prepended, the last
            column kept so the length grows, BOS overwriting the first token).
    """
    g = _gen(5)
    for B, T, bos in [(3, 6, 1), (1, 1, 1), (4, 9, 7), (2, 2, 0)]:
        case = f"tgt of shape {(B, T)}, bos_id={bos}"
        tgt = torch.randint(3, 13, (B, T), generator=g)
        tgt[0, -1] = 0  # some padding at the end of the first row
        out = _call(fn, tgt.clone(), bos)
        ref = torch.cat([torch.full((B, 1), bos), tgt[:, :-1]], dim=1)
        if isinstance(out, Tensor) and tuple(out.shape) == (B, T + 1) and torch.equal(
                out.long(), torch.cat([torch.full((B, 1), bos), tgt], dim=1)):
            raise AssertionError(f"wrong decoder input for {case}. Likely mistake: the last target column was kept, "
                                 f"so the input is one longer than the target; drop it (tgt[:, :-1])")
        _check_tensor(out, "decoder input", (B, T), case)
        if out.is_floating_point():
            raise AssertionError(f"decoder input for {case}: expected integer token ids, received dtype {out.dtype}")
        if torch.equal(out.long(), ref):
            continue
        variants = {
            "shifted left: the decoder input starts with BOS and is the target moved one step to the RIGHT":
                torch.cat([tgt[:, 1:], torch.full((B, 1), bos)], dim=1),
            "BOS overwrites the first target token instead of being prepended": torch.cat(
                [torch.full((B, 1), bos), tgt[:, 1:]], dim=1),
            "no shift: the decoder would see the token it must predict": tgt,
        }
        for mistake, value in variants.items():
            if torch.equal(out.long(), value):
                raise AssertionError(f"wrong decoder input for {case}. Likely mistake: {mistake}")
        bad = (out.long() != ref).nonzero()[0].tolist()
        raise AssertionError(f"wrong decoder input for {case}: entry {tuple(bad)} is {int(out[bad[0], bad[1]])}, "
                             f"expected {int(ref[bad[0], bad[1]])}")


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
            "missing the tanh derivative: J = diag(1 - h_t**2) W_hh, not W_hh alone": w.expand(B, H, H),
            "1 - h instead of 1 - h**2: tanh'(a) = 1 - tanh(a)**2": (1 - h)[:, :, None] * w,
            "transposed W_hh: row i of J is d h_t[i] / d h_{t-1}, which is row i of W_hh, scaled by "
            "1 - h_t[i]**2": (1 - h**2)[:, :, None] * w.T,
            "applied tanh' to h_t as if it were the pre-activation: h_t is already tanh(a_t), so "
            "tanh'(a_t) = 1 - h_t**2": (1 - torch.tanh(h) ** 2)[:, :, None] * w,
            "scaled the columns instead of the rows: J = diag(1 - h_t**2) W_hh multiplies row i by "
            "1 - h_t[i]**2": w * (1 - h**2)[:, None, :],
        }
        raise _diagnose(out, variants, case, "Jacobian", ref)


# --------------------------------------------------------------------------- chapter 7: online softmax

def _block_stats(scores: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Running statistics of one key block: row max m, l = sum exp(s - m), acc = sum exp(s - m) v."""
    m = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
    p = torch.exp(scores - m)  # (..., L, S_block)
    return m, p.sum(dim=-1, keepdim=True), p @ v  # (..., L, 1), (..., L, 1), (..., L, d_v)


@_checker("check_online_softmax_merge")
def check_online_softmax_merge(fn: Callable) -> None:
    """Check ``fn(stats_a, stats_b) -> (m, l, acc)``: merge two key blocks' online-softmax statistics.

    Each block ``X`` of keys contributes, for every query row, ``m_X = max_j s_j`` ``(..., L, 1)``,
    ``l_X = sum_j exp(s_j - m_X)`` ``(..., L, 1)`` and ``acc_X = sum_j exp(s_j - m_X) v_j`` ``(..., L, d_v)``
    over the keys ``j`` of the block. The merge must return the statistics of the union: ``m = max(m_a, m_b)``,
    ``l = exp(m_a - m) l_a + exp(m_b - m) l_b``, ``acc = exp(m_a - m) acc_a + exp(m_b - m) acc_b``, so that
    ``acc / l`` is the attention output over both blocks (Milakov & Gimelshein, 2018, Algorithm 3; Dao et al.,
    2022, Algorithm 1). Cases include a row whose maximum lies in the second block and one where it stays in the
    first, scores shifted by 60, a single query row, and blocks of unequal size.

    Raises:
        AssertionError: naming the likely mistake (no rescaling, rescaling by ``exp(m - m_old)``, keeping the
            first block's maximum, rescaling ``l`` but not ``acc``, returning the normalized output).
    """
    g = _gen(29)
    for batch, L, S_a, S_b, d_v, shift in [((), 4, 3, 5, 2, 0.0), ((2,), 1, 4, 4, 3, 0.0), ((2, 3), 3, 2, 6, 5, 60.0),
                                           ((), 5, 1, 1, 1, 0.0)]:
        case = f"scores of shape {(*batch, L, S_a)} and {(*batch, L, S_b)}, values with d_v = {d_v}"
        s_a = 2.0 * torch.randn(*batch, L, S_a, generator=g, dtype=torch.float64) + shift
        s_b = 2.0 * torch.randn(*batch, L, S_b, generator=g, dtype=torch.float64) + shift
        s_b[..., 0, 0] = s_a[..., 0, :].amax(-1) + 3.0  # row 0: the maximum moves to block b
        if L > 1:
            s_a[..., 1, 0] = s_b[..., 1, :].amax(-1) + 3.0  # row 1: it stays in block a
        v_a = torch.randn(*batch, S_a, d_v, generator=g, dtype=torch.float64)
        v_b = torch.randn(*batch, S_b, d_v, generator=g, dtype=torch.float64)
        a, b = _block_stats(s_a, v_a), _block_stats(s_b, v_b)
        result = _call(fn, tuple(t.clone() for t in a), tuple(t.clone() for t in b))
        if not isinstance(result, tuple) or len(result) != 3:
            raise AssertionError(f"for {case}: expected a tuple (m, l, acc), received {type(result).__name__}")
        m, l, acc = result
        for name, value, shape in (("m", m, (*batch, L, 1)), ("l", l, (*batch, L, 1)),
                                   ("acc", acc, (*batch, L, d_v))):
            _check_tensor(value, name, shape, case)
        ref = _block_stats(torch.cat([s_a, s_b], -1), torch.cat([v_a, v_b], -2))  # the union, computed at once
        full = torch.softmax(torch.cat([s_a, s_b], -1), -1) @ torch.cat([v_a, v_b], -2)  # attention output
        if all(_close(got, want) for got, want in zip(result, ref)):
            continue
        (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
        m_new = torch.maximum(m_a, m_b)
        ea, eb = torch.exp(m_a - m_new), torch.exp(m_b - m_new)
        if _close(acc, full) and not _close(acc, ref[2]):
            raise AssertionError(f"wrong acc for {case}. Likely mistake: returned the normalized output acc / l; "
                                 "return the unnormalized acc (divide only once, after the last block)")
        if _close(l, ea * l_a + eb * l_b) and _close(acc, acc_a + acc_b):
            raise AssertionError(f"wrong acc for {case}. Likely mistake: rescaled l but not acc; both sums were "
                                 "taken relative to their own block's maximum, so both need exp(m_X - m)")
        if not _close(m, ref[0]) and _close(m, m_a):
            raise AssertionError(f"wrong m for {case}. Likely mistake: kept the first block's maximum; the running "
                                 "maximum is max(m_a, m_b) (the second block may hold a larger score)")
        variants = {
            "no rescaling: each block's sums are relative to its own maximum; multiply them by exp(m_X - m) "
            "before adding": (l_a + l_b, acc_a + acc_b),
            "rescaled by exp(m - m_X) instead of exp(m_X - m): the factor must be <= 1":
                (l_a / ea + l_b / eb, acc_a / ea + acc_b / eb),
        }
        for mistake, (vl, vacc) in variants.items():
            if _close(l, vl) or _close(acc, vacc):
                raise AssertionError(f"wrong l or acc for {case}. Likely mistake: {mistake}")
        for name, got, want in zip(("m", "l", "acc"), result, ref):
            if not _close(got, want):
                raise _diagnose(got, {}, case, name, want)


# --------------------------------------------------------------------------- chapter 8: the next-token loss

def _next_token_nll(logits: Tensor, ids: Tensor) -> Tensor:
    """-log p(ids[b, t + 1] | logits[b, t]) for t = 0 .. L-2: float64 ``(B, L - 1)``, by log-softmax and gather."""
    log_p = torch.log_softmax(logits[:, :-1].double(), dim=-1)  # (B, L-1, V)
    return -log_p.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)


def _nll_against(logits: Tensor, targets: Tensor, dim: int = -1) -> Tensor:
    """-log softmax(logits)[target] at every position: logits ``(B, T, V)``, targets ``(B, T)`` -> ``(B, T)``."""
    log_p = torch.log_softmax(logits.double(), dim=dim)  # (B, T, V)
    return -log_p.gather(-1, targets[..., None]).squeeze(-1)  # (B, T)


@_checker("check_next_token_loss")
def check_next_token_loss(fn: Callable) -> None:
    """Check ``fn(logits, ids) -> loss``: the mean next-token cross-entropy of a language model, in nats.

    ``logits`` ``(B, L, V)`` float64 are the model's outputs for the windows ``ids`` ``(B, L)`` int64 (row
    ``t`` scores the token that follows position ``t``). Expected: a 0-dim float tensor equal to
    ``-(1 / (B (L - 1))) sum_{b, t < L-1} log softmax(logits[b, t])[ids[b, t + 1]]``, the negative of the
    log-likelihood objective of Radford et al. (2018), Eq. 1, averaged over the ``B (L - 1)`` positions that
    have a target (the last position has none) and measured with the natural logarithm (nats; divide by
    ln 2 for bits). Cases include ``L = 2`` (one target per row) and ``B = 1``.

    Raises:
        AssertionError: naming the likely mistake (no shift, shifted the wrong way, wrap-around with
            ``torch.roll``, sum instead of mean, bits instead of nats, mean of -log p over the vocabulary,
            dividing by L instead of L - 1, log-softmax over the wrong axis, raw logits without the log-softmax).
    """
    g = _gen(31)
    # The first case is the most telling: B > 1 and L > 2, so every mistake below gives a different number.
    for B, L, V in [(3, 6, 7), (2, 2, 5), (1, 9, 11), (4, 3, 3)]:
        case = f"logits of shape {(B, L, V)}, ids of shape {(B, L)}"
        logits = 2.0 * torch.randn(B, L, V, generator=g, dtype=torch.float64)
        ids = torch.randint(0, V, (B, L), generator=g)
        ids[:, 1] = (ids[:, 0] + 1) % V  # the first two tokens of every row differ: a missing shift shows
        loss = _call(fn, logits.clone(), ids.clone())
        if not isinstance(loss, Tensor):
            raise AssertionError(f"loss for {case}: expected a 0-dim torch.Tensor, received {type(loss).__name__}")
        if loss.dim() != 0:
            raise AssertionError(f"loss for {case}: expected a 0-dim tensor (shape (), one number for the whole "
                                 f"batch), received shape {tuple(loss.shape)}; average over every position "
                                 "that has a target")
        if not loss.is_floating_point():
            raise AssertionError(f"loss for {case}: expected a floating tensor, received dtype {loss.dtype}")
        nll = _next_token_nll(logits, ids)  # (B, L-1)
        ref = nll.mean()
        if _close(loss, ref):
            continue
        n = B * (L - 1)
        variants = {
            "no shift: each position was scored against its own token; logits[:, t] predicts ids[:, t + 1], so "
            "compare logits[:, :-1] with ids[:, 1:]": _nll_against(logits, ids).mean(),
            "no shift (with the last position dropped): logits[:, :-1] must be scored against ids[:, 1:], not "
            "ids[:, :-1]": _nll_against(logits[:, :-1], ids[:, :-1]).mean(),
            "shifted the wrong way: logits[:, 1:] against ids[:, :-1] asks each position for the token BEFORE "
            "it; use logits[:, :-1] against ids[:, 1:]": _nll_against(logits[:, 1:], ids[:, :-1]).mean(),
            "wrap-around: torch.roll moved the first token to the end, so the last position was scored against "
            "ids[:, 0]; cut with slices (logits[:, :-1], ids[:, 1:]) instead": _nll_against(
                logits, torch.roll(ids, -1, dims=1)).mean(),
            "sum instead of mean: average over the B * (L - 1) positions": nll.sum(),
            "bits instead of nats: use the natural logarithm (torch.log / log_softmax), not log2":
                nll.mean() / math.log(2),
            "mean of -log p over the whole vocabulary: pick the target token's log-probability (gather or "
            "F.cross_entropy), do not average over all V tokens": -torch.log_softmax(
                logits[:, :-1].double(), dim=-1).mean(),
            "divided by L instead of L - 1: only L - 1 positions per row have a target, so the mean is over "
            f"B * (L - 1) = {n} positions, not B * L = {B * L}": nll.sum() / (B * L),
            "log-softmax over the wrong axis: normalize over the vocabulary (dim=-1), not over the positions":
                _nll_against(logits[:, :-1], ids[:, 1:], dim=1).mean(),
            "used the raw logit of the target: apply log_softmax first, the loss is -log p, not -logit":
                -logits[:, :-1].double().gather(-1, ids[:, 1:, None]).mean(),
        }
        raise _diagnose(loss, variants, case, "loss", ref)


# --------------------------------------------------------------------------- chapter 8: temperature and top-k

def _temperature_top_k_probs(logits: Tensor, temperature: float, top_k: int | None, smallest: bool = False,
                             renormalize: bool = True) -> Tensor:
    """Reference (and mistaken variants): softmax(logits / T) on the k kept tokens of each row, 0 elsewhere."""
    scaled = logits.double() / temperature  # (B, V)
    V = scaled.shape[-1]
    k = V if top_k is None else top_k
    order = scaled.argsort(dim=-1, descending=not smallest)  # (B, V)
    keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order[:, :k], True)  # (B, V)
    if not renormalize:  # softmax over all V first, then cut
        return torch.softmax(scaled, dim=-1) * keep
    weights = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True)) * keep  # (B, V), 0 outside the kept set
    return weights / weights.sum(dim=-1, keepdim=True)


@_checker("check_temperature_top_k")
def check_temperature_top_k(fn: Callable) -> None:
    """Check ``fn(logits, temperature, top_k) -> probs``: the distribution that temperature and top-k sampling use.

    ``logits`` ``(B, V)`` float64, ``temperature`` a float > 0, ``top_k`` an int in ``[1, V]`` or ``None``
    (all tokens). Expected ``(B, V)``: ``softmax(logits / temperature)`` restricted to the ``top_k`` largest
    logits of each row, the other entries exactly 0, renormalised so that each row sums to 1 (the softmax
    with a temperature: Hinton, Vinyals & Dean, 2015, Eq. 1; temperature sampling of text: Holtzman et al.,
    2020; top-k sampling: Fan et al., 2018). :func:`transformer_lite.models.decoder_only.sample_next_token` draws
    from this distribution. The logits are continuous random numbers, so no two are tied; the cases cover temperatures
    0.5, 1 and 2 and ``top_k`` None, 1, 3 and V.

    Raises:
        AssertionError: naming the likely mistake (multiplied by the temperature, kept the k smallest, not
            renormalised after zeroing, k + 1 or k - 1 tokens kept, top_k ignored, temperature ignored, logits
            or log-probabilities returned instead of probabilities).
    """
    g = _gen(37)
    # The first case is the most telling: T != 1 and 1 < k < V, so every mistake below changes the numbers.
    for B, V, temperature, top_k in [(3, 7, 0.5, 3), (2, 6, 2.0, None), (4, 9, 1.0, 1), (2, 5, 2.0, 5),
                                     (1, 8, 0.5, None), (3, 10, 2.0, 3), (2, 4, 0.5, 1)]:
        case = f"logits of shape {(B, V)}, temperature={temperature}, top_k={top_k}"
        logits = 1.5 * torch.randn(B, V, generator=g, dtype=torch.float64)
        probs = _call(fn, logits.clone(), temperature, top_k)
        _check_tensor(probs, "probabilities", (B, V), case)
        ref = _temperature_top_k_probs(logits, temperature, top_k)
        if _close(probs, ref):
            continue
        p = probs.double()
        if torch.isnan(p).any():
            raise AssertionError(f"probabilities for {case} contain NaN: a row of only -inf scores (no token "
                                 "kept?) or 0/0 in the normalization")
        if (p < 0).any() or torch.isinf(p).any():
            raise AssertionError(f"wrong probabilities for {case}. Likely mistake: returned logits or "
                                 "log-probabilities instead of probabilities (negative or infinite values); "
                                 "apply the softmax after the cut")
        k = V if top_k is None else top_k
        variants = {
            "multiplied by the temperature instead of dividing: softmax(logits / temperature), so T < 1 "
            "sharpens and T > 1 flattens": _temperature_top_k_probs(logits * temperature ** 2, temperature, top_k),
            "kept the k smallest logits: keep the k LARGEST (torch.topk returns the largest by default)":
                _temperature_top_k_probs(logits, temperature, top_k, smallest=True),
            "not renormalised after zeroing (softmax first, then cut): set the dropped logits to -inf before "
            "the softmax, or divide the kept probabilities by their sum, so each row sums to 1":
                _temperature_top_k_probs(
                logits, temperature, top_k, renormalize=False),
            "top_k ignored: keep only the top_k largest logits, set the others' probability to 0":
                _temperature_top_k_probs(logits, temperature, None),
            "temperature ignored: divide the logits by the temperature before the softmax":
                _temperature_top_k_probs(logits, 1.0, top_k),
        }
        if k + 1 <= V:
            variants["off by one: k + 1 tokens kept, keep exactly top_k (compare with the k-th largest using >=, "
                     "or torch.topk(..., top_k))"] = _temperature_top_k_probs(logits, temperature, k + 1)
        if k - 1 >= 1:
            variants["off by one: k - 1 tokens kept, keep exactly top_k (the k-th largest logit itself stays)"] = \
                _temperature_top_k_probs(logits, temperature, k - 1)
        sums = p.sum(dim=-1)
        for mistake, value in variants.items():
            if _close(p, value):
                raise AssertionError(f"wrong probabilities for {case}. Likely mistake: {mistake}")
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
            rounded = [round(s, 4) for s in sums.tolist()]
            raise AssertionError(f"wrong probabilities for {case}: the rows sum to {rounded}, not 1; these must be "
                                 "probabilities (softmax after the cut)")
        raise _diagnose(p, {}, case, "probabilities", ref)


# --------------------------------------------------------------------------- chapter 8: units and cache size

@_checker("check_loss_units")
def check_loss_units(fn: Callable) -> None:
    """Check ``fn(loss) -> (bits, perplexity)`` for a loss in nats per token (a float).

    Expected: ``bits = loss / ln 2`` (one nat is ``1 / ln 2`` bits: ``ln p = ln 2 * log2 p``) and the
    perplexity ``exp(loss)``, the number of equally likely choices with the same loss (equal to ``2 ** bits``).
    Cases: the uniform guess over 78 symbols (``ln 78``: perplexity 78), ``ln 2`` (one bit, perplexity 2),
    0 (certainty: 0 bits, perplexity 1) and 1.5.

    Raises:
        AssertionError: naming the likely mistake (multiplied by ln 2 instead of dividing, log10 instead of
            ln, perplexity as ``2 ** loss`` or ``exp(bits)``, the pair in the wrong order).
    """
    for loss in (math.log(78), math.log(2), 0.0, 1.5):
        case = f"loss {loss:.4f} nats"
        got = _call(fn, loss)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise AssertionError(f"for {case}: expected a pair (bits, perplexity), received {got!r}")
        try:
            bits, perplexity = float(got[0]), float(got[1])
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"for {case}: expected two numbers (bits, perplexity), received {got!r}") from exc
        want_bits, want_ppl = loss / math.log(2), math.exp(loss)
        ok_bits = math.isclose(bits, want_bits, rel_tol=1e-6, abs_tol=1e-9)
        ok_ppl = math.isclose(perplexity, want_ppl, rel_tol=1e-6, abs_tol=1e-9)
        if ok_bits and ok_ppl:
            continue
        if loss > 0 and math.isclose(bits, want_ppl, rel_tol=1e-6) and math.isclose(perplexity, want_bits,
                                                                                     rel_tol=1e-6):
            raise AssertionError(f"for {case}: the pair is in the wrong order; return (bits, perplexity)")
        if not ok_bits:
            mistakes = {"multiplied by ln 2: a nat is 1 / ln 2 bits, so divide the loss by ln 2": loss * math.log(2),
                        "log10 instead of ln: bits = loss / ln 2 (math.log(2), the natural logarithm)":
                            loss / math.log10(2)}
            for mistake, value in mistakes.items():
                if loss > 0 and math.isclose(bits, value, rel_tol=1e-6):
                    raise AssertionError(f"wrong bits for {case}. Likely mistake: {mistake}")
            raise AssertionError(f"wrong bits for {case}: expected {want_bits:.6f}, received {bits:.6f}")
        mistakes = {"2 ** loss: the loss is in nats, so the perplexity is e ** loss (or 2 ** bits)": 2.0 ** loss,
                    "exp(bits): bits go with base 2, so the perplexity is 2 ** bits = e ** loss":
                        math.exp(want_bits)}
        for mistake, value in mistakes.items():
            if loss > 0 and math.isclose(perplexity, value, rel_tol=1e-6):
                raise AssertionError(f"wrong perplexity for {case}. Likely mistake: {mistake}")
        raise AssertionError(f"wrong perplexity for {case}: expected {want_ppl:.6f}, received {perplexity:.6f}")


@_checker("check_kv_cache_bytes")
def check_kv_cache_bytes(fn: Callable) -> None:
    """Check ``fn(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number) -> int``: the size of a key/value cache.

    Expected: ``2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number`` bytes (a key and a value
    per layer, key/value head and token; Ainslie et al., 2023, share each key/value head among several query
    heads). The oracle is independent of that formula: for each case a small
    :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` with grouped-query attention processes
    ``n_tokens`` tokens into a :class:`~transformer_lite.models.decoder_only.KVCache`, whose tensors' bytes are
    counted (float32: 4 bytes; float64: 8). Then SmolLM2's numbers (30 layers, 3 key/value heads of width 64,
    8192 tokens, float32) are checked against the formula.

    Raises:
        AssertionError: naming the likely mistake (keys only, the query heads counted instead of the key/value
            heads, bits instead of bytes, the bytes per number left out).
    """
    cases = [(2, 2, 4, 5, torch.float32), (3, 1, 8, 7, torch.float64), (1, 3, 2, 1, torch.float32)]
    for n_layers, n_kv, d_head, n_tokens, dtype in cases:
        n_heads = 2 * n_kv  # grouped-query attention: two query heads per key/value head
        cfg = DecoderOnlyConfig(vocab_size=11, max_len=16, d_model=n_heads * d_head, n_heads=n_heads,
                                n_layers=n_layers, d_ff=8, n_kv_heads=n_kv, positional="rotary")
        torch.manual_seed(0)
        model = DecoderOnlyTransformer(cfg).to(dtype).eval()
        cache = KVCache()
        with torch.no_grad():
            model(torch.arange(n_tokens)[None] % 11, cache=cache)  # (1, n_tokens)
        want = cache.num_bytes()  # measured on the cache's tensors
        size = torch.empty((), dtype=dtype).element_size()
        case = (f"n_layers={n_layers}, n_kv_heads={n_kv} (with {n_heads} query heads), d_head={d_head}, "
                f"n_tokens={n_tokens}, bytes_per_number={size}")
        got = _call(fn, n_layers, n_kv, d_head, n_tokens, size)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            per = n_layers * d_head * n_tokens
            mistakes = {"keys only: the cache holds a key AND a value per token (factor 2)": want // 2,
                        "counted the query heads: only the n_kv_heads key/value heads are cached":
                            2 * per * n_heads * size,
                        "bits instead of bytes (factor 8)": 8 * want,
                        "the bytes per number left out: that counts numbers, not bytes": want // size}
            for mistake, value in mistakes.items():
                if got == value:
                    raise AssertionError(f"wrong size for {case}. Likely mistake: {mistake}")
            raise AssertionError(f"wrong size for {case}: the cache measured {want:,} bytes, received {got!r}")
    want = 2 * 30 * 3 * 64 * 8192 * 4
    got = _call(fn, 30, 3, 64, 8192, 4)
    if got != want:
        raise AssertionError(f"wrong size for SmolLM2 (30 layers, 3 key/value heads of width 64, 8192 tokens, "
                             f"float32): expected {want:,} bytes, received {got!r}")

"""Exercise checkers of chapter 1, ``notebooks/01_attention.ipynb``:
scaled dot-product attention, a head's score spread, splitting and merging heads, a
multi-head attention module.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ...nn.attention import MultiHeadAttention, scaled_dot_product_attention
from ...nn.masks import causal_mask
from . import _checking as checking
from ._checking import ATOL

__all__ = [
    "check_multi_head_attention",
    "check_scaled_dot_product_attention",
    "check_score_spread",
    "check_split_merge_heads",
]


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


def _attention_cases():
    g = checking.gen(1234)
    cases = []
    for batch, L, S, d_k, d_v, masked in [
        ((), 3, 3, 16, 16, False),
        ((2,), 2, 5, 9, 3, False),
        ((2, 3), 4, 4, 16, 5, "causal"),
        ((), 1, 1, 4, 4, False),
        ((3,), 5, 3, 8, 8, "random"),
    ]:
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
            f", {masked} bool mask {tuple(mask.shape)}" if mask is not None else ", no mask"
        )
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
    cases.append(
        (
            q,
            k,
            v,
            mask,
            f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}, bool mask "
            f"{tuple(mask.shape)} whose row 2 is all False (a query with no allowed key)",
        )
    )
    return cases


def _check_fully_masked_rows(out: Tensor, w: Tensor, mask: Tensor, case: str) -> None:
    """Rows of ``mask`` with no ``True`` must give zero weights and a zero output; name NaN and -1e9 answers."""
    empty = ~mask.any(dim=-1)  # (L,): queries with no allowed key
    if not empty.any():
        return
    w_empty = w.double()[..., empty, :]  # (..., n_empty, S)
    out_empty = out.double()[..., empty, :]  # (..., n_empty, d_v)
    if torch.isnan(w_empty).any() or torch.isnan(out_empty).any():
        raise AssertionError(
            f"wrong weights for {case}. Likely mistake: a fully masked row gives NaN: the softmax of "
            "a row of all -inf is 0/0; return zeros for such rows (zero weights, so a zero output), "
            "e.g. give their scores any finite value before the softmax and zero their weights after"
        )
    if (w_empty.abs() > ATOL).any():
        S = w.shape[-1]
        hint = ""
        if torch.allclose(w_empty, torch.full_like(w_empty, 1.0 / S), atol=ATOL):
            hint = (
                " Likely mistake: the forbidden scores were filled with a large finite number (e.g. -1e9) "
                "instead of -inf, which makes such a row uniform over the keys it must not see"
            )
        raise AssertionError(
            f"wrong weights for {case}: a query whose keys are all masked must get zero weights and "
            f"a zero output, received weights summing to {w_empty.sum(-1).max().item():.3g}.{hint}"
        )
    if (out_empty.abs() > ATOL).any():
        raise AssertionError(
            f"wrong output for {case}: a query whose keys are all masked must get a zero output "
            "(its weights are all zero), received nonzero values"
        )


@checking.checker("check_scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Check ``fn(query, key, value, attn_mask=None) -> (output, weights)``.

    ``query (..., L, d_k)``, ``key (..., S, d_k)``, ``value (..., S, d_v)``; ``attn_mask`` a bool
    ``(L, S)`` tensor with ``True`` = may attend, or a float ``(L, S)`` tensor added to the scores
    (``-inf`` forbids; checked last). Expected: ``output (..., L, d_v)`` and
    ``weights (..., L, S)`` equal to softmax(Q K^T / sqrt(d_k)) V (Vaswani et al., 2017, Eq. 1). The last
    bool case has a query whose keys are all masked: it must get zero weights and a zero output (not NaN), as
    :func:`~transformer_lite.nn.attention.scaled_dot_product_attention` gives.

    Raises:
        AssertionError: naming the likely mistake.
    """
    for q, k, v, mask, case in _attention_cases():
        result = checking.call(
            fn, q.clone(), k.clone(), v.clone(), attn_mask=None if mask is None else mask.clone()
        )
        if not isinstance(result, tuple) or len(result) != 2:
            raise AssertionError(
                f"for {case}: expected a tuple (output, weights), received {type(result).__name__}"
            )
        out, w = result
        L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        checking.check_tensor(w, "weights", (*q.shape[:-2], L, S), case)
        checking.check_tensor(out, "output", (*q.shape[:-2], L, d_v), case)
        ref_out, ref_w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if mask is not None:
            _check_fully_masked_rows(out, w, mask, case)
        if mask is not None and checking.looks_inverted(w, mask):
            raise AssertionError(
                f"wrong weights for {case}. Likely mistake: inverted mask polarity: True means "
                "'may attend' (as in F.scaled_dot_product_attention), fill the scores where the "
                "mask is False"
            )
        if (
            mask is not None
            and (w.double()[..., ~mask].abs() > 0).any()
            and not checking.close(
                w, _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="inverted")[1]
            )
        ):
            raise AssertionError(
                f"wrong weights for {case}. Likely mistake: a future-position leak / mask not "
                "applied: a query gives weight to a key the mask forbids (False = blocked). Fill "
                "the forbidden scores with -inf before the softmax"
            )
        variants = {
            "no scaling: divide the scores by sqrt(d_k)": _attention_variant(q, k, v, mask, 1.0),
            "scaled by d_k instead of sqrt(d_k)": _attention_variant(q, k, v, mask, 1 / d_k),
            "scaled by sqrt(d_v) instead of sqrt(d_k)": _attention_variant(
                q, k, v, mask, 1 / math.sqrt(d_v)
            ),
            "softmax over the wrong axis: normalize over the keys (dim=-1), so each row sums to 1": _attention_variant(
                q, k, v, mask, 1 / math.sqrt(d_k), softmax_dim=-2
            ),
        }
        if mask is not None:
            variants[
                "inverted mask polarity: True means 'may attend' (as in F.scaled_dot_product_attention), "
                "fill the scores where the mask is False"
            ] = _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="inverted")
            variants[
                "mask applied after the softmax: rows no longer sum to 1; add -inf to the scores before it"
            ] = _attention_variant(q, k, v, mask, 1 / math.sqrt(d_k), mask_mode="after_softmax")
        if not checking.close(w, ref_w):
            w_variants = {m: vw for m, (_, vw) in variants.items()}
            if L == S:
                w_variants[
                    "returned the weights transposed: rows are queries, columns keys, shape (..., L, S)"
                ] = ref_w.transpose(-2, -1)
            raise checking.diagnose(w, w_variants, case, "weights", ref_w)
        if not checking.close(out, ref_out):
            out_variants = {m: vo for m, (vo, _) in variants.items()}
            if L == S:
                out_variants[
                    "multiplied the values by the transposed weights: use weights @ value"
                ] = ref_w.transpose(-2, -1) @ v
            raise checking.diagnose(out, out_variants, case, "output", ref_out)
    _check_float_mask(fn)


def _check_float_mask(fn: Callable) -> None:
    """The last case of :func:`check_scaled_dot_product_attention`: a float mask, added to the scores."""
    g = checking.gen(4321)
    q = torch.randn(2, 4, 8, generator=g, dtype=torch.float64) * 1.5
    k = torch.randn(2, 6, 8, generator=g, dtype=torch.float64) * 1.5
    v = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)
    mask = torch.randn(4, 6, generator=g, dtype=torch.float64)
    mask[torch.rand(4, 6, generator=g) < 0.3] = float("-inf")
    mask[:, 0] = 0.5  # no query loses every key
    case = (
        f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}, float mask "
        f"{tuple(mask.shape)} (added to the scores; -inf forbids)"
    )
    try:
        result = checking.call(fn, q.clone(), k.clone(), v.clone(), attn_mask=mask.clone())
    except AssertionError as exc:
        raise AssertionError(
            f"for {case}: {exc} Likely mistake: a float attn_mask is not handled: add it to the scores, "
            "softmax(Q K^T / sqrt(d_k) + M); only a bool mask is filled where it is False "
            "(test attn_mask.dtype == torch.bool)"
        ) from exc
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(
            f"for {case}: expected a tuple (output, weights), received {type(result).__name__}"
        )
    out, w = result
    checking.check_tensor(w, "weights", (2, 4, 6), case)
    checking.check_tensor(out, "output", (2, 4, 5), case)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    variants = {
        "float mask ignored: add it to the scores before the softmax": torch.softmax(scores, -1),
        "float mask subtracted: it is ADDED to the scores (-inf forbids)": torch.softmax(
            scores - mask, -1
        ).nan_to_num(0.0),
        "float mask multiplied into the weights after the softmax: add it to the scores before it": (
            torch.softmax(scores, -1) * mask
        ).nan_to_num(0.0),
    }
    if not checking.close(w, ref_w):
        raise checking.diagnose(w, variants, case, "weights", ref_w)
    if not checking.close(out, ref_out):
        raise checking.diagnose(
            out, {m: vw @ v for m, vw in variants.items()}, case, "output", ref_out
        )


# --------------------------------------------------------------------------- chapter 1: a head's score spread


@checking.checker("check_score_spread")
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
    g = checking.gen(2024)
    for batch, L, S, scale in [
        ((), 3, 3, 1.0),
        ((2,), 4, 7, 3.0),
        ((2, 3), 5, 5, 0.5),
        ((), 1, 9, 6.0),
    ]:
        case = f"weights {(*batch, L, S)} from scores of spread about {scale}"
        scores = torch.randn(*batch, L, S, generator=g, dtype=torch.float64) * scale
        # rows differ
        scores = scores * torch.rand(*batch, L, 1, generator=g, dtype=torch.float64).add(0.5)
        weights = torch.softmax(scores, dim=-1)
        got = checking.call(fn, weights.clone())
        checking.check_tensor(got, "spread", (*batch, L), case)
        expected = scores.std(dim=-1, correction=0)
        if checking.close(got, expected):
            continue
        log_w = weights.log()
        variants = {
            "the spread of the weights themselves: take the standard deviation of log(weights), which are the "
            "scores up to one constant per row": weights.std(dim=-1, correction=0),
            "sample standard deviation (correction=1): use the population one, correction=0, dividing by S": log_w.std(
                dim=-1, correction=1
            )
            if S > 1
            else expected,
            "returned the variance: take its square root": log_w.var(dim=-1, correction=0),
        }
        if L == S:  # otherwise the shape check above already failed
            variants[
                "spread over the queries (dim=-2): a row is one query, its spread runs over the keys "
                "(dim=-1)"
            ] = log_w.std(dim=-2, correction=0)
        raise checking.diagnose(got, variants, case, "spread", expected)


# --------------------------------------------------------------------------- heads


@checking.checker("check_split_merge_heads")
def check_split_merge_heads(split_fn: Callable, merge_fn: Callable) -> None:
    """Check ``split_fn(x (B, L, D), n_heads) -> (B, H, L, D/H)`` and ``merge_fn(heads) -> (B, L, D)``.

    Head ``h`` must hold features ``h*d_head .. (h+1)*d_head - 1`` of every position, and
    ``merge_fn(split_fn(x, H))`` must give ``x`` back.

    Raises:
        AssertionError: naming the likely mistake (reshaping straight to (B, H, L, d_head), which mixes
            positions into heads; merging without undoing the transpose).
    """
    g = checking.gen(3)
    for B, L, D, H in [(2, 5, 12, 3), (1, 1, 8, 2), (3, 4, 6, 6)]:
        case = f"x of shape {(B, L, D)}, n_heads={H}"
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        ref = x.view(B, L, H, D // H).transpose(1, 2)
        heads = checking.call(split_fn, x.clone(), H)
        checking.check_tensor(heads, "split_fn output", (B, H, L, D // H), case)
        if not checking.close(heads, ref):
            if checking.close(heads, x.reshape(B, H, L, D // H)):
                raise AssertionError(
                    f"split_fn is wrong for {case}. Likely mistake: reshaped straight to "
                    "(B, H, L, d_head), which mixes positions into heads; view as "
                    "(B, L, H, d_head), then transpose(1, 2)"
                )
            raise checking.diagnose(heads, {}, case, "split_fn output", ref)
        for layout, heads_in in (
            ("transposed view", ref.clone()),
            ("contiguous", ref.contiguous()),
        ):
            merged = checking.call(merge_fn, heads_in)
            checking.check_tensor(merged, f"merge_fn output ({layout} input)", (B, L, D), case)
            if not checking.close(merged, x):
                break
        if not checking.close(merged, x):
            if checking.close(merged, ref.reshape(B, L, D)):
                raise AssertionError(
                    f"merge_fn is wrong for {case}. Likely mistake: reshaped (B, H, L, d_head) "
                    "straight to (B, L, D); transpose(1, 2) back first"
                )
            raise checking.diagnose(merged, {}, case, "merge_fn output", x)


# --------------------------------------------------------------------------- chapter 1: a multi-head attention module

_MHA_NAMES = "q_proj, k_proj, v_proj, out_proj (each nn.Linear(d_model, d_model), with a bias)"


def _mha_variant(m, query, key, value, mask, mistake=None):
    """Multi-head attention with the weights of ``m`` (a :class:`MultiHeadAttention`), or one classic mistake."""
    B, L, D = query.shape
    H = m.n_heads
    d_head = D // H

    def split(x):  # (B, T, D) -> (B, H, T, d_head)
        if mistake == "split order":
            return x.reshape(B, H, x.shape[1], d_head)
        return x.view(B, x.shape[1], H, d_head).transpose(1, 2)

    k_proj, v_proj = (
        (m.v_proj, m.k_proj) if mistake == "projections swapped" else (m.k_proj, m.v_proj)
    )
    q, k, v = split(m.q_proj(query)), split(k_proj(key)), split(v_proj(value))
    scale = {"no scale": 1.0, "sqrt(D)": 1 / math.sqrt(D)}.get(mistake, 1 / math.sqrt(d_head))
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, L, S)
    if mask is not None and mistake != "mask ignored":
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask if mistake == "inverted" else ~mask, float("-inf"))
        else:
            scores = scores - mask if mistake == "float subtracted" else scores + mask
    w = torch.softmax(scores, dim=-2 if mistake == "wrong axis" else -1).nan_to_num(0.0)
    heads = w @ v  # (B, H, L, d_head)
    if mistake == "merge order":
        merged = heads.reshape(B, L, D)
    else:
        merged = heads.transpose(1, 2).reshape(B, L, D)
    return (merged if mistake == "no out_proj" else m.out_proj(merged)), w


_MHA_MISTAKES = {
    "scores not scaled: divide them by sqrt(d_head), the width of one head": "no scale",
    "scores scaled by sqrt(d_model) instead of sqrt(d_head): each head's dot products have d_head terms": "sqrt(D)",
    "heads split in the wrong order: reshaped (B, T, D) straight to (B, H, T, d_head), which mixes positions "
    "into heads; view as (B, T, H, d_head), then transpose(1, 2) (exercise 1.2)": "split order",
    "heads merged without undoing the transpose: (B, H, L, d_head) -> transpose(1, 2) -> (B, L, D) "
    "(exercise 1.2)": "merge order",
    "inverted mask polarity: True means 'may attend'; block the scores where the mask is False": "inverted",
    "mask not applied: pass attn_mask on to your attention": "mask ignored",
    "float mask subtracted: a float attn_mask is ADDED to the scores (softmax(QK^T/sqrt(d) + M))": "float subtracted",
    "softmax over the wrong axis: normalize over the keys (dim=-1)": "wrong axis",
    "output projection missing: the merged heads go through out_proj": "no out_proj",
    "k_proj and v_proj swapped: keys are k_proj(key), values v_proj(value)": "projections swapped",
}


def _mha_cases():
    # (B, L, S, d_model, n_heads, mask, self-attention)
    return [
        (2, 5, 5, 12, 3, None, True),
        (1, 1, 1, 6, 2, None, False),
        (2, 3, 7, 12, 4, None, False),
        (3, 4, 6, 10, 5, "bool", False),
        (2, 5, 5, 9, 3, "causal", True),
        (2, 4, 5, 8, 2, "float", False),
    ]


def _mha_mask(kind, L, S, g):
    if kind == "causal":
        return causal_mask(L, S)
    if kind == "bool":
        mask = torch.rand(L, S, generator=g) < 0.5
        mask[:, 0], mask[:, 1] = True, False  # every row has an allowed and a forbidden key
        return mask
    if kind == "float":
        mask = torch.randn(L, S, generator=g, dtype=torch.float64)
        mask[torch.rand(L, S, generator=g) < 0.3] = float("-inf")
        mask[:, 0] = 0.5  # no row forbids every key
        return mask
    return None


@checking.checker("check_multi_head_attention")
def check_multi_head_attention(cls) -> None:
    """Check a module class ``cls(d_model, n_heads)`` whose ``forward(query, key, value, attn_mask=None)``
    returns ``(output, weights)`` as :class:`~transformer_lite.nn.attention.MultiHeadAttention` does.

    The package module's weights are copied into the learner's (submodules ``q_proj``, ``k_proj``,
    ``v_proj``, ``out_proj``); both run in float64 on self- and cross-attention (``L != S``), odd sizes,
    one position, a boolean ``(L, S)`` mask (``True`` = may attend) and a float mask added to the
    scores. Outputs ``(B, L, d_model)``, weights ``(B, H, L, S)`` and the gradients with respect to
    query, key and value must agree.

    Raises:
        AssertionError: naming the likely mistake (scores not scaled or scaled by sqrt(d_model), heads split
            or merged in the wrong order, mask polarity inverted, softmax over the wrong axis, output
            projection missing, k/v projections swapped, gradients cut).
    """
    g = checking.gen(11)
    for B, L, S, D, H, kind, self_attention in _mha_cases():
        mask = _mha_mask(kind, L, S, g)
        case = f"d_model={D}, n_heads={H}, query ({B}, {L}, {D}), key/value ({B}, {S}, {D}), " + (
            f"{kind} mask {tuple(mask.shape)}" if mask is not None else "no mask"
        )
        if self_attention:
            case += " (self-attention: one tensor as query, key and value)"
        with torch.random.fork_rng():  # seeded weights, without touching the caller's random state
            torch.manual_seed(int(torch.randint(0, 10_000, (1,), generator=g)))
            ref = MultiHeadAttention(D, H).double().eval()
            student = checking.call(cls, D, H)
        if not isinstance(student, nn.Module):
            raise AssertionError(
                f"{case}: expected an nn.Module, received {type(student).__name__}"
            )
        checking.load_reference(student, ref, "check_multi_head_attention", _MHA_NAMES)
        student.eval()
        query = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        if self_attention:
            key = value = query
        else:
            key = torch.randn(B, S, D, generator=g, dtype=torch.float64)
            value = torch.randn(B, S, D, generator=g, dtype=torch.float64)
        result = checking.call(
            student, query, key, value, attn_mask=None if mask is None else mask.clone()
        )
        if not isinstance(result, tuple) or len(result) != 2:
            raise AssertionError(
                f"for {case}: expected a tuple (output, weights), received {type(result).__name__}"
            )
        out, w = result
        checking.check_tensor(w, "weights", (B, H, L, S), case)
        checking.check_tensor(out, "output", (B, L, D), case)
        with torch.no_grad():
            ref_out, ref_w, _ = ref(query, key, value, attn_mask=mask)
            variants = {
                msg: _mha_variant(ref, query, key, value, mask, m)
                for msg, m in _MHA_MISTAKES.items()
            }
        if not checking.close(w, ref_w):
            raise checking.diagnose(
                w, {m: vw for m, (_, vw) in variants.items()}, case, "weights", ref_w
            )
        if not checking.close(out, ref_out):
            raise checking.diagnose(
                out, {m: vo for m, (vo, _) in variants.items()}, case, "output", ref_out
            )

        upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        inputs = (query, key, value)
        names = ("query", "key", "value")[: 1 if self_attention else 3]
        checking.compare_input_grads(student, ref, inputs, names, upstream, case, attn_mask=mask)

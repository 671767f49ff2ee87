"""Exercise checkers of chapter 4, ``notebooks/04_transformer_block.ipynb``:
layer normalization and a pre-norm block.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...nn.blocks import TransformerBlock
from ._checking import _call, _check_tensor, _checker, _close, _diagnose, _gen

__all__ = [
    "check_layer_norm",
    "check_pre_norm_block",
]


# --------------------------------------------------------------------------- layer norm


def _layer_norm_variant(
    x, weight, bias, eps, dim=-1, unbiased=False, eps_outside=False, affine=True
):
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
            "unbiased variance: layer norm divides by D, not D - 1 (use unbiased=False / correction=0)": _layer_norm_variant(
                x, weight, bias, eps, unbiased=True
            ),
            "epsilon outside the square root: use sqrt(var + eps), not sqrt(var) + eps": _layer_norm_variant(
                x, weight, bias, eps, eps_outside=True
            ),
            "normalizing over the wrong axis: take mean and variance over the last dimension (features), "
            "per position": _layer_norm_variant(x, weight, bias, eps, dim=-2),
            "normalizing over the wrong axis (the first): statistics must be per position, over features": _layer_norm_variant(
                x, weight, bias, eps, dim=0
            ),
            "forgot the learned scale and shift: multiply by weight and add bias": _layer_norm_variant(
                x, weight, bias, eps, affine=False
            ),
            "eps left out: divide by sqrt(var + eps), which also keeps constant inputs finite": _layer_norm_variant(
                x, weight, bias, 0.0
            ),
        }
        if eps != 1e-5:
            variants["eps ignored: use the eps argument inside the square root"] = (
                _layer_norm_variant(x, weight, bias, 1e-5)
            )
        raise _diagnose(y, variants, case, "output", ref)


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
        with (
            torch.no_grad()
        ):  # layer norms that are not the identity, so that norm1 and norm2 differ
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
                "post-norm order: pre-norm normalizes the sublayer's INPUT, x + sublayer(norm(x)), and never the sum": "post-norm",
                "one layer norm for both sublayers: use norm1 before attention and norm2 before the feed-forward": "one norm",
                "keys and values read the un-normalized x: pass norm1(x) as query, key and value": "attention reads x",
                "residual taken from the normalized input: add the sublayer output to x itself, not to norm(x)": "residual of the normalized input",
                "no residual connection around the attention: h = x + self_attn(norm1(x))": "no residual (attention)",
                "no residual connection around the feed-forward: y = h + ff(norm2(h))": "no residual (feed-forward)",
            }
            variants = {msg: _pre_norm_variant(block, x, mistake) for msg, mistake in names.items()}
            raise _diagnose(y, variants, case, "output", ref)

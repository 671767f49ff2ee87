"""Exercise checkers of chapter 4, ``notebooks/04_transformer_block.ipynb``:
layer normalization and a pre-norm block, then the layer norm, the feed-forward network and the
block (post-norm and pre-norm) as modules.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...nn.blocks import PositionwiseFeedForward, TransformerBlock
from ...nn.masks import causal_mask
from ...nn.normalization import LayerNorm
from . import _checking as checking

__all__ = [
    "check_layer_norm",
    "check_pre_norm_block",
    "check_layer_norm_module",
    "check_feed_forward_module",
    "check_block_module",
]


# --------------------------------------------------------------------------- layer norm


def _layer_norm_variant(
    x, weight, bias, eps, dim=-1, unbiased=False, eps_outside=False, affine=True
):
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    x_hat = (x - mean) / (torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps))
    return x_hat * weight + bias if affine else x_hat


@checking.checker("check_layer_norm")
def check_layer_norm(fn: Callable) -> None:
    """Check ``fn(x, weight, bias, eps=1e-5)``: layer normalization over the last dimension (Ba et al., 2016).

    ``x (..., D)``, ``weight (D,)``, ``bias (D,)``; expected
    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance (divide by D).

    Raises:
        AssertionError: naming the likely mistake (unbiased variance, eps outside the square root, wrong axis,
            missing scale/shift).
    """
    g = checking.gen(7)
    for shape, eps in [((2, 3, 5), 1e-5), ((4, 7), 0.5), ((3, 1, 6), 0.1), ((1, 4), 1e-5)]:
        D = shape[-1]
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 0.8 + 0.3
        weight = torch.rand(D, generator=g, dtype=torch.float64) + 0.5
        bias = torch.randn(D, generator=g, dtype=torch.float64)
        case = f"x of shape {shape}, eps={eps}"
        y = checking.call(fn, x.clone(), weight.clone(), bias.clone(), eps=eps)
        checking.check_tensor(y, "output", shape, case)
        ref = _layer_norm_variant(x, weight, bias, eps)
        if checking.close(y, ref):
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
        raise checking.diagnose(y, variants, case, "output", ref)


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


@checking.checker("check_pre_norm_block")
def check_pre_norm_block(fn: Callable) -> None:
    """Check ``fn(block, x) -> y``: the pre-norm forward pass of a :class:`~transformer_lite.nn.blocks.TransformerBlock`.

    ``y = h + ff(norm2(h))`` with ``h = x + self_attn(norm1(x))`` (Xiong et al., 2020), using the block's own
    submodules (``block.self_attn(q, k, v)[0]`` is the output); ``x`` and ``y`` are ``(B, L, D)``.

    Raises:
        AssertionError: naming the likely mistake (post-norm order, one norm for both sublayers, a missing
            residual, a residual taken after the norm, keys/values not normalized).
    """
    g = checking.gen(21)
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
            y = checking.call(fn, block, x.clone())
            if isinstance(y, tuple):
                y = y[0]
            checking.check_tensor(y, "output", (B, L, D), case)
            ref = block(x)[0]
            if checking.close(y, ref):
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
            raise checking.diagnose(y, variants, case, "output", ref)


# --------------------------------------------------------------------------- chapter 4: the block as modules


def _random_layer_norm(D: int, eps: float, g: torch.Generator) -> LayerNorm:
    """A float64 :class:`LayerNorm` whose gain and shift are not 1 and 0, so that a missing one shows."""
    norm = LayerNorm(D, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(torch.rand(D, generator=g, dtype=torch.float64) + 0.5)
        norm.bias.copy_(torch.randn(D, generator=g, dtype=torch.float64) * 0.5)
    return norm


def _compare_input_grad(student, ref, x, g, case, **kwargs) -> None:
    """The gradient of ``sum(output * R)`` with respect to ``x`` must agree (output already checked)."""
    upstream = torch.randn(x.shape, generator=g, dtype=torch.float64)
    checking.compare_input_grads(student, ref, (x,), ("input",), upstream, case, **kwargs)


@checking.checker("check_layer_norm_module")
def check_layer_norm_module(cls) -> None:
    """Check a module class ``cls(d_model, eps=1e-5)`` computing :class:`~transformer_lite.nn.normalization.LayerNorm`.

    Expected: parameters ``weight`` (initialised to ones) and ``bias`` (zeros), both ``(d_model,)``;
    ``forward(x)`` for ``x (..., d_model)`` gives ``(x - mean) / sqrt(var + eps) * weight + bias`` with the
    biased variance. The package's random gain and shift are copied in; outputs and input gradients are
    compared in float64.

    Raises:
        AssertionError: naming the likely mistake (parameters missing, not initialised to 1 and 0, or not
            ``nn.Parameter``; unbiased variance, eps outside the square root, wrong axis, no scale and shift,
            eps ignored).
    """
    g = checking.gen(17)
    for shape, eps in [((2, 3, 5), 1e-5), ((4, 7), 0.5), ((3, 1, 6), 0.1), ((1, 4), 1e-5)]:
        D = shape[-1]
        case = f"{getattr(cls, '__name__', 'your module')}({D}, eps={eps}) on x of shape {shape}"
        student = checking.build(cls, (D,), {"eps": eps}, seed=D)
        params = dict(student.named_parameters())
        for name, init in (("weight", 1.0), ("bias", 0.0)):
            p = params.get(name)
            if p is None:
                raise AssertionError(
                    f"{case}: expected a parameter {name!r} of shape ({D},), found parameters "
                    f"{sorted(params)}; make it an nn.Parameter so that the optimizer trains it"
                )
            if tuple(p.shape) != (D,) or not bool((p.detach() == init).all()):
                raise AssertionError(
                    f"{case}: {name} must start as {'ones' if init else 'zeros'} of shape ({D},), so that "
                    f"a new layer norm only standardizes; received shape {tuple(p.shape)}"
                )
        ref = _random_layer_norm(D, eps, g)
        checking.load_reference(student, ref, "check_layer_norm_module", "weight and bias")
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 0.8 + 0.3
        with torch.no_grad():
            y = checking.call(student, x.clone())
        checking.check_tensor(y, "output", shape, case)
        w, b = ref.weight.detach(), ref.bias.detach()
        expected = _layer_norm_variant(x, w, b, eps)
        if not checking.close(y, expected):
            variants = {
                "unbiased variance: layer norm divides by D, not D - 1 (use unbiased=False / correction=0)": _layer_norm_variant(
                    x, w, b, eps, unbiased=True
                ),
                "epsilon outside the square root: use sqrt(var + eps), not sqrt(var) + eps": _layer_norm_variant(
                    x, w, b, eps, eps_outside=True
                ),
                "normalizing over the wrong axis: take mean and variance over the last dimension (features)": _layer_norm_variant(
                    x, w, b, eps, dim=0
                ),
                "forgot the learned scale and shift: multiply by self.weight and add self.bias": _layer_norm_variant(
                    x, w, b, eps, affine=False
                ),
                "eps ignored: use self.eps inside the square root": _layer_norm_variant(
                    x, w, b, 1e-5
                )
                if eps != 1e-5
                else _layer_norm_variant(x, w, b, 0.0),
            }
            raise checking.diagnose(y, variants, case, "output", expected)
        _compare_input_grad(student, ref, x, g, case)


def _ff_variant(ff, x, mistake=None):
    """The feed-forward network of ``ff`` (a :class:`PositionwiseFeedForward`, ReLU), or one classic mistake."""
    hidden = ff.linear1(x)
    hidden = {"no activation": hidden, "gelu": F.gelu(hidden)}.get(mistake, F.relu(hidden))
    out = ff.linear2(hidden)
    return F.relu(out) if mistake == "relu after linear2" else out


# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_FF_EVAL_DROPOUT = (
    "dropout active in eval mode: call the module self.dropout (it follows model.eval()), or "
    "F.dropout(..., training=self.training), never F.dropout(..., training=True)"
)


@checking.checker("check_feed_forward_module")
def check_feed_forward_module(cls) -> None:
    """Check a module class ``cls(d_model, d_ff, dropout=0.0)`` computing
    :class:`~transformer_lite.nn.blocks.PositionwiseFeedForward` (ReLU).

    Expected submodules ``linear1`` ``(d_model -> d_ff)``, ``linear2`` ``(d_ff -> d_model)`` and
    ``dropout``; ``forward(x) = linear2(dropout(relu(linear1(x))))``. The package's weights are copied in;
    in eval mode outputs and input gradients must agree, in train mode (same random seed) the dropped
    entries must be those of the package.

    Raises:
        AssertionError: naming the likely mistake (no activation, GELU, a ReLU after the last layer, dropout
            active in eval mode, dropout in the wrong place or missing in training).
    """
    g = checking.gen(19)
    for B, L, D, d_ff in [(2, 5, 8, 17), (1, 1, 6, 7), (3, 4, 12, 25)]:
        name = getattr(cls, "__name__", "your module")
        case = f"{name}({D}, {d_ff}, dropout=0.3) on x of shape {(B, L, D)}"
        student = checking.build(cls, (D, d_ff), {"dropout": 0.3}, seed=D)
        with torch.random.fork_rng():
            torch.manual_seed(D)
            ref = PositionwiseFeedForward(D, d_ff, dropout=0.3).double()
        checking.load_reference(
            student, ref, "check_feed_forward_module", "linear1, linear2 (nn.Linear) and dropout"
        )
        student.eval(), ref.eval()
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        with torch.no_grad():
            y = checking.call(student, x.clone())
            checking.check_tensor(y, "output", (B, L, D), case)
            again = checking.call(student, x.clone())
            expected = ref(x)
            checking.check_eval_repeatable(y, again, expected, case, _FF_EVAL_DROPOUT)
            if not checking.close(y, expected):
                variants = {
                    "no activation between the two linear layers: linear2(relu(linear1(x)))": "no activation",
                    "GELU instead of ReLU: the chapter's network, like the original Transformer, uses the ReLU": "gelu",
                    "a ReLU after the last layer too: the output of linear2 is not activated": "relu after linear2",
                }
                variants = {m: _ff_variant(ref, x, v) for m, v in variants.items()}
                raise checking.diagnose(y, variants, case, "output", expected)
            # train mode: the same seed must drop the same hidden units as the package
            student.train(), ref.train()
            with torch.random.fork_rng():
                torch.manual_seed(0)
                y_train = checking.call(student, x.clone())
                torch.manual_seed(0)
                expected_train = ref(x)
                torch.manual_seed(0)
                after = F.dropout(_ff_variant(ref, x), p=0.3, training=True)
                torch.manual_seed(0)
                before = ref.linear2(F.relu(ref.linear1(F.dropout(x, p=0.3, training=True))))
            if not checking.close(y_train, expected_train):
                variants = {
                    "dropout never applied in training mode: apply self.dropout to the hidden activations, "
                    "between the ReLU and linear2": expected,
                    "dropout in the wrong place: after linear2; drop the hidden activations, between the "
                    "ReLU and linear2 (the block drops the sublayer's output itself)": after,
                    "dropout in the wrong place: on the input; drop the hidden activations, between the "
                    "ReLU and linear2": before,
                }
                raise checking.diagnose(
                    y_train, variants, f"{case}, train mode", "output", expected_train
                )
        student.eval(), ref.eval()
        _compare_input_grad(student, ref, x, g, case)


def _block_variant(block, x, mask, norm_first, mistake=None):
    """The forward pass of ``block`` (a :class:`TransformerBlock` in eval mode), or one classic mistake."""
    n1, n2, ff = block.norm1, block.norm2, block.ff
    m = None if mistake == "mask ignored" else mask
    attn = lambda h: block.self_attn(h, h, h, attn_mask=m)[0]  # noqa: E731
    if mistake == "order swapped":
        norm_first = not norm_first
    if mistake == "one norm":
        n2 = n1
    if norm_first:
        if mistake == "residual of the normalized input":
            h = n1(x)
            x = h + attn(h)
            h = n2(x)
            return h + ff(h)
        x = (0 if mistake == "no residual (attention)" else x) + attn(n1(x))
        x = (0 if mistake == "no residual (feed-forward)" else x) + ff(n2(x))
        return n2(x) if mistake == "extra norm" else x
    if mistake == "norm on the branch":
        x = x + n1(attn(x))
        return x + n2(ff(x))
    x = n1((0 if mistake == "no residual (attention)" else x) + attn(x))
    return n2((0 if mistake == "no residual (feed-forward)" else x) + ff(x))


_BLOCK_MISTAKES = {
    False: {
        "pre-norm computed for norm_first=False: post-norm is norm(x + sublayer(x)), the norm after the sum": "order swapped",
        "norm in the wrong place: post-norm normalizes the SUM, norm(x + sublayer(x)), not the branch, "
        "x + norm(sublayer(x))": "norm on the branch",
    },
    True: {
        "post-norm computed for norm_first=True: pre-norm is x + sublayer(norm(x)), the norm on the sublayer's "
        "input only": "order swapped",
        "residual taken from the normalized input: add the sublayer output to x itself, not to norm(x)": "residual of the normalized input",
        "norm in the wrong place: pre-norm never normalizes the sum (x + sublayer(norm(x))); the model's "
        "final norm does that, once": "extra norm",
    },
}
_BLOCK_MISTAKES_BOTH = {
    "residual missing around the attention: the sublayer's output is added to x": "no residual (attention)",
    "residual missing around the feed-forward network: its output is added to x": "no residual (feed-forward)",
    "one layer norm for both sublayers: norm1 goes with attention, norm2 with the feed-forward": "one norm",
    "mask not applied: pass attn_mask on to self.self_attn": "mask ignored",
}
# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_BLOCK_EVAL_DROPOUT = (
    "dropout active in eval mode: call the modules self.dropout1 / self.dropout2 (they follow "
    "model.eval()), never F.dropout(..., training=True)"
)

_BLOCK_NAMES = "self_attn, ff (linear1, linear2), norm1, norm2 (weight, bias), dropout1, dropout2"


@checking.checker("check_block_module")
def check_block_module(cls) -> None:
    """Check a module class ``cls(d_model, n_heads, d_ff, dropout=0.0, norm_first=False)`` computing
    :class:`~transformer_lite.nn.blocks.TransformerBlock`, post-norm and pre-norm.

    Post-norm: ``x = norm1(x + dropout1(sa(x)))``, then ``norm2(x + dropout2(ff(x)))``; pre-norm:
    ``x = x + dropout1(sa(norm1(x)))``, then ``x + dropout2(ff(norm2(x)))``, where ``sa(h)`` is
    ``self_attn(h, h, h, attn_mask=attn_mask)[0]``. ``forward(x, attn_mask=None)`` returns ``y (B, L, D)``
    (or a tuple whose first element is ``y``). The package block's weights (with layer norms that are not
    the identity) are copied in; both run in eval mode in float64, and outputs and input gradients must
    agree, for both values of ``norm_first``, with and without a causal mask.

    Raises:
        AssertionError: naming the likely mistake (norm in the wrong place, post-norm and pre-norm swapped,
            a residual missing, one norm for both sublayers, dropout active in eval mode, the mask dropped),
            or that ``norm1`` / ``ff`` do not compute what they should (check them first).
    """
    g = checking.gen(23)
    for norm_first in (False, True):
        for B, L, D, H, masked in [(2, 5, 8, 2, False), (1, 1, 6, 3, False), (3, 4, 12, 4, True)]:
            d_ff = 2 * D + 1
            name = getattr(cls, "__name__", "your module")
            case = (
                f"{name}({D}, {H}, {d_ff}, dropout=0.2, norm_first={norm_first}) on x of shape "
                f"{(B, L, D)}" + (", causal bool mask" if masked else "")
            )
            student = checking.build(
                cls, (D, H, d_ff), {"dropout": 0.2, "norm_first": norm_first}, seed=D
            )
            with torch.random.fork_rng():
                torch.manual_seed(D)
                ref = TransformerBlock(D, H, d_ff, dropout=0.2, norm_first=norm_first).double()
            with torch.no_grad():
                for norm in (ref.norm1, ref.norm2):
                    norm.load_state_dict(_random_layer_norm(D, 1e-5, g).state_dict())
            checking.load_reference(student, ref, "check_block_module", _BLOCK_NAMES)
            student.eval(), ref.eval()
            x = torch.randn(B, L, D, generator=g, dtype=torch.float64) * 2.0 + 0.5
            mask = causal_mask(L, L) if masked else None
            with torch.no_grad():
                for part, fix in (
                    ("norm1", "MyLayerNorm"),
                    ("norm2", "MyLayerNorm"),
                    ("ff", "MyFeedForward"),
                ):
                    sub = getattr(student, part)
                    if not checking.close(checking.call(sub, x.clone()), getattr(ref, part)(x)):
                        raise AssertionError(
                            f"{case}: {part} does not compute what the package's {part} computes with the same "
                            f"weights; make {fix} pass its own checker first"
                        )
                y = checking.call(student, x.clone(), attn_mask=mask)
                y = y[0] if isinstance(y, tuple) else y
                checking.check_tensor(y, "output", (B, L, D), case)
                again = checking.call(student, x.clone(), attn_mask=mask)
                again = again[0] if isinstance(again, tuple) else again
                expected = ref(x, attn_mask=mask)[0]
                checking.check_eval_repeatable(y, again, expected, case, _BLOCK_EVAL_DROPOUT)
                if not checking.close(y, expected):
                    mistakes = {**_BLOCK_MISTAKES[norm_first], **_BLOCK_MISTAKES_BOTH}
                    if not masked:
                        mistakes.pop("mask not applied: pass attn_mask on to self.self_attn")
                    variants = {
                        m: _block_variant(ref, x, mask, norm_first, v) for m, v in mistakes.items()
                    }
                    raise checking.diagnose(y, variants, case, "output", expected)
            _compare_input_grad(student, ref, x, g, case, attn_mask=mask)

"""What every exercise checker shares: calling the learner's function, reporting, comparing.

``checker`` wraps a check so that a stub (``NotImplementedError``) prints "not implemented yet"
and success prints a confirmation; ``call`` turns a crash in the learner's code into a failed
check with a hint; ``diagnose`` names the classic mistake whose output matches the learner's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

ATOL = 1e-6


class NotImplementedYet(Exception):
    pass


def call(fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise NotImplementedYet from exc
    except (
        Exception
    ) as exc:  # a crash in the learner's code: report it as a failed check, with a hint
        hint = ""
        if "view size is not compatible" in str(exc):
            hint = " Hint: after transpose() a tensor is not contiguous; use reshape() (or .contiguous().view())."
        shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
        raise AssertionError(
            f"your function raised {type(exc).__name__} on inputs of shapes {shapes}: {exc}.{hint}"
        ) from exc


def checker(name: str):
    """Wrap a check so NotImplementedError prints 'not implemented yet' and success prints a confirmation."""

    def wrap(check):
        def run(*fns):
            try:
                check(*fns)
            except NotImplementedYet:
                print(f"{name}: not implemented yet (your code raises NotImplementedError)")
                return None
            print(f"{name}: all checks passed")
            return None

        run.__name__, run.__qualname__, run.__doc__ = name, name, check.__doc__
        return run

    return wrap


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def close(a, b) -> bool:
    return (
        isinstance(a, Tensor)
        and a.shape == b.shape
        and torch.allclose(a.double(), b.double(), atol=ATOL, rtol=1e-5)
    )


def diagnose(
    got: Tensor, variants: dict[str, Tensor], case: str, what: str, expected: Tensor
) -> AssertionError:
    for mistake, value in variants.items():
        if close(got, value):
            return AssertionError(f"wrong {what} for {case}. Likely mistake: {mistake}")
    err = (got.double() - expected.double()).abs().max().item()
    return AssertionError(
        f"wrong {what} for {case}: largest difference from the reference {err:.3g}, and it "
        "matches none of the usual mistakes; print both and compare"
    )


def check_tensor(value, name: str, shape: tuple, case: str) -> None:
    if not isinstance(value, Tensor):
        raise AssertionError(
            f"{name} for {case}: expected a torch.Tensor, received {type(value).__name__}"
        )
    if tuple(value.shape) != tuple(shape):
        raise AssertionError(
            f"{name} for {case}: expected shape {tuple(shape)}, received {tuple(value.shape)}"
        )


def check_cached_result(out, w, present, w_shape: tuple, out_shape: tuple, case: str) -> None:
    """A cached attention's ``(output, weights, (keys, values))``: the weights and the output of the
    expected shapes, and a pair as the third result."""
    check_tensor(w, "weights", w_shape, case)
    check_tensor(out, "output", out_shape, case)
    if not isinstance(present, tuple) or len(present) != 2:
        raise AssertionError(
            f"for {case}: expected (keys, values) as the third result, received "
            f"{type(present).__name__}"
        )


def load_reference(student, ref, owner: str, names: str):
    """Copy ``ref``'s weights into ``student`` (both float64); an AssertionError naming the expected submodules."""
    try:
        student.double().load_state_dict(ref.state_dict())
    except (RuntimeError, KeyError) as exc:
        raise AssertionError(
            f"{owner}: could not copy the package's weights into your module; it must have the submodules "
            f"{names}, as in the stub. load_state_dict said: {str(exc).strip()}"
        ) from exc


def input_grads(module, inputs, upstream, **kwargs):
    """Gradients of ``sum(output * upstream)`` with respect to each input (``None`` where none arrived)."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    if len({id(t) for t in inputs}) == 1:  # self-attention: one tensor used three times
        leaves = [leaves[0]] * len(inputs)
    out = call(module, *leaves, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    if not isinstance(out, Tensor) or not out.requires_grad:
        return out, [None] * len(inputs)
    out.backward(upstream)
    return out, [t.grad for t in leaves]


def check_gradient(got: Tensor | None, expected: Tensor, name: str, case: str) -> None:
    """The learner's gradient with respect to ``name`` must have arrived and agree with the package's
    (the output already does, so a difference here is a cut or damaged graph)."""
    if got is None or (not (got.abs() > 0).any() and (expected.abs() > 0).any()):
        raise AssertionError(
            f"no gradient reached the {name} for {case}: the output is right, but forward cuts the "
            "graph; do not use .detach(), .data, torch.no_grad() or numpy inside forward"
        )
    if not close(got, expected):
        err = (got - expected).abs().max().item()
        raise AssertionError(
            f"wrong gradient with respect to the {name} for {case} (largest difference {err:.3g}), "
            "although the output is right. Likely mistake: part of forward is cut from the graph "
            "(.detach(), .data, torch.no_grad()), or a tensor is modified in place after it was used"
        )


def check_eval_repeatable(
    got: Tensor, again: Tensor, expected: Tensor, case: str, likely: str, what: str = "outputs"
) -> None:
    """Two calls in eval mode (``got``, ``again``) must agree, unless the first is already right:
    otherwise ``likely`` names the mistake (dropout left on)."""
    if not torch.equal(got, again) and not close(got, expected):
        raise AssertionError(
            f"{case}: two calls in eval mode gave different {what}. Likely mistake: {likely}"
        )


def compare_input_grads(student, ref, inputs, names, upstream, case, **kwargs) -> None:
    """The gradients of ``sum(output * upstream)`` with respect to the first ``len(names)`` inputs must
    agree (the output was already checked)."""
    _, got = input_grads(student, inputs, upstream, **kwargs)
    _, expected = input_grads(ref, inputs, upstream, **kwargs)
    for name, gs, ge in zip(names, got, expected):
        check_gradient(gs, ge, name, case)


def build(cls, args: tuple, kwargs: dict, seed: int) -> nn.Module:
    """``cls(*args, **kwargs)`` with seeded initial weights, leaving the caller's random state alone."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = call(cls, *args, **kwargs)
    if not isinstance(module, nn.Module):
        raise AssertionError(
            f"{getattr(cls, '__name__', cls)}{args}: expected an nn.Module, received {type(module).__name__}"
        )
    return module


def fresh(kwargs: dict) -> dict:
    """A copy of the keyword arguments with every tensor (also inside a tuple) cloned."""
    copy = {}
    for key, value in kwargs.items():
        if isinstance(value, Tensor):
            value = value.clone()
        elif isinstance(value, tuple):  # a KeyValue stays a KeyValue
            items = [v.clone() if isinstance(v, Tensor) else v for v in value]
            value = type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        copy[key] = value
    return copy


def grads(module: nn.Module, x: Tensor, upstream: Tensor, **kwargs):
    """The gradients of ``sum(output * upstream)`` with respect to ``x`` and to each parameter."""
    module.zero_grad(set_to_none=True)
    leaf = x.detach().clone().requires_grad_(True)
    out = call(module, leaf, **fresh(kwargs))
    out = out[0] if isinstance(out, tuple) else out
    if isinstance(out, Tensor) and out.requires_grad:
        out.backward(upstream)
    return leaf.grad, {name: p.grad for name, p in module.named_parameters()}


def looks_inverted(w: Tensor, mask: Tensor) -> bool:
    """True if, in every row with both allowed and forbidden keys, the allowed keys get (almost) no weight."""
    mixed = mask.any(-1) & (~mask).any(-1)  # (L,)
    if not mixed.any():
        return False
    rows = w.double()[..., mixed, :]  # (..., n_mixed, S)
    allowed = mask[mixed].expand_as(rows)
    return (
        bool(torch.isfinite(rows).all())
        and bool((rows[allowed].abs() < 1e-9).all())
        and bool((rows[~allowed] > 0).any())
    )


def compare_grads(
    student,
    ref,
    x: Tensor,
    upstream: Tensor,
    case: str,
    ref_kwargs: dict | None = None,
    cache=None,
    **kwargs,
) -> None:
    """Input and parameter gradients of ``sum(output * upstream)`` must agree (the output already does).
    ``kwargs`` go to both calls, ``ref_kwargs`` to the reference's call only; a ``cache`` goes to the
    learner's module as the stub's ``past_kv`` and to the package's as ``cache``."""
    mine, theirs = ({}, {}) if cache is None else ({"past_kv": cache}, {"cache": cache})
    got_x, got_p = grads(student, x, upstream, **kwargs, **mine)
    expected_x, expected_p = grads(ref, x, upstream, **kwargs, **(ref_kwargs or {}), **theirs)
    pairs = [("input x", got_x, expected_x)]
    pairs += [(f"parameter {name}", got_p.get(name), g) for name, g in expected_p.items()]
    for name, got, expected in pairs:
        check_gradient(got, expected, name, case)

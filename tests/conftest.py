"""Helpers and set-up shared by the tests.

- ``close``, ``F64``, ``rand``: the float64 comparisons that most oracle tests make.
- ``gradcheck_module``: gradcheck of a block's output in its inputs and all its parameters.
- ``torch_encoder_layer``/``torch_decoder_layer``: torch's layers with non-trivial biases and norm
  parameters, the oracles of the blocks' ``from_torch`` (copying a parameter wrongly must show).
- The ``slow`` marker (set in the root ``conftest.py`` for notebooks, browser and student-edition
  tests, and with ``@pytest.mark.slow`` on package tests that train or load weights):
  ``pytest -m "not slow"`` is the fast tier (see the README).

Import the helpers with ``from tests.conftest import close, F64`` (the repository root is on
``sys.path`` because the root ``conftest.py`` lives there).
"""

from __future__ import annotations

import torch
from torch import nn

F64 = torch.float64


def close(actual, expected, atol=1e-12, rtol=1e-10, msg=None) -> None:
    """``torch.testing.assert_close`` with the tight float64 tolerances of the oracle tests."""
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg)


def rand(*shape, seed=0, dtype=F64) -> torch.Tensor:
    """A standard-normal tensor from its own seeded generator (the global seed is left alone)."""
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def gradcheck_module(module: nn.Module, inputs, kwargs=None, fast_mode=False) -> bool:
    """``torch.autograd.gradcheck`` of ``module(*inputs, **kwargs)[0]`` in the inputs and every parameter."""
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    n = len(inputs)

    def f(*args):
        return torch.func.functional_call(
            module, dict(zip(names, args[n:])), args[:n], kwargs or {}
        )[0]

    return torch.autograd.gradcheck(f, (*inputs, *params), fast_mode=fast_mode)


def _nontrivial(layer: nn.Module) -> nn.Module:
    """Norm gains around 1 and biases around 0, not exactly 1 and 0, so that copying them is tested."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "norm" in name and "weight" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn_like(p))
    return layer.eval()


def torch_encoder_layer(
    d_model, n_heads, d_ff, norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64
):
    """A seeded ``nn.TransformerEncoderLayer`` (batch-first, dropout 0.1, eval mode) with non-trivial parameters."""
    return _torch_layer(
        nn.TransformerEncoderLayer, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype
    )


def torch_decoder_layer(
    d_model, n_heads, d_ff, norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64
):
    """A seeded ``nn.TransformerDecoderLayer`` (batch-first, dropout 0.1, eval mode) with non-trivial parameters."""
    return _torch_layer(
        nn.TransformerDecoderLayer, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype
    )


def _torch_layer(kind, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype):
    torch.manual_seed(seed)
    layer = kind(
        d_model,
        n_heads,
        d_ff,
        dropout=0.1,
        activation=activation,
        layer_norm_eps=eps,
        batch_first=True,
        norm_first=norm_first,
        dtype=dtype,
    )
    return _nontrivial(layer)

"""Exercise checkers of chapter 6, ``notebooks/06_rnn_gradients.ipynb``:
an RNN step's Jacobian; the Elman RNN cell and the GRU cell as modules, with their step Jacobians.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from . import _checking as checking

__all__ = [
    "check_rnn_step_jacobian",
    "check_rnn_cell_module",
    "check_gru_cell_module",
]


# --------------------------------------------------------------------------- chapter 6: an RNN step's Jacobian


def _rnn_case(g, B, H):
    """A recurrent matrix and a tanh state with entries of both signs and magnitudes up to ~0.95."""
    w = torch.randn(H, H, generator=g, dtype=torch.float64) / math.sqrt(H)  # (H, H), not symmetric
    h = torch.tanh(1.8 * torch.randn(B, H, generator=g, dtype=torch.float64))  # (B, H), in (-1, 1)
    return w, h


@checking.checker("check_rnn_step_jacobian")
def check_rnn_step_jacobian(fn: Callable) -> None:
    """Check ``fn(weight_hh, h) -> J``: the step Jacobian of the Elman RNN ``h_t = tanh(a_t)``.

    ``weight_hh`` is ``(H, H)`` (the ``W_hh`` of ``a_t = W_ih x_t + W_hh h_{t-1} + b``) and ``h`` is
    ``(B, H)``, the *new* state ``h_t = tanh(a_t)``. Expected ``J`` of shape ``(B, H, H)`` with
    ``J[b, i, j] = d h_t[b, i] / d h_{t-1}[b, j] = (1 - h_t[b, i]**2) * W_hh[i, j]``, i.e.
    ``diag(1 - h_t**2) W_hh`` (:func:`transformer_lite.chapters.jacobians.rnn_step_jacobians`; Pascanu et al.,
    2013, Eq. 5). Cases include ``H = 1``, odd ``H`` and ``B = 1``; ``W_hh`` is never symmetric.

    Raises:
        AssertionError: naming the likely mistake (missing tanh derivative, transposed W_hh, ``1 - h``
            instead of ``1 - h**2``, ``tanh'`` applied to ``h`` as if it were the pre-activation, columns
            scaled instead of rows).
    """
    g = checking.gen(23)
    for B, H in [(3, 5), (1, 1), (2, 8), (1, 7)]:
        case = f"weight_hh of shape {(H, H)}, h of shape {(B, H)}"
        w, h = _rnn_case(g, B, H)
        out = checking.call(fn, w.clone(), h.clone())
        checking.check_tensor(out, "Jacobian", (B, H, H), case)
        ref = (1 - h**2)[:, :, None] * w  # (B, H, 1) * (H, H): row i scaled by tanh'(a_i)
        if checking.close(out, ref):
            continue
        variants = {
            "missing the tanh derivative: J = diag(1 - h_t**2) W_hh, not W_hh alone": w.expand(
                B, H, H
            ),
            "1 - h instead of 1 - h**2: tanh'(a) = 1 - tanh(a)**2": (1 - h)[:, :, None] * w,
            "transposed W_hh: row i of J is d h_t[i] / d h_{t-1}, which is row i of W_hh, scaled by "
            "1 - h_t[i]**2": (1 - h**2)[:, :, None] * w.T,
            "applied tanh' to h_t as if it were the pre-activation: h_t is already tanh(a_t), so "
            "tanh'(a_t) = 1 - h_t**2": (1 - torch.tanh(h) ** 2)[:, :, None] * w,
            "scaled the columns instead of the rows: J = diag(1 - h_t**2) W_hh multiplies row i by "
            "1 - h_t[i]**2": w * (1 - h**2)[:, None, :],
        }
        raise checking.diagnose(out, variants, case, "Jacobian", ref)


# --------------------------------------------------------------------------- chapter 6: the cells as modules


def _rnn_cell(p, x, h, mistake=None):
    """One step of the Elman RNN with the parameters ``p`` of an ``nn.RNNCell``, or one classic mistake."""
    w_hh = p["weight_hh"].T if mistake == "W_hh transposed" else p["weight_hh"]
    a = x @ p["weight_ih"].T + h @ w_hh.T  # (B, H)
    if mistake != "no bias":
        a = a + p["bias_ih"] + (0 if mistake == "one bias" else p["bias_hh"])
    if mistake == "no state":
        a = a - h @ w_hh.T
    return {"sigmoid": torch.sigmoid, "relu": torch.relu}.get(mistake, torch.tanh)(a)


def _gru_parts(p, x, h, mistake=None):
    """``(r, z, g, n, h_new)`` of one step of PyTorch's GRU with the parameters ``p`` of an
    ``nn.GRUCell`` (the notation of the chapter: ``g = W_hn h + b_hn``), or one classic mistake."""
    W_ir, W_iz, W_in = p["weight_ih"].chunk(3)  # (H, I) each, torch's order: reset, update, new
    W_hr, W_hz, W_hn = p["weight_hh"].chunk(3)  # (H, H) each
    b_ir, b_iz, b_in = p["bias_ih"].chunk(3)
    b_hr, b_hz, b_hn = p["bias_hh"].chunk(3)
    if mistake == "z and r swapped":
        W_ir, W_iz, W_hr, W_hz = W_iz, W_ir, W_hz, W_hr
        b_ir, b_iz, b_hr, b_hz = b_iz, b_ir, b_hz, b_hr
    gate, squash = torch.sigmoid, torch.tanh
    if mistake == "tanh and sigmoid swapped":
        gate, squash = torch.tanh, torch.sigmoid
    r = gate(x @ W_ir.T + b_ir + h @ W_hr.T + b_hr)  # (B, H), reset gate
    z = gate(x @ W_iz.T + b_iz + h @ W_hz.T + b_hz)  # (B, H), update gate
    g = h @ W_hn.T + b_hn  # (B, H)
    if mistake == "reset before W_hn":  # Cho et al. (2014), Eq. 8
        n = squash(x @ W_in.T + b_in + (r * h) @ W_hn.T + b_hn)
    elif mistake == "b_hn outside r":
        n = squash(x @ W_in.T + b_in + r * (h @ W_hn.T) + b_hn)
    else:
        n = squash(x @ W_in.T + b_in + r * g)  # (B, H), candidate
    if mistake == "z on the candidate":
        return r, z, g, n, z * n + (1 - z) * h
    return r, z, g, n, (1 - z) * n + z * h


def _diag(v):
    return torch.diag_embed(v)  # (B, H) -> (B, H, H)


def _gru_jacobian(p, x, h, mistake=None):
    """``dh_new / dh``, ``(B, H, H)``, from the chapter's formula (section on the GRU's Jacobian):
    ``diag(z) + diag(1 - z) dn/dh + diag(h - n) dz/dh``, or one classic mistake."""
    r, z, g, n, _ = _gru_parts(p, x, h)
    W_hr, W_hz, W_hn = p["weight_hh"].chunk(3)  # (H, H) each
    dz = _diag(z * (1 - z)) @ W_hz  # (B, H, H)
    inner = _diag(r) @ W_hn
    if mistake != "no reset term":
        inner = inner + _diag(g * r * (1 - r)) @ W_hr
    dn = inner if mistake == "no tanh derivative" else _diag(1 - n**2) @ inner
    copy = _diag(z)
    if mistake == "copy only":
        return copy
    J = copy + _diag(1 - z) @ dn
    if mistake == "no update-gate term":
        return J
    J = J + _diag((n - h) if mistake == "gate term sign" else (h - n)) @ dz
    return J.transpose(-1, -2) if mistake == "transposed" else J


def _rnn_jacobian(p, x, h, mistake=None):
    """``dh_new / dh = diag(1 - h_new**2) W_hh``, ``(B, H, H)``, or one classic mistake."""
    h_new = _rnn_cell(p, x, h)
    w = p["weight_hh"]
    if mistake == "no tanh derivative":
        return w.expand(len(h), -1, -1)
    d = {"old state": 1 - h**2, "1 - h": 1 - h_new}.get(mistake, 1 - h_new**2)
    J = d[:, :, None] * w  # (B, H, 1) * (H, H): row i scaled by tanh'(a_i)
    if mistake == "columns":
        J = w * d[:, None, :]
    return J.transpose(-1, -2) if mistake == "transposed" else J


def _autograd_jacobian(cell, x, h):
    """``d cell(x, h) / d h`` for each example, ``(B, H, H)``, by automatic differentiation."""
    full = torch.autograd.functional.jacobian(lambda s: cell(x, s), h)  # (B, H, B, H)
    return torch.stack([full[b, :, b] for b in range(len(h))])


_CELL_NAMES = "the parameters weight_ih, weight_hh, bias_ih and bias_hh"

_RNN_MISTAKES = {
    "sigmoid instead of tanh: the Elman RNN's update is h_new = tanh(W_ih x + b_ih + W_hh h + b_hh)": "sigmoid",
    "ReLU instead of tanh: the chapter's RNN uses tanh": "relu",
    "W_hh transposed: h @ self.weight_hh.T (torch stores weights as (out, in), like nn.Linear)": "W_hh transposed",
    "biases missing: add self.bias_ih and self.bias_hh": "no bias",
    "bias_hh missing: torch's RNN adds both biases (only their sum matters, but both are parameters)": "one bias",
    "the state is not used: the update reads h through W_hh, h_new = tanh(W_ih x + b_ih + W_hh h + b_hh)": "no state",
}
_RNN_JACOBIAN_MISTAKES = {
    "missing the tanh derivative: dh_new/dh = diag(1 - h_new**2) W_hh, not W_hh alone": "no tanh derivative",
    "Jacobian transposed: entry [b, i, j] is d h_new[i] / d h[j], so row i is row i of W_hh scaled "
    "by 1 - h_new[i]**2": "transposed",
    "tanh' taken at the old state: tanh'(a) = 1 - h_new**2, with h_new = tanh(a) the NEW state": "old state",
    "1 - h_new instead of 1 - h_new**2: tanh'(a) = 1 - tanh(a)**2": "1 - h",
    "scaled the columns instead of the rows: diag(1 - h_new**2) W_hh multiplies row i by "
    "1 - h_new[i]**2": "columns",
}
_GRU_MISTAKES = {
    "gate order swapped (z and r): torch stores the rows of weight_ih, weight_hh and the biases as "
    "reset, update, new (r, z, n)": "z and r swapped",
    "the reset gate applied before W_hn (the original form of Cho et al., 2014): torch computes "
    "n = tanh(W_in x + b_in + r * (W_hn h + b_hn))": "reset before W_hn",
    "h_new = z * n + (1 - z) * h: torch's update is (1 - z) * n + z * h, so that z near 1 copies "
    "the old state": "z on the candidate",
    "b_hn outside the reset gate: torch computes r * (W_hn h + b_hn), with b_hn inside": "b_hn outside r",
    "tanh and sigmoid swapped: the gates r and z use the sigmoid (values in (0, 1)), the candidate "
    "n uses tanh": "tanh and sigmoid swapped",
}
_GRU_JACOBIAN_MISTAKES = {
    "Jacobian transposed: entry [b, i, j] is d h_new[i] / d h[j]; each term is diag(...) times a "
    "weight matrix, rows scaled": "transposed",
    "missing the tanh derivative: dn/dh = diag(1 - n**2) [diag(r) W_hn + diag(g r (1 - r)) W_hr]": "no tanh derivative",
    "only the copy term diag(z): h also enters through n and z (the candidate and update-gate terms)": "copy only",
    "the update-gate term missing: h enters z too, adding diag(h - n) diag(z (1 - z)) W_hz": "no update-gate term",
    "the reset gate's term missing in dn/dh: r depends on h too, adding diag(g r (1 - r)) W_hr "
    "inside the tanh derivative": "no reset term",
    "sign of the update-gate term: d h_new / d z = h - n (h_new = (1 - z) n + z h), not n - h": "gate term sign",
}


def _check_cell(
    cls, name, torch_cls, forward_variant, forward_mistakes, jacobian, jacobian_mistakes, seed
):
    g = checking.gen(seed)
    owner = getattr(cls, "__name__", "your module")
    for B, I, H in [(3, 4, 5), (1, 1, 1), (2, 7, 3), (4, 3, 8)]:
        case = f"{owner}({I}, {H}) on x of shape {(B, I)}, h of shape {(B, H)}"
        with torch.random.fork_rng():
            torch.manual_seed(seed + H)
            student = checking.call(cls, I, H)
            ref = torch_cls(I, H, dtype=torch.float64)
        if not isinstance(student, nn.Module):
            raise AssertionError(
                f"{case}: expected an nn.Module, received {type(student).__name__}"
            )
        with torch.no_grad():  # biases of order 1, so that a missing or misplaced one shows
            for p in (ref.bias_ih, ref.bias_hh):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
        checking.load_reference(student, ref, name, _CELL_NAMES)
        params = {k: v.detach() for k, v in ref.named_parameters()}
        x = torch.randn(B, I, generator=g, dtype=torch.float64) * 1.5
        h = torch.tanh(1.5 * torch.randn(B, H, generator=g, dtype=torch.float64))  # in (-1, 1)
        with torch.no_grad():
            out = checking.call(student, x.clone(), h.clone())
            checking.check_tensor(out, "new state", (B, H), case)
            expected = ref(x, h)
            if not checking.close(out, expected):
                variants = {
                    m: forward_variant(params, x, h, v) for m, v in forward_mistakes.items()
                }
                raise checking.diagnose(out, variants, case, "new state", expected)
        upstream = torch.randn(B, H, generator=g, dtype=torch.float64)
        checking.compare_input_grads(student, ref, (x, h), ("input x", "state h"), upstream, case)
        _compare_parameter_grads(student, ref, (x, h), upstream, case)
        with torch.no_grad():
            J = checking.call(student.step_jacobian, x.clone(), h.clone())
        checking.check_tensor(J, "step_jacobian", (B, H, H), case)
        expected = _autograd_jacobian(ref, x, h)
        if not checking.close(J, expected):
            variants = {m: jacobian(params, x, h, v) for m, v in jacobian_mistakes.items()}
            raise checking.diagnose(J, variants, case, "step_jacobian (d h_new / d h)", expected)


def _compare_parameter_grads(student, ref, inputs, upstream, case) -> None:
    mine = dict(student.named_parameters())
    for module in (student, ref):
        module.zero_grad(set_to_none=True)
        out = module(*inputs)
        if out.requires_grad:
            out.backward(upstream)
    for key, p in ref.named_parameters():
        gs = mine[key].grad
        if gs is None or not checking.close(gs, p.grad):
            raise AssertionError(
                f"wrong gradient of {key} for {case}, although the new state is right. Likely "
                "mistake: part of forward is cut from the graph (.detach(), .data, torch.no_grad()), or "
                "a parameter is copied instead of used"
            )


@checking.checker("check_rnn_cell_module")
def check_rnn_cell_module(cls) -> None:
    """Check a module class ``cls(input_size, hidden_size)`` computing ``torch.nn.RNNCell`` (tanh), with a
    ``step_jacobian``.

    Parameters ``weight_ih (H, I)``, ``weight_hh (H, H)``, ``bias_ih (H,)``, ``bias_hh (H,)``, torch's
    names. ``forward(x (B, I), h (B, H))`` returns ``h_new = tanh(W_ih x + b_ih + W_hh h + b_hh)``, ``(B, H)``;
    ``step_jacobian(x, h)`` returns ``d h_new / d h``, ``(B, H, H)``, entry ``[b, i, j] = d h_new[b, i] /
    d h[b, j] = (1 - h_new[b, i]**2) W_hh[i, j]``. The weights of an ``nn.RNNCell`` (biases of order 1) are
    copied in; in float64 the new state, its gradients with respect to ``x``, ``h`` and every parameter, and
    the Jacobian (against automatic differentiation of ``nn.RNNCell``) must agree, with odd sizes, ``H = 1``
    and ``B = 1``.

    Raises:
        AssertionError: naming the likely mistake (sigmoid or ReLU for tanh, ``W_hh`` transposed, a bias
            missing; in the Jacobian: the tanh derivative missing or taken at the old state, ``1 - h``,
            transposed, columns scaled instead of rows).
    """
    _check_cell(
        cls, "check_rnn_cell_module", nn.RNNCell, _rnn_cell, _RNN_MISTAKES,
        _rnn_jacobian, _RNN_JACOBIAN_MISTAKES, seed=61,
    )  # fmt: skip


def _gru_cell(p, x, h, mistake=None):
    return _gru_parts(p, x, h, mistake)[-1]


@checking.checker("check_gru_cell_module")
def check_gru_cell_module(cls) -> None:
    """Check a module class ``cls(input_size, hidden_size)`` computing ``torch.nn.GRUCell``, with a
    ``step_jacobian``.

    Parameters ``weight_ih (3H, I)``, ``weight_hh (3H, H)``, ``bias_ih (3H,)``, ``bias_hh (3H,)``, rows in
    torch's order reset, update, new. ``forward(x (B, I), h (B, H))`` returns ``(1 - z) * n + z * h`` with
    ``r = sigma(W_ir x + b_ir + W_hr h + b_hr)``, ``z = sigma(W_iz x + b_iz + W_hz h + b_hz)``,
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``; ``step_jacobian(x, h)`` returns ``d h_new / d h``,
    ``(B, H, H)``: ``diag(z) + diag(1 - z) dn/dh + diag(h - n) dz/dh`` (the chapter's section on the GRU's
    Jacobian). The weights of an ``nn.GRUCell`` (biases of order 1) are copied in; in float64 the new
    state, its gradients with respect to ``x``, ``h`` and every parameter, and the Jacobian (against
    automatic differentiation of ``nn.GRUCell``) must agree, with odd sizes, ``H = 1`` and ``B = 1``.

    Raises:
        AssertionError: naming the likely mistake (gate order z/r swapped, the reset gate applied before
            ``W_hn`` as in Cho et al., ``z * n + (1 - z) * h``, ``b_hn`` outside ``r *``, tanh and sigmoid
            swapped; in the Jacobian: transposed, the tanh derivative missing, only the copy term, the
            update-gate or reset-gate term missing, the update-gate term's sign).
    """
    _check_cell(
        cls, "check_gru_cell_module", nn.GRUCell, _gru_cell, _GRU_MISTAKES,
        _gru_jacobian, _GRU_JACOBIAN_MISTAKES, seed=62,
    )  # fmt: skip

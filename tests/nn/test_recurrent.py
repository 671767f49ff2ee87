"""Tests for transformer_lite.nn.recurrent: the Elman RNN and the GRU.

Oracles:

1. one step computed by hand with ``math.tanh`` / a hand-written sigmoid, for
   a one-unit RNN and a one-unit GRU (the GRU case separates PyTorch's
   reset-after-the-matrix form from Cho et al.'s reset-before form);
2. ``torch.nn.RNN`` and ``torch.nn.GRU`` with copied weights, in float64:
   all hidden states and the last state, with and without ``h0``, both
   ``batch_first`` settings, tanh and relu, with and without biases, and over
   random shapes (hypothesis);
3. structural laws: the state at position t does not depend on later inputs,
   and the examples of a batch do not interact;
4. gradcheck (inputs, initial state and parameters) and every error path.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.conftest import F64, close
from transformer_lite.nn.recurrent import GRU, RNN

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None)


def rand(*shape, gen):
    return torch.randn(*shape, dtype=F64, generator=gen)


def run_torch(m, x, h0=None):
    """Run an nn.RNN / nn.GRU on batch-first x (B, L, I); return (all (B, L, H), last (B, H))."""
    inp = x if m.batch_first else x.transpose(0, 1)  # (B, L, I) -> (L, B, I) when batch_first=False
    out, h_n = m(inp, None if h0 is None else h0[None])  # torch's state is (num_layers, B, H)
    out = out if m.batch_first else out.transpose(0, 1)  # back to (B, L, H)
    return out, h_n[0]


# --------------------------------------------------------------------------- 1. by hand


def _sigmoid(a):
    return 1.0 / (1.0 + math.exp(-a))


def test_rnn_one_unit_two_steps_by_hand():
    rnn = RNN(1, 1).to(F64)
    with torch.no_grad():
        rnn.weight_ih.fill_(0.5)
        rnn.weight_hh.fill_(-1.5)
        rnn.bias_ih.fill_(0.1)
        rnn.bias_hh.fill_(0.2)
    x = torch.tensor([[[1.0], [-2.0]]], dtype=F64)  # (B=1, L=2, 1)
    h0 = torch.tensor([[0.3]], dtype=F64)
    h1 = math.tanh(0.5 * 1.0 + 0.1 - 1.5 * 0.3 + 0.2)
    h2 = math.tanh(0.5 * -2.0 + 0.1 - 1.5 * h1 + 0.2)

    all_hidden, last = rnn(x, h0)

    close(
        all_hidden,
        torch.tensor([[[h1], [h2]]], dtype=F64),
        msg="h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)",
    )
    close(last, torch.tensor([[h2]], dtype=F64))


def test_relu_rnn_one_step_by_hand():
    rnn = RNN(1, 2, nonlinearity="relu", bias=False).to(F64)
    with torch.no_grad():
        rnn.weight_ih.copy_(torch.tensor([[1.0], [-1.0]]))
        rnn.weight_hh.copy_(torch.tensor([[0.5, 0.0], [0.0, 0.5]]))
    _, last = rnn(torch.tensor([[[2.0]]], dtype=F64), torch.tensor([[1.0, 1.0]], dtype=F64))
    close(last, torch.tensor([[2.5, 0.0]], dtype=F64))  # relu(2 + 0.5) and relu(-2 + 0.5)


def test_gru_one_unit_one_step_by_hand():
    gru = GRU(1, 1).to(F64)
    w_ir, w_iz, w_in = 0.4, -0.3, 0.9
    w_hr, w_hz, w_hn = 0.7, 0.2, -1.1
    b_ih, b_hh = [0.05, -0.1, 0.2], [0.3, 0.15, -0.25]
    with torch.no_grad():
        gru.weight_ih.copy_(torch.tensor([[w_ir], [w_iz], [w_in]], dtype=F64))
        gru.weight_hh.copy_(torch.tensor([[w_hr], [w_hz], [w_hn]], dtype=F64))
        gru.bias_ih.copy_(torch.tensor(b_ih, dtype=F64))
        gru.bias_hh.copy_(torch.tensor(b_hh, dtype=F64))
    x, h = 1.5, -0.6
    r = _sigmoid(w_ir * x + b_ih[0] + w_hr * h + b_hh[0])
    z = _sigmoid(w_iz * x + b_ih[1] + w_hz * h + b_hh[1])
    # reset gate after the matrix and its bias
    n = math.tanh(w_in * x + b_ih[2] + r * (w_hn * h + b_hh[2]))
    expected = (1 - z) * n + z * h

    _, last = gru(torch.tensor([[[x]]], dtype=F64), torch.tensor([[h]], dtype=F64))

    close(
        last,
        torch.tensor([[expected]], dtype=F64),
        msg="GRU: does the reset gate multiply (W_hn h + b_hn), and h_t = (1 - z) n + z h_{t-1}?",
    )


# --------------------------------------------------------------------------- 2. torch oracles


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("with_h0", [True, False])
def test_rnn_from_torch_matches_nn_rnn(nonlinearity, bias, batch_first, with_h0):
    torch.manual_seed(1)
    m = nn.RNN(3, 5, nonlinearity=nonlinearity, bias=bias, batch_first=batch_first).to(F64)
    gen = torch.Generator().manual_seed(2)
    x = rand(4, 7, 3, gen=gen)
    h0 = rand(4, 5, gen=gen) if with_h0 else None

    ours = RNN.from_torch(m)
    all_hidden, last = ours(x, h0)
    ref_all, ref_last = run_torch(m, x, h0)

    assert all_hidden.shape == (4, 7, 5) and last.shape == (4, 5)
    close(all_hidden, ref_all)
    close(last, ref_last)
    close(last, all_hidden[:, -1])
    assert ours.weight_hh.dtype == F64 and (ours.bias_ih is None) == (not bias)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("with_h0", [True, False])
def test_gru_from_torch_matches_nn_gru(bias, batch_first, with_h0):
    torch.manual_seed(3)
    m = nn.GRU(4, 6, bias=bias, batch_first=batch_first).to(F64)
    gen = torch.Generator().manual_seed(4)
    x = rand(3, 9, 4, gen=gen)
    h0 = rand(3, 6, gen=gen) if with_h0 else None

    all_hidden, last = GRU.from_torch(m)(x, h0)
    ref_all, ref_last = run_torch(m, x, h0)

    close(all_hidden, ref_all)
    close(last, ref_last)


@SETTINGS
@given(
    B=st.integers(1, 3),
    L=st.integers(1, 6),
    I=st.integers(1, 4),
    H=st.integers(1, 5),
    gated=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_random_shapes_match_torch(B, L, I, H, gated, seed):
    torch.manual_seed(seed)
    m = (nn.GRU(I, H, batch_first=True) if gated else nn.RNN(I, H, batch_first=True)).to(F64)
    ours = GRU.from_torch(m) if gated else RNN.from_torch(m)
    gen = torch.Generator().manual_seed(seed)
    x, h0 = rand(B, L, I, gen=gen), rand(B, H, gen=gen)
    all_hidden, last = ours(x, h0)
    ref_all, ref_last = run_torch(m, x, h0)
    close(all_hidden, ref_all)
    close(last, ref_last)


def test_default_initialisation_uses_torch_bounds():
    torch.manual_seed(5)
    for model in (RNN(3, 16), GRU(3, 16)):
        bound = 1 / math.sqrt(16)
        for p in model.parameters():
            assert p.abs().max() <= bound
            assert p.abs().max() > bound / 2  # drawn over the whole interval, not left at zero
    assert GRU(3, 16).weight_ih.shape == (48, 3) and RNN(3, 16).weight_hh.shape == (16, 16)


# --------------------------------------------------------------------------- 3. structure


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_state_at_t_ignores_later_inputs(cls):
    torch.manual_seed(6)
    model = cls(3, 4).to(F64)
    gen = torch.Generator().manual_seed(6)
    x = rand(2, 8, 3, gen=gen)
    x_changed = x.clone()
    x_changed[:, 5:] += 10.0  # change positions 6..8 (1-based)
    a, _ = model(x)
    b, _ = model(x_changed)
    close(a[:, :5], b[:, :5], atol=0, rtol=0)
    assert (a[:, 5:] - b[:, 5:]).abs().min() > 0  # and the later states do change


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_batch_examples_are_independent(cls):
    torch.manual_seed(7)
    model = cls(2, 3).to(F64)
    gen = torch.Generator().manual_seed(7)
    x, h0 = rand(3, 5, 2, gen=gen), rand(3, 3, gen=gen)
    all_hidden, _ = model(x, h0)
    for b in range(3):
        single, _ = model(x[b : b + 1], h0[b : b + 1])
        close(all_hidden[b : b + 1], single)


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_empty_sequence_returns_h0(cls):
    model = cls(2, 3).to(F64)
    h0 = torch.ones(2, 3, dtype=F64)
    all_hidden, last = model(torch.zeros(2, 0, 2, dtype=F64), h0)
    assert all_hidden.shape == (2, 0, 3)
    close(last, h0, atol=0, rtol=0)


# --------------------------------------------------------------------------- 4. gradients and errors


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_gradcheck_inputs_state_and_parameters(cls):
    torch.manual_seed(8)
    model = cls(2, 3).to(F64)
    gen = torch.Generator().manual_seed(8)
    x = rand(2, 4, 2, gen=gen).requires_grad_()
    h0 = rand(2, 3, gen=gen).requires_grad_()
    params = tuple(model.parameters())

    def f(x, h0, *weights):
        out = torch.func.functional_call(
            model, dict(zip([n for n, _ in model.named_parameters()], weights)), (x, h0)
        )
        return out[0].sum(-1), out[1]

    assert torch.autograd.gradcheck(f, (x, h0, *[p.detach().requires_grad_() for p in params]))


@pytest.mark.parametrize(
    "cls, args, kwargs, message",
    [
        (RNN, (3, 0), {}, "hidden_size.*positive int.*0"),
        (GRU, (2.5, 3), {}, "input_size.*positive int.*2.5"),
        (RNN, (True, 3), {}, "input_size.*True"),
        (RNN, (3, 4), {"nonlinearity": "sigmoid"}, "nonlinearity 'tanh' or 'relu'.*'sigmoid'"),
    ],
)
def test_constructor_errors(cls, args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(*args, **kwargs)


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_forward_errors_name_expected_and_received_shapes(cls):
    model = cls(3, 4)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, len, 3\), received \(5, 3\)"):
        model(torch.zeros(5, 3))
    with pytest.raises(
        ValueError, match=r"expected x of shape \(B, len, 3\), received \(2, 5, 2\)"
    ):
        model(torch.zeros(2, 5, 2))
    with pytest.raises(ValueError, match="expected x of shape.*received list"):
        model([[1.0]])
    with pytest.raises(ValueError, match="floating x.*torch.int64"):
        model(torch.zeros(2, 5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"h0 of shape \(B, hidden_size\) = \(2, 4\).*\(1, 2, 4\)"):
        model(torch.zeros(2, 5, 3), torch.zeros(1, 2, 4))  # torch's (num_layers, B, H) layout
    with pytest.raises(ValueError, match="h0.*torch.float64"):
        model(torch.zeros(2, 5, 3), torch.zeros(2, 4, dtype=F64))

"""Tests for transformer_lite.chapters.jacobians: step Jacobians, their products, norms against lag.

Oracles:

1. the scalar case by hand: a one-unit tanh RNN with h_0 = 0, inputs 0 and
   biases 0 stays at h_t = 0, where tanh'(0) = 1, so dh_T/dh_0 = w**T exactly
   (w = 0.5, T = 10: 0.5**10 = 9.765625e-4; w = 2: 2**10 = 1024), checked
   through our formulas, through autograd on our RNN and on ``nn.RNN``;
2. ``torch.autograd.functional.jacobian`` of **torch's own** ``nn.RNN`` /
   ``nn.GRU`` (copied weights, float64), run from h_s over x_{s+1..t}: the
   unrolled map h_s -> h_t, for every pair s <= t;
3. the linear regime with an orthogonal recurrent matrix times r: every
   product has spectral norm exactly r**k (Frobenius sqrt(H) r**k), and with
   tanh saturated the norms can only be smaller;
4. for self-attention, the Jacobian of ``nn.MultiheadAttention``'s output
   (copied weights, causal mask) with respect to its input, by autograd;
5. every error path.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.conftest import F64, close
from transformer_lite import MultiHeadAttention
from transformer_lite.chapters.jacobians import (
    attention_gradient_norm_vs_lag,
    autograd_step_jacobians,
    gradient_norm_vs_lag,
    input_gradient_norm_vs_lag,
    jacobian_product,
    recurrent_weight,
    rnn_step_jacobians,
)
from transformer_lite.nn.recurrent import GRU, RNN


def torch_unrolled_jacobian(m, x, h_s, s, t):
    """d h_t / d h_s for each example, with torch's nn.RNN / nn.GRU m (batch_first) as the only model.

    Runs m over x[:, s:t] (inputs x_{s+1} .. x_t, 1-based) starting from h_s; returns (B, H, H).
    """
    B, H = h_s.shape

    def unrolled(h):  # (B, H) -> (B, H)
        if t == s:
            return h
        _, h_n = m(x[:, s:t], h[None])  # torch's state layout: (1, B, H)
        return h_n[0]

    # (B, H, B, H): examples do not interact
    full = torch.autograd.functional.jacobian(unrolled, h_s)
    blocks = torch.stack([full[b, :, b, :] for b in range(B)])  # (B, H, H)
    off_diagonal = full.sum() - blocks.sum()
    assert off_diagonal.abs() < 1e-14
    return blocks


def torch_states(m, x, h0):
    """h_0 .. h_L from torch's module: (B, L + 1, H)."""
    with torch.no_grad():
        out, _ = m(x, h0[None])
    return torch.cat([h0[:, None], out], dim=1)


def torch_run(m, seed, L, B=2):
    """Seeded inputs x (B, L, I) and start states h0 (B, H), both from one generator, and the states
    h_0 .. h_L that torch's module m computes from them (B, L + 1, H)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, m.input_size, dtype=F64, generator=gen)
    h0 = torch.randn(B, m.hidden_size, dtype=F64, generator=gen)
    return x, h0, torch_states(m, x, h0)


# --------------------------------------------------------------------------- 1. scalar case by hand


def scalar_rnn(w):
    """One-unit tanh RNN with W_hh = w, biases 0 (W_ih = 0.7 is irrelevant since x = 0)."""
    rnn = RNN(1, 1).to(F64)
    with torch.no_grad():
        rnn.weight_ih.fill_(0.7)
        rnn.weight_hh.fill_(w)
        rnn.bias_ih.zero_()
        rnn.bias_hh.zero_()
    return rnn


@pytest.mark.parametrize("w, expected", [(0.5, 9.765625e-4), (2.0, 1024.0)])
def test_scalar_case_is_w_to_the_T_at_h_zero(w, expected):
    # h_0 = 0, x = 0, b = 0  =>  a_t = w * 0 = 0, h_t = tanh(0) = 0 at every step, tanh'(0) = 1 - 0**2 = 1.
    # So each step Jacobian is exactly w and dh_10/dh_0 = w**10 (exact: powers of two in float64).
    T = 10
    rnn = scalar_rnn(w)
    x = torch.zeros(1, T, 1, dtype=F64)
    h0 = torch.zeros(1, 1, dtype=F64, requires_grad=True)

    jac = rnn_step_jacobians(rnn, x, h0.detach())
    assert torch.equal(jac, torch.full((1, T, 1, 1), w, dtype=F64))
    assert jacobian_product(jac, 0, T).item() == expected == w**T
    lags, norms = gradient_norm_vs_lag(jac)
    assert norms[0].tolist() == [abs(w) ** k for k in range(T + 1)]

    _, last = rnn(x, h0)
    (grad_ours,) = torch.autograd.grad(last.sum(), h0)
    assert grad_ours.item() == expected, "autograd through our RNN"

    m = nn.RNN(1, 1, batch_first=True).to(F64)
    with torch.no_grad():
        m.weight_ih_l0.fill_(0.7)
        m.weight_hh_l0.fill_(w)
        m.bias_ih_l0.zero_()
        m.bias_hh_l0.zero_()
    _, h_n = m(x, h0[None])
    (grad_torch,) = torch.autograd.grad(h_n.sum(), h0)
    assert grad_torch.item() == expected, "autograd through nn.RNN"
    assert math.isclose(0.5**10, 9.77e-4, rel_tol=1e-3)


def test_scalar_case_away_from_zero_shrinks_by_tanh_derivative():
    # With h_0 = 0.5 the state is not at 0, so each factor is w * (1 - h_t**2) < w.
    rnn = scalar_rnn(2.0)
    x = torch.zeros(1, 3, 1, dtype=F64)
    h0 = torch.tensor([[0.5]], dtype=F64)
    h1 = math.tanh(2 * 0.5)
    h2 = math.tanh(2 * h1)
    h3 = math.tanh(2 * h2)
    expected = 2 * (1 - h1**2) * 2 * (1 - h2**2) * 2 * (1 - h3**2)
    close(
        jacobian_product(rnn_step_jacobians(rnn, x, h0), 0, 3),
        torch.tensor([[[expected]]], dtype=F64),
    )


# --------------------------------------------------------------------------- 2. against autograd of torch's modules


def make_rnn_pair(nonlinearity, seed, I=3, H=4):
    torch.manual_seed(seed)
    m = nn.RNN(I, H, nonlinearity=nonlinearity, batch_first=True).to(F64)
    with torch.no_grad():
        # larger weights: tanh well outside its linear regime, relu units switching off
        m.weight_hh_l0.mul_(3.0)
    return m, RNN.from_torch(m)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_step_jacobians_match_autograd_of_nn_rnn_one_step(nonlinearity):
    m, ours = make_rnn_pair(nonlinearity, seed=10)
    x, h0, states = torch_run(m, seed=10, L=6)

    jac = rnn_step_jacobians(ours, x, h0)

    assert jac.shape == (2, 6, 4, 4) and not jac.requires_grad
    for k in range(1, 7):
        expected = torch_unrolled_jacobian(m, x, states[:, k - 1], k - 1, k)
        close(
            jac[:, k - 1],
            expected,
            msg=f"step {k}: is the derivative 1 - h_k**2 (tanh) / 1[h_k > 0] (relu)?",
        )
    if nonlinearity == "relu":
        assert (jac == 0).any() and (jac != 0).any()  # some units were off: the indicator mattered


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_jacobian_products_match_autograd_of_unrolled_nn_rnn(nonlinearity):
    m, ours = make_rnn_pair(nonlinearity, seed=11)
    x, h0, states = torch_run(m, seed=11, L=5)
    jac = rnn_step_jacobians(ours, x, h0)
    for s in range(6):
        for t in range(s, 6):
            expected = torch_unrolled_jacobian(m, x, states[:, s], s, t)
            close(
                jacobian_product(jac, s, t),
                expected,
                msg=f"dh_{t}/dh_{s}: later steps multiply from the left",
            )


def test_autograd_step_jacobians_equal_the_formula_for_rnn():
    _, ours = make_rnn_pair("tanh", seed=12)
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(3, 4, 3, dtype=F64, generator=gen)
    close(autograd_step_jacobians(ours, x), rnn_step_jacobians(ours, x))


def test_gru_step_jacobians_and_products_match_autograd_of_nn_gru():
    torch.manual_seed(13)
    m = nn.GRU(3, 4, batch_first=True).to(F64)
    ours = GRU.from_torch(m)
    x, h0, states = torch_run(m, seed=13, L=5)

    jac = autograd_step_jacobians(ours, x, h0)

    assert jac.shape == (2, 5, 4, 4)
    for s in range(6):
        for t in range(s, 6):
            close(jacobian_product(jac, s, t), torch_unrolled_jacobian(m, x, states[:, s], s, t))


@pytest.mark.parametrize("norm", ["spectral", "fro"])
def test_gradient_norm_vs_lag_matches_norms_of_autograd_jacobians(norm):
    m, ours = make_rnn_pair("tanh", seed=14)
    x, h0, states = torch_run(m, seed=14, L=6)
    ord_ = 2 if norm == "spectral" else "fro"
    for T in (6, 4, 0):
        lags, norms = gradient_norm_vs_lag(rnn_step_jacobians(ours, x, h0), T=T, norm=norm)
        assert lags.tolist() == list(range(T + 1)) and norms.shape == (2, T + 1)
        for k in range(T + 1):
            expected = torch.linalg.matrix_norm(
                torch_unrolled_jacobian(m, x, states[:, T - k], T - k, T), ord=ord_
            )
            close(norms[:, k], expected, msg=f"lag {k} = T - s with T = {T}")


# --------------------------------------------------------------------------- 3. spectral radius


@pytest.mark.parametrize("radius", [0.5, 1.0, 1.5])
def test_orthogonal_times_radius_gives_radius_to_the_lag_in_the_linear_regime(radius):
    H, L = 6, 12
    rnn = RNN(2, H).to(F64)
    with torch.no_grad():
        rnn.weight_hh.copy_(recurrent_weight(H, radius, seed=3))
        rnn.bias_ih.zero_()
        rnn.bias_hh.zero_()
    x = torch.zeros(1, L, 2, dtype=F64)  # h stays 0: every step Jacobian is exactly W_hh
    jac = rnn_step_jacobians(rnn, x)
    expected = torch.tensor([[radius**k for k in range(L + 1)]], dtype=F64)
    close(gradient_norm_vs_lag(jac)[1], expected)
    close(gradient_norm_vs_lag(jac, norm="fro")[1], math.sqrt(H) * expected)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(
    radius=st.sampled_from([0.8, 1.0, 1.3]),
    scale=st.sampled_from([0.5, 3.0]),
    seed=st.integers(0, 1000),
)
def test_tanh_saturation_only_shrinks_the_norms(radius, scale, seed):
    # ||diag(1 - h**2) W|| <= ||W|| = r, so by submultiplicativity every k-step product has norm <= r**k.
    H = 5
    torch.manual_seed(seed)
    rnn = RNN(3, H).to(F64)
    with torch.no_grad():
        rnn.weight_hh.copy_(recurrent_weight(H, radius, seed=seed))
    x = scale * torch.randn(2, 10, 3, dtype=F64, generator=torch.Generator().manual_seed(seed))
    _, norms = gradient_norm_vs_lag(rnn_step_jacobians(rnn, x))
    bound = torch.tensor([radius**k for k in range(11)], dtype=F64)
    assert (norms <= bound * (1 + 1e-12)).all()
    assert (norms[:, 1:] < bound[1:]).all()  # strictly: the states are not all 0


@pytest.mark.parametrize("radius", [0.0, 0.9, 2.5])
def test_recurrent_weight_has_the_requested_spectral_radius_and_norm(radius):
    w = recurrent_weight(7, radius, seed=1)
    assert w.shape == (7, 7) and w.dtype == F64
    close(torch.linalg.eigvals(w).abs(), torch.full((7,), radius, dtype=F64))
    close(torch.linalg.svdvals(w), torch.full((7,), radius, dtype=F64))
    assert torch.equal(w, recurrent_weight(7, radius, seed=1))  # seeded
    if radius > 0:
        assert not torch.equal(w, recurrent_weight(7, radius, seed=2))
    assert recurrent_weight(3, 1.0, dtype=torch.float32).dtype == torch.float32


# --------------------------------------------------------------------------- 4. self-attention


@pytest.mark.parametrize("norm", ["spectral", "fro"])
def test_attention_norms_match_autograd_of_nn_multihead_attention(norm):
    torch.manual_seed(20)
    L, D = 6, 8
    m = nn.MultiheadAttention(D, 2, batch_first=True).to(F64)
    ours = MultiHeadAttention.from_torch(m)
    x = torch.randn(2, L, D, dtype=F64, generator=torch.Generator().manual_seed(20))
    blocked = ~torch.tril(torch.ones(L, L, dtype=torch.bool))  # torch's polarity: True = blocked
    t = 3

    lags, norms = attention_gradient_norm_vs_lag(
        lambda z: ours(z, z, z, is_causal=True), x, t=t, norm=norm
    )

    assert lags.tolist() == [3, 2, 1, 0, -1, -2] and norms.shape == (2, L)
    ord_ = 2 if norm == "spectral" else "fro"
    for b in range(2):

        def torch_y_t(xb):  # (L, D) -> (D,)
            return m(xb[None], xb[None], xb[None], attn_mask=blocked, need_weights=False)[0][0, t]

        jac = torch.autograd.functional.jacobian(torch_y_t, x[b])  # (D, L, D)
        close(norms[b], torch.linalg.matrix_norm(jac.permute(1, 0, 2), ord=ord_))
    assert (norms[:, t + 1 :] == 0).all(), "future inputs must not reach y_t under a causal mask"
    assert (norms[:, : t + 1] > 0).all(), "every past input reaches y_t directly (path length one)"


def test_attention_norms_without_mask_reach_the_future_and_default_t_is_last():
    torch.manual_seed(21)
    mha = MultiHeadAttention(4, 1).to(F64)
    x = torch.randn(1, 5, 4, dtype=F64, generator=torch.Generator().manual_seed(21))
    lags, norms = attention_gradient_norm_vs_lag(lambda z: mha(z, z, z)[0], x, t=1)
    assert (norms > 0).all() and lags.tolist() == [1, 0, -1, -2, -3]
    # tuple output: first element used
    lags, _ = attention_gradient_norm_vs_lag(lambda z: mha(z, z, z), x)
    assert lags.tolist() == [4, 3, 2, 1, 0]


# --------------------------------------------------------------------------- 5. errors


def test_errors():
    rnn, gru = RNN(2, 3), GRU(2, 3)
    x = torch.zeros(1, 4, 2)
    jac = rnn_step_jacobians(rnn, x)
    with pytest.raises(ValueError, match="expected a transformer_lite RNN, received GRU"):
        rnn_step_jacobians(gru, x)
    with pytest.raises(ValueError, match="expected a transformer_lite RNN or GRU, received RNN"):
        autograd_step_jacobians(nn.RNN(2, 3), x)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, len, 2\), received \(4, 2\)"):
        rnn_step_jacobians(rnn, x[0])
    with pytest.raises(
        ValueError, match=r"expected jacobians of shape \(B, L, H, H\), received \(4, 3, 3\)"
    ):
        jacobian_product(jac[0], 0, 1)
    with pytest.raises(
        ValueError, match=r"expected jacobians of shape \(B, L, H, H\), received \(1, 4, 3, 2\)"
    ):
        gradient_norm_vs_lag(jac[..., :2])
    with pytest.raises(ValueError, match="0 <= s <= t <= L = 4, received s=3, t=2"):
        jacobian_product(jac, 3, 2)
    with pytest.raises(ValueError, match="0 <= s <= t <= L = 4, received s=0, t=5"):
        jacobian_product(jac, 0, 5)
    with pytest.raises(ValueError, match="0 <= T <= L = 4, received T=5"):
        gradient_norm_vs_lag(jac, T=5)
    with pytest.raises(ValueError, match="norm 'spectral' or 'fro', received 'nuc'"):
        gradient_norm_vs_lag(jac, norm="nuc")
    with pytest.raises(ValueError, match="hidden_size to be a positive int, received 0"):
        recurrent_weight(0, 1.0)
    with pytest.raises(ValueError, match="finite spectral_radius >= 0, received -1"):
        recurrent_weight(3, -1.0)
    with pytest.raises(ValueError, match="finite spectral_radius >= 0, received inf"):
        recurrent_weight(3, float("inf"))
    layer = lambda z: z  # noqa: E731
    with pytest.raises(ValueError, match=r"expected x of shape \(B, L, D\), received \(4, 2\)"):
        attention_gradient_norm_vs_lag(layer, x[0])
    with pytest.raises(ValueError, match="0 <= t < L = 4, received t=4"):
        attention_gradient_norm_vs_lag(layer, x, t=4)
    with pytest.raises(ValueError, match="norm 'spectral' or 'fro', received 'max'"):
        attention_gradient_norm_vs_lag(layer, x, norm="max")


def test_empty_sequence_gives_only_lag_zero():
    rnn, gru = RNN(2, 3), GRU(2, 3)
    x = torch.zeros(2, 0, 2)
    assert rnn_step_jacobians(rnn, x).shape == (2, 0, 3, 3)
    jac = autograd_step_jacobians(gru, x)
    assert jac.shape == (2, 0, 3, 3)
    lags, norms = gradient_norm_vs_lag(jac)
    assert lags.tolist() == [0] and torch.allclose(norms, torch.ones(2, 1))


# --------------------------------------------------------------------------- 6. input to output, any model
# Oracles: autograd of torch's own nn.RNN / nn.GRU (copied weights, float64) with respect to each input x_s;
# the chain rule written out for the Elman RNN, dh_T/dh_{s+1} diag(1 - h_{s+1}**2) W_ih; the identity layer.


@pytest.mark.parametrize("kind", ["rnn", "gru"])
@pytest.mark.parametrize("norm", ["spectral", "fro"])
def test_input_gradient_norms_match_autograd_of_torch_recurrent_layers(kind, norm):
    torch.manual_seed(30)
    B, L, D, H = 2, 6, 3, 4
    m = (nn.RNN if kind == "rnn" else nn.GRU)(D, H, batch_first=True).to(F64)
    ours = (RNN if kind == "rnn" else GRU).from_torch(m)
    x = torch.randn(B, L, D, dtype=F64, generator=torch.Generator().manual_seed(30))

    lags, norms = input_gradient_norm_vs_lag(ours, x, norm=norm)

    def last_state(xs):  # (B, L, D) -> (B, H): torch's h_L
        return m(xs)[1][0]

    full = torch.autograd.functional.jacobian(last_state, x)  # (B, H, B, L, D)
    ord_ = 2 if norm == "spectral" else "fro"
    assert lags.tolist() == list(range(L)) and norms.shape == (B, L)
    for b in range(B):
        for k in range(L):
            expected = torch.linalg.matrix_norm(full[b, :, b, L - 1 - k], ord=ord_)
            close(norms[b, k], expected)


def test_input_gradient_norms_follow_the_chain_rule_of_the_elman_rnn():
    torch.manual_seed(31)
    L, D, H = 7, 3, 5
    rnn = RNN(D, H).to(F64)
    x = torch.randn(1, L, D, dtype=F64, generator=torch.Generator().manual_seed(31))
    h, _ = rnn(x)  # (1, L, H): h[:, s] = h_{s+1}
    jac = rnn_step_jacobians(rnn, x)
    t = 4  # output h_5, reached by x_0 .. x_4
    _, norms = input_gradient_norm_vs_lag(rnn, x, t=t)
    assert norms.shape == (1, t + 1)
    for k in range(t + 1):
        s = t - k
        input_jacobian = torch.diag(1 - h[0, s] ** 2) @ rnn.weight_ih  # dh_{s+1}/dx_s, (H, D)
        chain = jacobian_product(jac, s + 1, t + 1)[0] @ input_jacobian  # (H, D)
        close(norms[0, k], torch.linalg.matrix_norm(chain, ord=2))


def test_input_gradient_norms_of_the_identity_are_one_at_lag_zero_only():
    x = torch.randn(2, 5, 3, dtype=F64)
    lags, norms = input_gradient_norm_vs_lag(torch.nn.Identity(), x)
    assert lags.tolist() == [0, 1, 2, 3, 4]
    assert torch.equal(norms, torch.tensor([[1.0, 0, 0, 0, 0]] * 2, dtype=F64))
    with pytest.raises(ValueError, match="0 <= t < L = 5, received t=5"):
        input_gradient_norm_vs_lag(torch.nn.Identity(), x, t=5)
    with pytest.raises(ValueError, match="norm 'spectral' or 'fro', received 'max'"):
        input_gradient_norm_vs_lag(torch.nn.Identity(), x, norm="max")

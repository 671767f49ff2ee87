"""Tests for LayerNorm, PositionwiseFeedForward and LearnedPositionalEmbedding.

Oracles: a LayerNorm of a literal vector worked out by hand (biased variance,
eps inside the square root); ``torch.nn.LayerNorm`` in float64 with copied
random weight/bias; a manual ``F.linear`` composition with torch's own
``F.relu`` / ``F.gelu`` for the feed-forward network; slicing of the weight
table for the positional embedding. Plus gradcheck and the error paths.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import F64, close, rand
from transformer_lite import LayerNorm, LearnedPositionalEmbedding, PositionwiseFeedForward, RMSNorm

# --------------------------------------------------------------------------- LayerNorm


def test_layernorm_literal_vector_by_hand():
    x = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=F64)
    mean = 3.0
    var = ((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (6 - 3) ** 2) / 4  # = 3.5, biased: divide by D = 4
    eps = 1e-5
    expected = torch.tensor(
        [(v - mean) / math.sqrt(var + eps) for v in (1.0, 2.0, 3.0, 6.0)], dtype=F64
    )
    ln = LayerNorm(4, eps=eps).to(F64)
    close(
        ln(x),
        expected,
        msg="LayerNorm: biased variance (divide by D) and eps inside the square root?",
    )


def test_layernorm_literal_vector_with_affine_parameters():
    x = torch.tensor([[2.0, 4.0]], dtype=F64)  # mean 3, biased var 1
    ln = LayerNorm(2, eps=0.0).to(F64)
    with torch.no_grad():
        ln.weight.copy_(torch.tensor([2.0, 3.0]))
        ln.bias.copy_(torch.tensor([0.5, -1.0]))
    # x_hat = [-1, 1]; y = x_hat * weight + bias
    close(ln(x), torch.tensor([[-2.0 + 0.5, 3.0 - 1.0]], dtype=F64))


@pytest.mark.parametrize("eps", [1e-5, 1e-12, 0.1])
@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7)])
def test_layernorm_matches_torch(eps, shape):
    torch.manual_seed(1)
    theirs = nn.LayerNorm(7, eps=eps, dtype=F64)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(7, dtype=F64))
        theirs.bias.copy_(torch.randn(7, dtype=F64))
    ours = LayerNorm.from_torch(theirs)
    assert ours.eps == eps and ours.weight.dtype == F64
    x = rand(*shape, seed=2) * 3 + 1
    close(ours(x), theirs(x))


def test_layernorm_small_eps_on_nearly_constant_input_matches_torch():
    x = torch.full((2, 5), 3.0, dtype=F64) + rand(2, 5, seed=4) * 1e-4
    theirs = nn.LayerNorm(5, eps=1e-12, dtype=F64)
    close(LayerNorm.from_torch(theirs)(x), theirs(x), atol=1e-8, rtol=1e-8)


def test_layernorm_statistics_are_per_position():
    # Changing one position must leave the others untouched (no statistics shared across positions/examples).
    ln = LayerNorm(5).to(F64)
    x = rand(2, 4, 5, seed=5)
    y = x.clone()
    y[1, 2] = rand(5, seed=50)  # (a scaled and shifted copy would normalize to the same vector)
    a, b = ln(x), ln(y)
    changed = torch.zeros(2, 4, dtype=torch.bool)
    changed[1, 2] = True
    assert torch.equal(a[~changed], b[~changed])
    assert not torch.allclose(a[1, 2], b[1, 2])


def test_layernorm_gradcheck():
    torch.manual_seed(6)
    ln = LayerNorm(5, eps=1e-5).to(F64)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(5, dtype=F64))
        ln.bias.copy_(torch.randn(5, dtype=F64))
    x = rand(3, 5, seed=6).requires_grad_()
    w = ln.weight.detach().clone().requires_grad_()
    b = ln.bias.detach().clone().requires_grad_()

    def f(x, w, b):
        return torch.func.functional_call(ln, {"weight": w, "bias": b}, (x,))

    assert torch.autograd.gradcheck(f, (x, w, b))


def test_layernorm_rejects_wrong_last_dim():
    ln = LayerNorm(8)
    with pytest.raises(
        ValueError, match=r"expected input of shape \(\.\.\., 8\), received \(2, 3, 7\)"
    ):
        ln(torch.zeros(2, 3, 7))
    with pytest.raises(ValueError, match=r"received \(\)"):
        ln(torch.tensor(1.0))


@pytest.mark.parametrize(
    "args,pattern",
    [((0,), r"received d_model=0, eps=1e-05"), ((4, -1.0), r"received d_model=4, eps=-1.0")],
)
def test_layernorm_constructor_errors(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        LayerNorm(*args)


# --------------------------------------------------------------------------- PositionwiseFeedForward


def _ff_with_random_params(d_model, d_ff, activation, seed=10):
    torch.manual_seed(seed)
    ff = PositionwiseFeedForward(d_model, d_ff, activation=activation).to(F64)
    with torch.no_grad():
        for p in ff.parameters():
            p.copy_(torch.randn_like(p))
    return ff


@pytest.mark.parametrize("activation,torch_act", [("relu", F.relu), ("gelu", F.gelu)])
@pytest.mark.parametrize("shape", [(6,), (4, 6), (2, 3, 6)])
def test_feedforward_matches_manual_linear_composition(activation, torch_act, shape):
    ff = _ff_with_random_params(6, 10, activation)
    x = rand(*shape, seed=11)
    h = torch_act(F.linear(x, ff.linear1.weight, ff.linear1.bias))
    expected = F.linear(h, ff.linear2.weight, ff.linear2.bias)
    close(ff(x), expected)


def test_feedforward_gelu_is_exact_erf_form_not_tanh():
    ff = _ff_with_random_params(6, 10, "gelu")
    x = rand(4, 6, seed=12) * 3
    tanh_form = F.linear(
        F.gelu(F.linear(x, ff.linear1.weight, ff.linear1.bias), approximate="tanh"),
        ff.linear2.weight,
        ff.linear2.bias,
    )
    assert not torch.allclose(ff(x), tanh_form, atol=1e-6)


def test_feedforward_acts_on_each_position_separately():
    ff = _ff_with_random_params(6, 10, "relu")
    x = rand(3, 6, seed=13)
    rows = torch.stack([ff(x[i]) for i in range(3)])
    close(ff(x), rows)


def test_feedforward_gradcheck_gelu():
    ff = _ff_with_random_params(3, 5, "gelu", seed=14)
    names = [n for n, _ in ff.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in ff.parameters())
    x = rand(2, 3, seed=14).requires_grad_()

    def f(x, *ps):
        return torch.func.functional_call(ff, dict(zip(names, ps)), (x,))

    assert torch.autograd.gradcheck(f, (x, *params))


def test_feedforward_dropout_only_in_train_mode():
    torch.manual_seed(15)
    ff = PositionwiseFeedForward(6, 32, dropout=0.5).to(F64)
    x = rand(4, 6, seed=15)
    ff.eval()
    assert torch.equal(ff(x), ff(x))
    ff.train()
    assert not torch.allclose(ff(x), ff.eval()(x))


def test_feedforward_rejects_bad_activation():
    with pytest.raises(ValueError, match=r"expected activation 'relu' or 'gelu', received 'swish'"):
        PositionwiseFeedForward(4, 8, activation="swish")


def test_feedforward_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match=r"expected positive int d_model and d_ff, received 4, 0"):
        PositionwiseFeedForward(4, 0)


def test_feedforward_rejects_wrong_dim():
    ff = PositionwiseFeedForward(4, 8)
    with pytest.raises(
        ValueError, match=r"expected input of shape \(\.\.\., 4\), received \(2, 5\)"
    ):
        ff(torch.zeros(2, 5))


# --------------------------------------------------------------------------- LearnedPositionalEmbedding


def test_positional_embedding_adds_rows_offset_to_offset_plus_len():
    torch.manual_seed(20)
    pe = LearnedPositionalEmbedding(4, 10)
    x = rand(2, 3, 4, seed=20, dtype=torch.float32)  # distinct rows: a wrong offset must show
    table = pe.weight.detach()
    assert torch.equal(pe(x), x + table[0:3])
    assert torch.equal(pe(x[:, :2], offset=7), x[:, :2] + table[7:9])
    assert torch.equal(pe(torch.zeros(1, 10, 4)), table[None])


def test_positional_embedding_rejects_positions_past_max_len():
    pe = LearnedPositionalEmbedding(4, 10)
    with pytest.raises(
        ValueError, match=r"positions 0\.\.10 requested, but max_len=10 allows positions 0\.\.9"
    ):
        pe(torch.zeros(1, 11, 4))
    with pytest.raises(ValueError, match=r"positions 8\.\.11 requested, but max_len=10"):
        pe(torch.zeros(1, 4, 4), offset=8)


@pytest.mark.parametrize(
    "shape,offset,pattern",
    [
        ((2, 0, 4), 0, r"expected x with at least 1 position\(s\), received \(2, 0, 4\)"),
        ((2, 3, 5), 0, r"expected x of shape \(B, len, 4\), received \(2, 3, 5\)"),
        ((3, 4), 0, r"received \(3, 4\)"),
        ((1, 2, 4), -1, r"expected an int offset >= 0, received -1"),
    ],
)
def test_positional_embedding_rejects_bad_arguments(shape, offset, pattern):
    with pytest.raises(ValueError, match=pattern):
        LearnedPositionalEmbedding(4, 10)(torch.zeros(shape), offset=offset)


def test_positional_embedding_constructor_errors():
    with pytest.raises(
        ValueError, match=r"expected positive int d_model and max_len, received 4, 0"
    ):
        LearnedPositionalEmbedding(4, 0)


def test_positional_embedding_takes_d_model_first():
    """(d_model, max_len), as every module of the package; max_len != d_model, so the old order
    (max_len, d_model) would give the transposed table."""
    torch.manual_seed(0)
    pe = LearnedPositionalEmbedding(4, 10)
    assert pe.weight.shape == (10, 4) and (pe.d_model, pe.max_len) == (4, 10)
    torch.manual_seed(0)
    assert torch.equal(pe.weight, torch.randn(10, 4) * 0.02)  # GPT-2's N(0, 0.02^2), one draw
    assert pe(torch.zeros(2, 10, 4)).shape == (2, 10, 4)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "ours,theirs",
    [(LayerNorm, nn.LayerNorm), (RMSNorm, nn.RMSNorm)],
    ids=["layernorm", "rmsnorm"],
)
def test_norms_compute_half_precision_in_float32_and_return_the_input_dtype(ours, theirs, dtype):
    # The notation page's dtype rule: float32 parameters, half-precision input -> the input's
    # dtype out, statistics in float32. Oracle: torch's norm in float64 on the same (rounded)
    # input, rounded once to `dtype` at the end; torch's own module gives the same dtype.
    g = torch.Generator().manual_seed(0)
    x = (3 + 40 * torch.randn(4, 7, 96, generator=g)).to(dtype)  # large mean: cancellation
    norm, ref = ours(96), theirs(96, eps=1e-5)
    with torch.no_grad():
        norm.weight.normal_(generator=g)
        ref.weight.copy_(norm.weight)
        if isinstance(norm, LayerNorm):
            norm.bias.normal_(generator=g)
            ref.bias.copy_(norm.bias)
    y = norm(x)
    assert y.dtype == dtype == ref(x).dtype
    expected = ref.double()(x.double()).to(dtype)
    # at most one unit in the last place of `dtype` apart (the float32 path rounds twice)
    ulp = torch.finfo(dtype).eps * expected.abs().clamp(min=1)
    assert ((y.double() - expected.double()).abs() <= ulp).all()

"""Tests for transformer_lite.interop: every nn module's from_torch, and the one type check.

Oracles: the torch module whose weights are copied (bit-identical float64 copies, the same
function on the same inputs: the modules' own tests compare their forward with torch's through
``from_torch``); the messages of the type checks; the random draws of the throw-away
constructions, compared with the draws of the same constructions made by hand (the cells of the
chapters after a ``from_torch`` draw from the same global generator).

The tests below the first section moved here from ``tests/nn/*`` (issue 21: interop in one module).
"""

import pytest
import torch
from torch import nn

from tests.conftest import (
    F64,
    assert_from_torch_rejects_wrong_type,
    close,
    rand,
    torch_decoder_layer,
    torch_encoder_layer,
)
from transformer_lite import (
    GRU,
    RNN,
    DecoderBlock,
    LayerNorm,
    MultiHeadAttention,
    RMSNorm,
    TransformerBlock,
    interop,
)

D, H, D_FF = 8, 2, 16


def _torch_mha(d_model=8, n_heads=2, bias=True, seed=0):
    torch.manual_seed(seed)
    m = nn.MultiheadAttention(d_model, n_heads, batch_first=True, bias=bias, dtype=F64).eval()
    with torch.no_grad():  # the default init sets biases to 0: randomize them so copying is tested
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return m


def encoder_layer(norm_first, activation, seed=0, eps=1e-5):
    return torch_encoder_layer(D, H, D_FF, norm_first, activation, seed=seed, eps=eps)


def decoder_layer(norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64):
    return torch_decoder_layer(D, H, D_FF, norm_first, activation, seed=seed, eps=eps, dtype=dtype)


# Both blocks read a torch layer through one helper; each error is checked for both.
TWINS = {
    "encoder": (TransformerBlock, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer),
    "decoder": (DecoderBlock, nn.TransformerDecoderLayer, nn.TransformerEncoderLayer),
}


# --------------------------------------------------------------------------- expect, delegation, RNG


def test_expect_names_the_owner_the_torch_class_and_what_was_received():
    interop.expect(LayerNorm, nn.LayerNorm(4), nn.LayerNorm)  # no error
    with pytest.raises(ValueError, match=r"^GRU.from_torch: expected nn.GRU, received Linear$"):
        interop.expect(GRU, nn.Linear(2, 2), nn.GRU)
    wide = nn.LayerNorm((3, 4))
    with pytest.raises(
        ValueError,
        match=r"^RMSNorm.from_torch: expected nn.LayerNorm over one dimension \(d_model,\), "
        r"received LayerNorm\(\(3, 4\)",
    ):
        interop.expect(RMSNorm, wide, nn.LayerNorm, " over one dimension (d_model,)", ok=False)


@pytest.mark.parametrize(
    "ours, make",
    [
        (MultiHeadAttention, lambda: nn.MultiheadAttention(8, 2, batch_first=True)),
        (LayerNorm, lambda: nn.LayerNorm(8)),
        (RMSNorm, lambda: nn.RMSNorm(8)),
        (RNN, lambda: nn.RNN(3, 4)),
        (GRU, lambda: nn.GRU(3, 4)),
        (TransformerBlock, lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)),
        (DecoderBlock, lambda: nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_the_classmethod_builds_its_own_class_even_a_subclass(ours, make):
    """``X.from_torch`` delegates to interop with its class: a subclass (a reader's variant of
    ours) gets an instance of itself, as when the body was a classmethod."""
    sub = type(f"My{ours.__name__}", (ours,), {})
    assert type(ours.from_torch(make())) is ours
    assert type(sub.from_torch(make())) is sub


def _generator_after(*builds):
    """torch's global generator after seeding 0 and calling each build in turn."""
    torch.manual_seed(0)
    for build in builds:
        build()
    return torch.get_rng_state()


def test_block_from_torch_draws_as_the_two_constructions_it_makes():
    """The block is built whole (random init), then its attention is built again by
    MultiHeadAttention.from_torch and replaced: the global generator advances by both builds,
    which the chapters' later cells depend on. Oracle: the same two builds by hand."""
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    by_hand = _generator_after(
        lambda: TransformerBlock(8, 2, 16, dropout=0.1),
        lambda: MultiHeadAttention(8, 2, dropout=0.1),
    )
    assert torch.equal(_generator_after(lambda: TransformerBlock.from_torch(layer)), by_hand)


def test_decoder_block_from_torch_draws_as_the_three_constructions_it_makes():
    layer = nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
    by_hand = _generator_after(
        lambda: DecoderBlock(8, 2, 16, dropout=0.1),
        lambda: MultiHeadAttention(8, 2, dropout=0.1),  # self_attn
        lambda: MultiHeadAttention(8, 2, dropout=0.1),  # cross_attn (torch's multihead_attn)
    )
    assert torch.equal(_generator_after(lambda: DecoderBlock.from_torch(layer)), by_hand)


# --------------------------------------------------------------------------- from tests/nn/test_attention.py


def test_mha_from_torch_copies_dtype():
    theirs = _torch_mha()
    ours = MultiHeadAttention.from_torch(theirs)
    assert all(p.dtype == F64 for p in ours.parameters())
    assert ours.n_heads == 2 and ours.d_head == 4


@pytest.mark.parametrize(
    "bad", [nn.Linear(4, 4), nn.TransformerEncoderLayer(8, 2, batch_first=True)]
)
def test_mha_from_torch_rejects_wrong_type(bad):
    assert_from_torch_rejects_wrong_type(MultiHeadAttention, bad, "nn.MultiheadAttention")


@pytest.mark.parametrize("kwargs", [{"kdim": 4}, {"add_bias_kv": True}, {"add_zero_attn": True}])
def test_mha_from_torch_rejects_unsupported_options(kwargs):
    with pytest.raises(
        ValueError, match=r"kdim/vdim != embed_dim, add_bias_kv and add_zero_attn are not supported"
    ):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, batch_first=True, **kwargs))


# --------------------------------------------------------------------------- from tests/nn/test_blocks.py


def test_block_from_torch_reads_eps_dropout_and_dtype():
    layer = encoder_layer(False, "relu", eps=1e-3)
    ours = TransformerBlock.from_torch(layer)
    assert ours.norm1.eps == 1e-3 and ours.norm2.eps == 1e-3
    assert ours.self_attn.dropout == 0.1 and ours.dropout1.p == 0.1 and ours.ff.dropout.p == 0.1
    assert all(p.dtype == F64 for p in ours.parameters())
    # the copied float64 parameters are bit-identical, not rounded through float32
    assert torch.equal(ours.ff.linear1.weight, layer.linear1.weight)
    assert torch.equal(ours.ff.linear2.bias, layer.linear2.bias)
    assert torch.equal(ours.self_attn.k_proj.weight, layer.self_attn.in_proj_weight[D : 2 * D])
    assert torch.equal(ours.norm2.weight, layer.norm2.weight)


@pytest.mark.parametrize("twin", list(TWINS))
def test_blocks_from_torch_reject_wrong_type(twin):
    ours, torch_cls, other = TWINS[twin]
    for bad in (nn.Linear(4, 4), other(8, 2, batch_first=True)):
        with pytest.raises(
            ValueError,
            match=rf"{ours.__name__}.from_torch: expected nn.{torch_cls.__name__}, "
            rf"received {type(bad).__name__}",
        ):
            ours.from_torch(bad)


@pytest.mark.parametrize("twin", list(TWINS))
@pytest.mark.parametrize(
    "activation,pattern",
    [
        (torch.tanh, r"received <built-in method tanh"),
        # nn.GELU(approximate="tanh") is a different function from the exact GELU we compute.
        (nn.GELU(approximate="tanh"), r"received GELU\(approximate='tanh'\)"),
    ],
    ids=["tanh", "tanh-gelu"],
)
def test_blocks_from_torch_reject_other_activations(twin, activation, pattern):
    ours, torch_cls, _ = TWINS[twin]
    layer = torch_cls(8, 2, 16, activation=activation, batch_first=True)
    with pytest.raises(ValueError, match=r"expected a ReLU or exact GELU activation, " + pattern):
        ours.from_torch(layer)


@pytest.mark.parametrize("twin", list(TWINS))
def test_blocks_from_torch_reject_bias_false(twin):
    ours, torch_cls, _ = TWINS[twin]
    with pytest.raises(ValueError, match=r"bias=False are not supported"):
        ours.from_torch(torch_cls(8, 2, 16, bias=False, batch_first=True))


# --------------------------------------------------------------------------- from tests/nn/test_decoder_block.py


def test_decoder_block_from_torch_copies_exactly_and_reads_eps_dropout_dtype():
    layer = decoder_layer(False, "relu", eps=1e-3)
    ours = DecoderBlock.from_torch(layer)
    assert ours.norm1.eps == ours.norm2.eps == ours.norm3.eps == 1e-3
    assert ours.self_attn.dropout == ours.cross_attn.dropout == 0.1
    assert ours.dropout1.p == ours.dropout2.p == ours.dropout3.p == ours.ff.dropout.p == 0.1
    assert all(p.dtype == F64 for p in ours.parameters())
    # bit-identical float64 copies (casting before copying: nothing rounded through float32)
    assert torch.equal(ours.cross_attn.v_proj.weight, layer.multihead_attn.in_proj_weight[2 * D :])
    assert torch.equal(ours.cross_attn.q_proj.bias, layer.multihead_attn.in_proj_bias[:D])
    assert torch.equal(ours.self_attn.k_proj.weight, layer.self_attn.in_proj_weight[D : 2 * D])
    assert torch.equal(ours.ff.linear1.weight, layer.linear1.weight)
    assert torch.equal(ours.ff.linear2.bias, layer.linear2.bias)
    assert torch.equal(ours.norm3.weight, layer.norm3.weight) and torch.equal(
        ours.norm2.bias, layer.norm2.bias
    )
    f32 = DecoderBlock.from_torch(decoder_layer(True, dtype=torch.float32))
    assert all(p.dtype == torch.float32 for p in f32.parameters())


# --------------------------------------------------------------------------- from tests/nn/test_layers.py


def test_layernorm_from_torch_without_affine_or_bias():
    x = rand(4, 6, seed=3)
    theirs = nn.LayerNorm(6, elementwise_affine=False, dtype=F64)
    close(LayerNorm.from_torch(theirs).to(F64)(x), theirs(x))
    theirs = nn.LayerNorm(6, bias=False, dtype=F64)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(6, dtype=F64))
    close(LayerNorm.from_torch(theirs)(x), theirs(x))


@pytest.mark.parametrize(
    "bad,name", [(nn.Linear(3, 3), "Linear"), (nn.LayerNorm((3, 4)), "LayerNorm")]
)
def test_layernorm_from_torch_rejects_wrong_type_or_shape(bad, name):
    with pytest.raises(
        ValueError, match=rf"expected nn.LayerNorm over one dimension \(d_model,\), received {name}"
    ):
        LayerNorm.from_torch(bad)


# --------------------------------------------------------------------------- from tests/nn/test_recurrent.py


def test_recurrent_from_torch_keeps_float32():
    m = nn.RNN(2, 3)
    assert RNN.from_torch(m).weight_ih.dtype == torch.float32
    close(RNN.from_torch(m).weight_hh, m.weight_hh_l0.detach(), atol=0, rtol=0)


def test_recurrent_from_torch_errors():
    with pytest.raises(ValueError, match="expected nn.RNN, received GRU"):
        RNN.from_torch(nn.GRU(2, 3))
    with pytest.raises(ValueError, match="expected nn.GRU, received LSTM"):
        GRU.from_torch(nn.LSTM(2, 3))
    with pytest.raises(ValueError, match="num_layers=2, bidirectional=False"):
        RNN.from_torch(nn.RNN(2, 3, num_layers=2))
    with pytest.raises(ValueError, match="num_layers=1, bidirectional=True"):
        GRU.from_torch(nn.GRU(2, 3, bidirectional=True))


# --------------------------------------------------------------------------- from tests/nn/test_rmsnorm.py


def test_rmsnorm_from_torch_without_weight_has_unit_gain():
    ref = nn.RMSNorm(8, eps=1e-6, elementwise_affine=False)
    ours = RMSNorm.from_torch(ref)
    x = torch.randn(4, 8)
    torch.testing.assert_close(ours(x), ref(x))

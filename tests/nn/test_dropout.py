"""Dropout in the transformer block: where it acts, its 1/(1 - p) scaling, train against eval mode,
and proof that :class:`TransformerBlock` drops the same things at the same places as
``nn.TransformerEncoderLayer``.

The oracle is torch's own layer, with the weights copied by ``from_torch``, in float64, in
train mode, under the same random state. Torch (2.x, CPU) draws its dropout masks in this order:
the attention weights (inside ``scaled_dot_product_attention``, shape ``(B, H, L, S)``), the
attention sublayer's output, the feed-forward hidden units, the feed-forward sublayer's output; the
package draws them in the same order. One draw differs in *layout*, not in place: with
``batch_first=True`` torch's attention output is a transposed view of an ``(L, B, D)`` tensor, and
``bernoulli_`` fills the mask in memory order, so the attention-output mask holds the same random
numbers as ours, read in ``(L, B, D)`` order. ``test_stock_torch_matches_when_the_mask_is_read_in_its_layout``
shows that this is the only difference.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import transformer_lite as tl
from transformer_lite import TransformerBlock

P = 0.3


def _pair(norm_first: bool, activation: str = "relu", seed: int = 0):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(
        8, 2, 16, dropout=P, activation=activation, batch_first=True, norm_first=norm_first
    ).double()
    ours = TransformerBlock.from_torch(layer)
    layer.train()
    ours.train()
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    return layer, ours, x


class _DropoutInLengthBatchOrder(nn.Module):
    """Dropout on ``(B, L, D)`` whose mask is drawn as a contiguous ``(L, B, D)`` tensor, then transposed."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        B, L, D = x.shape
        # (L, B, D)
        noise = torch.empty(L, B, D, dtype=x.dtype).bernoulli_(1 - self.p).div_(1 - self.p)
        return x * noise.transpose(0, 1)  # (B, L, D)


def test_dropout_is_inverted_scaling():
    """Hand-made oracle: F.dropout = input times a Bernoulli(1 - p) mask divided by (1 - p)."""
    x = torch.randn(4, 1000, dtype=torch.float64)
    torch.manual_seed(7)
    y = F.dropout(x, p=P, training=True)
    torch.manual_seed(7)
    keep = torch.empty_like(x).bernoulli_(1 - P)  # 1 = kept
    torch.testing.assert_close(y, x * keep / (1 - P), rtol=1e-15, atol=0)
    assert torch.equal(y == 0, keep == 0)
    ones = F.dropout(torch.ones(200_000, dtype=torch.float64), p=P, training=True)
    assert set(ones.unique().tolist()) == {0.0, 1 / (1 - P)}
    # the expectation is preserved (sd of the mean ~0.0015)
    assert abs(float(ones.mean()) - 1.0) < 0.01


@pytest.mark.parametrize("norm_first", [False, True])
def test_eval_mode_is_the_identity(norm_first):
    """In eval mode dropout does nothing: same outputs as torch, and as the same weights with p = 0."""
    layer, ours, x = _pair(norm_first)
    layer.eval()
    ours.eval()
    no_dropout = TransformerBlock(8, 2, 16, dropout=0.0, norm_first=norm_first).double().eval()
    no_dropout.load_state_dict(ours.state_dict())
    with torch.no_grad():
        y = ours(x)[0]
        torch.testing.assert_close(y, layer(x), rtol=1e-12, atol=1e-12)
        assert torch.equal(y, no_dropout(x)[0])
        ours.train()
        assert not torch.allclose(ours(x)[0], y)  # and train mode really drops something


@pytest.mark.parametrize("norm_first", [False, True])
def test_same_random_state_same_output_except_attention_output_layout(norm_first):
    """Train mode, same seed: identical outputs once the one differently laid-out draw is switched off."""
    layer, ours, x = _pair(norm_first)
    layer.dropout1.p = 0.0
    ours.dropout1.p = 0.0
    torch.manual_seed(123)
    expected = layer(x)
    torch.manual_seed(123)
    got, _, _ = ours(x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    torch.manual_seed(123)
    assert not torch.allclose(layer(x), layer.eval()(x))  # dropout was active in the comparison


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_stock_torch_matches_when_the_mask_is_read_in_its_layout(norm_first, activation):
    """Every dropout at p > 0, same seed: ours equals torch exactly once ours reads the attention-output mask
    in torch's (L, B, D) order. Same draws, same places, same 1/(1 - p) scaling."""
    layer, ours, x = _pair(norm_first, activation)
    torch.manual_seed(123)
    expected = layer(x)
    torch.manual_seed(123)
    plain, _, _ = ours(x)
    # stock: the attention-output mask is read in another order
    assert not torch.allclose(plain, expected)
    ours.dropout1 = _DropoutInLengthBatchOrder(P)
    torch.manual_seed(123)
    got, _, _ = ours(x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_attention_weight_dropout_matches_torch_sdpa():
    """F.scaled_dot_product_attention(dropout_p) drops the softmax weights (output only, no weights returned);
    ours drops the same weights with the same draws and also returns the weights before dropout."""
    from transformer_lite import scaled_dot_product_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    torch.manual_seed(11)
    expected = F.scaled_dot_product_attention(q, k, v, dropout_p=P)
    torch.manual_seed(11)
    got, weights = scaled_dot_product_attention(q, k, v, dropout_p=P)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    # before dropout
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64))


@settings(max_examples=20, deadline=None)
@given(p=st.floats(0.05, 0.9), B=st.integers(1, 3), L=st.integers(1, 6), norm_first=st.booleans())
def test_property_eval_output_does_not_depend_on_p(p, B, L, norm_first):
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 16, dropout=p, norm_first=norm_first).double().eval()
    reference = TransformerBlock(8, 2, 16, dropout=0.0, norm_first=norm_first).double().eval()
    reference.load_state_dict(block.state_dict())
    x = torch.randn(B, L, 8, dtype=torch.float64)
    assert torch.equal(block(x)[0], reference(x)[0])


def _tagger(dropout=0.0):
    return tl.EncoderTagger(
        tl.TaggerConfig(
            vocab_size=6, n_classes=9, n_layers=2, d_model=8, n_heads=2, d_ff=16, dropout=dropout
        )
    )


def test_encoder_tagger_dropout():
    model = _tagger(dropout=P)
    assert all(
        block.dropout1.p == P and block.ff.dropout.p == P and block.self_attn.dropout == P
        for block in model.encoder.layers
    )
    assert tl.with_norm_first(model).encoder.layers[0].dropout2.p == P
    ids = torch.randint(0, 6, (2, 5), generator=torch.Generator().manual_seed(0))
    plain = _tagger()
    plain.load_state_dict(model.state_dict())
    assert torch.equal(model.eval()(ids).logits, plain.eval()(ids).logits)
    with pytest.raises(ValueError, match="dropout probability 0 <= p < 1"):
        _tagger(dropout=1.0)


@pytest.mark.parametrize(
    "build",
    [
        lambda p: tl.PositionwiseFeedForward(8, 16, dropout=p),
        lambda p: tl.SwiGLUFeedForward(8, 16, dropout=p),
        lambda p: tl.GRULanguageModel(tl.GRUConfig(vocab_size=10, d_model=8, dropout=p)),
        lambda p: tl.MultiHeadAttention(8, 2, dropout=p),
        lambda p: tl.MultiHeadAttention(8, 2, 1, dropout=p, bias=False),
    ],
    ids=["ffn", "swiglu", "gru-lm", "mha", "gqa"],
)
@pytest.mark.parametrize("p", [1.0, -0.1, True])
def test_modules_refuse_a_dropout_outside_zero_one_when_built(build, p):
    # the notation page: a probability in [0, 1), refused when the module is built
    with pytest.raises(
        ValueError, match=rf"expected a dropout probability 0 <= p < 1, received {p!r}"
    ):
        build(p)


@pytest.mark.parametrize("block", [tl.TransformerBlock, tl.DecoderBlock])
def test_blocks_name_themselves_when_refusing_a_dropout(block):
    # the error comes from the public entry point, not from the attention module inside
    with pytest.raises(ValueError, match=rf"^{block.__name__}: expected a dropout probability"):
        block(8, 2, 16, dropout=1.0)

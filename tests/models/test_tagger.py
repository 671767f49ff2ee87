"""Tests for transformer_lite.models.tagger: EncoderTagger, TaggerConfig, with_norm_first.

Oracles: the tagger against its parts assembled by hand (embedding, the encoder stack, the
linear head); ``with_norm_first`` copies every weight (state dicts compared entry by entry) and
round-trips to the same function; dropout off in eval mode equals a model built without it.
(Moved here with the class from ``tests/nn/test_dropout.py`` and
``tests/chapters/test_interactive_block_seq2seq.py``.)
"""

import dataclasses

import pytest
import torch

from tests.conftest import close
from transformer_lite.models.tagger import EncoderTagger, TaggerConfig, with_norm_first
from transformer_lite.outputs import ModelOutput

P = 0.3


def config(**overrides):
    fields = dict(vocab_size=6, n_classes=9, n_layers=2, d_model=8, n_heads=2, d_ff=16)
    return TaggerConfig(**{**fields, **overrides})


def test_tagger_is_embedding_encoder_head():
    torch.manual_seed(0)
    model = EncoderTagger(config(norm_first=True)).double().eval()
    ids = torch.randint(0, 6, (3, 5), generator=torch.Generator().manual_seed(1))
    out = model(ids)
    assert isinstance(out, ModelOutput) and out.cache is None and len(out.attentions) == 2
    hidden = model.encoder(model.embed(ids)).output  # (B, L, D)
    close(out.logits, hidden @ model.head.weight.T + model.head.bias)
    assert out.logits.shape == (3, 5, 9)
    assert out.attentions[0].shape == (3, 2, 5, 5)


def test_encoder_tagger_dropout():
    model = EncoderTagger(config(dropout=P))
    assert all(
        block.dropout1.p == P and block.ff.dropout.p == P and block.self_attn.dropout == P
        for block in model.encoder.layers
    )
    assert with_norm_first(model).encoder.layers[0].dropout2.p == P
    ids = torch.randint(0, 6, (2, 5), generator=torch.Generator().manual_seed(0))
    plain = EncoderTagger(config())
    plain.load_state_dict(model.state_dict())
    assert torch.equal(model.eval()(ids).logits, plain.eval()(ids).logits)
    with pytest.raises(ValueError, match="dropout probability 0 <= p < 1"):
        config(dropout=1.0)


def test_with_norm_first_copies_every_weight_and_changes_the_function():
    torch.manual_seed(0)
    post = EncoderTagger(config(vocab_size=5, n_classes=4, n_layers=3))
    pre = with_norm_first(post)
    assert pre.config == dataclasses.replace(post.config, norm_first=True)
    assert all(b.norm_first for b in pre.encoder.layers) and pre.encoder.norm is not None
    state = pre.state_dict()
    for k, v in post.state_dict().items():
        assert torch.equal(v, state[k])
    assert torch.equal(state["encoder.norm.weight"], torch.ones(8))
    ids = torch.randint(0, 5, (2, 6))
    with torch.no_grad():
        assert not torch.allclose(post(ids).logits, pre(ids).logits)
        back = with_norm_first(pre, norm_first=False)
        assert torch.equal(back(ids).logits, post(ids).logits)
    assert pre(ids).logits.shape == (2, 6, 4)
    with pytest.raises(ValueError, match="expected an EncoderTagger"):
        with_norm_first(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"integer ids of shape \(B, L\)"):
        post(torch.zeros(2, 6))


def test_config_errors():
    with pytest.raises(ValueError, match="vocab_size to be a positive int, received 0"):
        config(vocab_size=0)
    with pytest.raises(ValueError, match="n_classes to be a positive int, received 0"):
        config(n_classes=0)
    with pytest.raises(ValueError, match="TaggerConfig: expected n_layers to be a positive int"):
        config(n_layers=0)
    with pytest.raises(ValueError, match="TaggerConfig: expected d_ff to be a positive int"):
        config(d_ff=-1)
    with pytest.raises(ValueError, match="divisible by n_heads, received d_model=8, n_heads=3"):
        config(n_heads=3)
    with pytest.raises(ValueError, match="expected TaggerConfig, received dict"):
        EncoderTagger(dataclasses.asdict(config()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config().d_model = 4

"""Tests for transformer_lite.models.recurrent_lm: the GRU language model and its configuration.

Oracles: parameter counts by hand; generation with the state carried against re-reading the
whole sequence every step (greedy); the state returned by ``forward`` continues the sequence
(two calls equal one); the configuration's fields are the checkpoint metadata keys.
"""

import dataclasses

import pytest
import torch

from tests.conftest import close
from transformer_lite.models.recurrent_lm import GRUConfig, GRULanguageModel
from transformer_lite.outputs import Generation, ModelOutput


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_gru_generate_continues_the_state():
    torch.manual_seed(0)
    gru = GRULanguageModel(GRUConfig(11, 12, n_layers=2)).eval()
    recurrent = 2 * 3 * (2 * 12 * 12 + 2 * 12)  # 2 layers, 3 gates: W_ih, W_hh, b_ih, b_hh
    assert gru.num_parameters() == 2 * 11 * 12 + recurrent  # embedding and head untied by default
    assert (
        GRULanguageModel(GRUConfig(11, 12, n_layers=2, tie_embeddings=True)).num_parameters()
        == 11 * 12 + recurrent
    )
    assert gru.token_embedding.weight.std() > 0.5, "PyTorch's N(0, 1) embedding, not N(0, 0.02^2)"
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    out = gru.generate(prompt, 8, temperature=0)
    assert isinstance(out, Generation) and out.logits.shape == (2, 8, 11)
    tokens = prompt
    for _ in range(8):  # no state carried: re-read the whole sequence every step
        tokens = torch.cat((tokens, gru(tokens).logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(out.tokens, tokens)
    result = gru(prompt)
    assert isinstance(result, ModelOutput) and result.attentions == ()
    logits, _, state = result
    assert logits.shape == (2, 3, 11) and state.shape == (2, 2, 12)
    with pytest.raises(ValueError, match=r"\[0, 11\)"):
        gru(torch.tensor([[11]]))
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        gru(torch.randn(2, 3))
    with pytest.raises(ValueError, match="positive"):
        GRUConfig(0, 4)
    with pytest.raises(ValueError, match="max_new_tokens"):
        gru.generate(prompt, -1)


def test_forward_continues_from_the_state():
    torch.manual_seed(1)
    gru = GRULanguageModel(GRUConfig(7, 6, n_layers=2)).double().eval()
    ids = torch.randint(0, 7, (3, 9), generator=torch.Generator().manual_seed(2))
    whole = gru(ids)
    first = gru(ids[:, :4])
    second = gru(ids[:, 4:], cache=first.cache)
    close(torch.cat((first.logits, second.logits), dim=1), whole.logits)
    close(second.cache, whole.cache)


def test_config_fields_are_the_checkpoint_keys_and_the_model_refuses_other_configs():
    names = [f.name for f in dataclasses.fields(GRUConfig)]
    assert names == ["vocab_size", "d_model", "n_layers", "dropout", "tie_embeddings"]
    config = GRUConfig(vocab_size=5, d_model=4, n_layers=2, dropout=0.1)
    assert GRUConfig(**config.to_dict()) == config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 8
    with pytest.raises(ValueError, match="dropout"):
        GRUConfig(5, 4, dropout=1.0)
    with pytest.raises(ValueError, match="expected GRUConfig, received dict"):
        GRULanguageModel(config.to_dict())

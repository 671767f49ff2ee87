"""Tests for transformer_lite.models.bert and the Hugging Face name map of pretrained.minilm.

Oracles: a state dict written under Hugging Face BERT names by hand (from the published naming:
``embeddings.*``, ``encoder.layer.N.attention.self.query`` ...) maps back to our names tensor for
tensor; a ``config.json`` written here reads into the config field by field; the encoder's
result is an EncoderOutput. The published weights themselves: tests/pretrained/test_minilm.py.
"""

import dataclasses
import json

import pytest
import torch

from transformer_lite.models.bert import BertConfig, BertEncoder
from transformer_lite.outputs import EncoderOutput
from transformer_lite.pretrained.minilm import bert_config_from_hf_json, bert_state_dict_from_hf

CONFIG = BertConfig(vocab_size=50, max_len=8, d_model=8, n_heads=2, n_layers=2, d_ff=16)

HF_LAYER = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "ff.linear1": "intermediate.dense",
    "ff.linear2": "output.dense",
    "norm2": "output.LayerNorm",
}


def hf_names(sd):
    """Our state dict under Hugging Face's names, with the extras a BERT checkpoint carries."""
    out = {
        "bert.embeddings.word_embeddings.weight": sd["token_embedding.weight"],
        "bert.embeddings.position_embeddings.weight": sd["position_embedding.weight"],
        "bert.embeddings.token_type_embeddings.weight": sd["token_type_embedding.weight"],
        "bert.embeddings.LayerNorm.weight": sd["embedding_norm.weight"],
        "bert.embeddings.LayerNorm.bias": sd["embedding_norm.bias"],
        "bert.embeddings.position_ids": torch.arange(8)[None],
        "bert.pooler.dense.weight": torch.zeros(8, 8),
    }
    for i in range(CONFIG.n_layers):
        for ours, theirs in HF_LAYER.items():
            for p in ("weight", "bias"):
                out[f"bert.encoder.layer.{i}.{theirs}.{p}"] = sd[f"blocks.{i}.{ours}.{p}"]
    return out


def test_hf_names_map_back_to_ours():
    torch.manual_seed(0)
    source = BertEncoder(CONFIG).eval()
    state = torch.get_rng_state()
    mapped = bert_state_dict_from_hf(hf_names(source.state_dict()), CONFIG)
    assert torch.equal(torch.get_rng_state(), state), "the map draws no random numbers"
    assert set(mapped) == set(source.state_dict())
    target = BertEncoder(CONFIG).eval()
    target.load_state_dict(mapped, strict=True)
    ids = torch.tensor([[1, 5, 7, 2]])
    out = target(ids)
    assert isinstance(out, EncoderOutput) and len(out.attentions) == 2
    assert torch.equal(out.output, source(ids).output)


def test_map_errors():
    sd = hf_names(BertEncoder(CONFIG).state_dict())
    with pytest.raises(KeyError):
        bert_state_dict_from_hf(
            {k: v for k, v in sd.items() if "layer.1.output.dense" not in k}, CONFIG
        )
    bad = dict(sd)
    bad["bert.encoder.layer.0.intermediate.dense.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="has shape \\(3, 3\\), expected \\(16, 8\\)"):
        bert_state_dict_from_hf(bad, CONFIG)
    with pytest.raises(ValueError, match="unexpected tensors"):
        bert_state_dict_from_hf({**sd, "cls.predictions.bias": torch.zeros(50)}, CONFIG)


def test_config_from_hf_json(tmp_path):
    fields = {
        "vocab_size": 50, "max_position_embeddings": 8, "type_vocab_size": 2, "hidden_size": 8,
        "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 16,
        "layer_norm_eps": 1e-12, "hidden_act": "gelu",
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    assert bert_config_from_hf_json(path) == CONFIG
    path.write_text(json.dumps({**fields, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="only the exact GELU"):
        bert_config_from_hf_json(path)
    assert repr(BertConfig()) == (
        "BertConfig(vocab_size=30522, max_len=512, type_vocab_size=2, d_model=384, n_heads=12, "
        "n_layers=6, d_ff=1536, eps=1e-12)"
    )


def test_config_and_type_errors():
    with pytest.raises(ValueError, match="BertConfig: expected n_layers to be a positive int"):
        BertConfig(n_layers=0)
    with pytest.raises(ValueError, match="BertConfig: expected type_vocab_size to be a positive"):
        BertConfig(type_vocab_size=0)
    with pytest.raises(ValueError, match="divisible by n_heads, received d_model=384, n_heads=5"):
        BertConfig(n_heads=5)
    with pytest.raises(ValueError, match="BertEncoder: expected BertConfig, received dict"):
        BertEncoder(dataclasses.asdict(CONFIG))

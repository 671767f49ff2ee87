"""Tests for transformer_lite.models.bert and the Hugging Face name map of pretrained.minilm.

Oracles: a state dict written under Hugging Face BERT names by hand (from the published module
tree: ``embeddings.*``, ``encoder.layer.N.attention.self.query`` ...) maps back to our names tensor
for tensor; a ``config.json`` written here reads into the config field by field; the encoder's
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


def hf_names(model: BertEncoder) -> dict[str, torch.Tensor]:
    """The model's tensors under the names of Hugging Face's ``BertForMaskedLM``, written from its
    module tree (modeling_bert: ``bert.embeddings`` and ``bert.encoder.layer.N`` with
    ``attention.self``, ``attention.output``, ``intermediate``, ``output``), with the extras a BERT
    checkpoint carries (position ids, a pooler)."""
    tree = {
        "embeddings": {
            "word_embeddings": model.token_embedding,
            "position_embeddings": model.position_embedding,
            "token_type_embeddings": model.token_type_embedding,
            "LayerNorm": model.embedding_norm,
        },
        "encoder.layer": {
            str(i): {
                "attention.self": {
                    "query": block.self_attn.q_proj,
                    "key": block.self_attn.k_proj,
                    "value": block.self_attn.v_proj,
                },
                "attention.output": {"dense": block.self_attn.out_proj, "LayerNorm": block.norm1},
                "intermediate": {"dense": block.ff.linear1},
                "output": {"dense": block.ff.linear2, "LayerNorm": block.norm2},
            }
            for i, block in enumerate(model.blocks)
        },
    }

    def flat(
        prefix, node
    ):  # {"a": {"b": module}} -> {"prefix.a.b.weight": ..., "prefix.a.b.bias": ...}
        if isinstance(node, dict):
            return {
                k: v for name, sub in node.items() for k, v in flat(f"{prefix}.{name}", sub).items()
            }
        return {f"{prefix}.{p}": t.detach() for p, t in node.state_dict().items()}

    extras = {
        "bert.embeddings.position_ids": torch.arange(8)[None],
        "bert.pooler.dense.weight": torch.zeros(8, 8),
    }
    return {**flat("bert", tree), **extras}


def test_hf_names_map_back_to_ours():
    torch.manual_seed(0)
    source = BertEncoder(CONFIG).eval()
    hf = hf_names(source)
    state = torch.get_rng_state()
    mapped = bert_state_dict_from_hf(hf, CONFIG)
    assert torch.equal(torch.get_rng_state(), state), "the map draws no random numbers"
    assert set(mapped) == set(source.state_dict())
    wrong = [name for name, t in mapped.items() if not torch.equal(t, source.state_dict()[name])]
    assert not wrong, f"given another tensor's values: {wrong}"
    target = BertEncoder(CONFIG).eval()
    target.load_state_dict(mapped, strict=True)
    ids = torch.tensor([[1, 5, 7, 2]])
    out = target(ids)
    assert isinstance(out, EncoderOutput) and len(out.attentions) == 2
    assert torch.equal(out.output, source(ids).output)


def test_map_errors():
    sd = hf_names(BertEncoder(CONFIG))
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
    for field in ("n_layers", "type_vocab_size"):
        with pytest.raises(ValueError, match=f"BertConfig: expected {field} to be a positive int"):
            BertConfig(**{field: 0})
    with pytest.raises(ValueError, match="divisible by n_heads, received d_model=384, n_heads=5"):
        BertConfig(n_heads=5)
    with pytest.raises(ValueError, match="BertEncoder: expected BertConfig, received dict"):
        BertEncoder(dataclasses.asdict(CONFIG))

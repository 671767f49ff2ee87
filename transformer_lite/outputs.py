"""What every attention, block, stack and model returns: a named tuple, main result first.

One convention for the whole package, as Hugging Face's ``ModelOutput`` and PyTorch's
``nn.MultiheadAttention`` (which returns ``(output, weights)``): the names are the same
everywhere.

- ``output`` or ``logits``: the result, ``(B, L, D)`` or ``(B, L, V)``;
- ``weights``: one layer's attention weights ``(B, H, L, S)`` (softmax before dropout, every
  head); ``attentions``: one such tensor per layer, first layer first;
- ``cross_weights`` / ``cross_attentions``: a decoder's weights over the encoder's memory;
- ``cache``: what to hand back for the next step (a :class:`KeyValue` of one layer, a
  :class:`KVCache` of a model, the state of a recurrent model).

Attribute access (``block(x).output``) is the documented use; unpacking works too
(``output, weights, cache = attn(x)``). No flag changes what a call returns.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

__all__ = [
    "KeyValue",
    "KVCache",
    "AttentionOutput",
    "DecoderBlockOutput",
    "EncoderOutput",
    "DecoderOutput",
    "ModelOutput",
    "Generation",
]


class KeyValue(NamedTuple):
    """One attention layer's keys and values of every position so far (incremental decoding)."""

    keys: Tensor  # (B, H_kv, S, d_head), already rotated under RoPE
    values: Tensor  # (B, H_kv, S, d_head)


class KVCache:
    """The keys and values of every layer of a model, for the positions processed so far.

    Source: incremental decoding as in Shazeer (2019), which keeps the keys and values of
    earlier positions and analyses the memory traffic of reading them at every step; the same
    layout (one keys/values pair per layer) as Hugging Face's ``DynamicCache``.

    Filled in place by a model's ``forward``: pass an empty cache with the prompt, then the
    same cache with each new token.

    Attributes:
        layers: one :class:`KeyValue` per layer, each tensor ``(B, n_kv_heads, S, d_head)``.
    """

    def __init__(self) -> None:
        self.layers: list[KeyValue] = []

    def __len__(self) -> int:
        """Number of cached positions S (0 when empty)."""
        # [0][0]: a student's cache may hold plain (keys, values) tuples (chapter 9), not KeyValues
        return self.layers[0][0].shape[-2] if self.layers else 0

    def num_bytes(self) -> int:
        """Memory held by the cached tensors, in bytes."""
        return sum(t.numel() * t.element_size() for pair in self.layers for t in pair)


class AttentionOutput(NamedTuple):
    """What :class:`~transformer_lite.nn.attention.MultiHeadAttention` and
    :class:`~transformer_lite.nn.blocks.TransformerBlock` return."""

    output: Tensor  # (B, L, D)
    weights: Tensor  # (B, H, L, S): softmax before dropout, every head
    cache: KeyValue  # keys and values of all S positions (self-attention) or of the memory (cross)


class DecoderBlockOutput(NamedTuple):
    """What :class:`~transformer_lite.nn.blocks.DecoderBlock` returns."""

    output: Tensor  # (B, L, D)
    weights: Tensor  # self-attention (B, H, L, L)
    cross_weights: Tensor  # attention over the memory (B, H, L, S_src)


class EncoderOutput(NamedTuple):
    """What an encoder stack returns (:class:`TransformerEncoder`, :class:`BertEncoder`)."""

    output: Tensor  # (B, L, D)
    attentions: tuple[Tensor, ...]  # one (B, H, L, L) per layer


class DecoderOutput(NamedTuple):
    """What a decoder stack returns (:class:`TransformerDecoder`; ``EncoderDecoderTransformer.decode``,
    whose ``output`` is the logits ``(B, L, V_tgt)``)."""

    output: Tensor  # (B, L, D), or the logits for EncoderDecoderTransformer.decode
    attentions: tuple[Tensor, ...]  # self-attention, one (B, H, L, L) per layer
    cross_attentions: tuple[Tensor, ...]  # over the memory, one (B, H, L, S_src) per layer


class ModelOutput(NamedTuple):
    """What a whole model's ``forward`` returns (decoder-only, GRU, encoder-decoder, tagger)."""

    logits: Tensor  # (B, L, V); the tagger: (B, L, n_classes)
    attentions: tuple[Tensor, ...]  # one (B, H, L, S) per layer; () for the GRU
    # KVCache (decoder-only), the GRU's state (n_layers, B, D), or None
    cache: KVCache | Tensor | None


class Generation(NamedTuple):
    """What ``generate`` and ``greedy_decode`` return."""

    tokens: Tensor  # (B, L + T) int64: the prompt followed by the T new tokens
    logits: Tensor  # (B, T, V): the logits each new token was chosen from (before temperature)

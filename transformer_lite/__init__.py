"""transformer_lite: transformer components written from scratch in PyTorch, for teaching.

Every public component is batch-first, documents its shapes and its source,
and is tested against an independent oracle (see ``tests/``).
Boolean masks mean ``True`` = may attend, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .blocks import TransformerBlock
from .feedforward import PositionwiseFeedForward
from .masks import bool_to_additive_mask, causal_mask, padding_mask
from .normalization import LayerNorm
from .positional import (LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding, apply_rotary,
                         sinusoidal_positional_encoding)
from .relative import (ClippedRelativePositionBias, T5RelativePositionBias, alibi_bias, alibi_slopes, relative_positions,
                       t5_relative_bucket)
from .decoder import DecoderBlock
from .models import EncoderDecoderConfig, EncoderDecoderTransformer, TransformerDecoder, TransformerEncoder, greedy_decode
from .pretrained import BertConfig, BertEncoder, WordPieceTokenizer, load_minilm
from .recurrent import GRU, RNN
from .efficient_attention import memory_efficient_attention
from .rmsnorm import RMSNorm
from .swiglu import SwiGLUFeedForward
from .gqa import GroupedQueryAttention
from .language_model import (CausalTransformerBlock, DecoderOnlyConfig, DecoderOnlyTransformer, GRULanguageModel, KVCache,
                             sample_next_token)
from .smollm2 import BPETokenizer, load_smollm2

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention", "MultiHeadAttention", "causal_mask", "padding_mask", "bool_to_additive_mask",
    "LayerNorm", "PositionwiseFeedForward", "LearnedPositionalEmbedding", "RotaryEmbedding", "apply_rotary",
    "TransformerBlock",
    "BertConfig", "BertEncoder", "WordPieceTokenizer", "load_minilm",
    "sinusoidal_positional_encoding", "SinusoidalPositionalEncoding",
    "relative_positions", "t5_relative_bucket", "T5RelativePositionBias", "ClippedRelativePositionBias", "alibi_slopes",
    "alibi_bias",
    "DecoderBlock", "TransformerEncoder", "TransformerDecoder", "EncoderDecoderConfig", "EncoderDecoderTransformer",
    "greedy_decode",
    "RNN", "GRU", "memory_efficient_attention",
    "RMSNorm", "SwiGLUFeedForward", "GroupedQueryAttention", "CausalTransformerBlock", "DecoderOnlyConfig",
    "DecoderOnlyTransformer", "KVCache", "GRULanguageModel", "sample_next_token", "BPETokenizer", "load_smollm2",
]

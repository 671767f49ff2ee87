"""transformer_lite: transformer components written from scratch in PyTorch, for teaching.

The package reads in the order of the book:

- :mod:`transformer_lite.nn`: the components (masks, attention, positions, normalization,
  feed-forward networks, the blocks that join them, recurrent layers);
- :mod:`transformer_lite.models`: whole models (encoder-decoder, decoder-only language model,
  recurrent language model);
- :mod:`transformer_lite.pretrained`: loaders of published weights (MiniLM, SmolLM2);
- :mod:`transformer_lite.training`: data, toy tasks and the training loop (``python -m
  transformer_lite.training.train``);
- :mod:`transformer_lite.book`: the book's figures, widgets, exercise checkers and analyses;
- :mod:`transformer_lite.checks`: the input checks of the public entry points.

Every public component is batch-first, documents its shapes and its source,
and is tested against an independent oracle (see ``tests/``).
Boolean masks mean ``True`` = may attend, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

from .models.decoder_only import (
    DecoderOnlyConfig,
    DecoderOnlyTransformer,
    KVCache,
    sample_next_token,
)
from .models.encoder_decoder import (
    EncoderDecoderConfig,
    EncoderDecoderTransformer,
    TransformerDecoder,
    TransformerEncoder,
    greedy_decode,
)
from .models.recurrent_lm import GRULanguageModel
from .nn.attention import GroupedQueryAttention, MultiHeadAttention, scaled_dot_product_attention
from .nn.blocks import DecoderBlock, PositionwiseFeedForward, SwiGLUFeedForward, TransformerBlock
from .nn.efficient_attention import memory_efficient_attention
from .nn.masks import bool_to_additive_mask, causal_mask, padding_mask
from .nn.normalization import LayerNorm, RMSNorm
from .nn.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    sinusoidal_positional_encoding,
)
from .nn.recurrent import GRU, RNN
from .nn.relative_position import (
    ClippedRelativePositionBias,
    T5RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    relative_positions,
    t5_relative_bucket,
)
from .pretrained.minilm import BertConfig, BertEncoder, WordPieceTokenizer, load_minilm
from .pretrained.smollm2 import BPETokenizer, load_smollm2

__version__ = "0.1.0"

# fmt: off
__all__ = [
    # nn: the components, in the order of the book
    "scaled_dot_product_attention", "MultiHeadAttention", "causal_mask", "padding_mask", "bool_to_additive_mask",
    "LayerNorm", "PositionwiseFeedForward", "TransformerBlock",
    "sinusoidal_positional_encoding", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding",
    "RotaryEmbedding", "apply_rotary",
    "relative_positions", "t5_relative_bucket", "T5RelativePositionBias", "ClippedRelativePositionBias",
    "alibi_slopes", "alibi_bias",
    "DecoderBlock", "RNN", "GRU", "memory_efficient_attention",
    "RMSNorm", "SwiGLUFeedForward", "GroupedQueryAttention",
    # models
    "TransformerEncoder", "TransformerDecoder", "EncoderDecoderConfig", "EncoderDecoderTransformer",
    "greedy_decode", "DecoderOnlyConfig", "DecoderOnlyTransformer", "KVCache", "sample_next_token",
    "GRULanguageModel",
    # pretrained
    "BertConfig", "BertEncoder", "WordPieceTokenizer", "load_minilm", "BPETokenizer", "load_smollm2",
]
# fmt: on

"""transformer_lite: transformer components written from scratch in PyTorch, for teaching.

The package reads in the order of the book:

- :mod:`transformer_lite.nn`: the components (masks, attention, positions, normalization,
  feed-forward networks, the blocks that join them, recurrent layers);
- :mod:`transformer_lite.models`: whole models (encoder-decoder, decoder-only language model,
  recurrent language model, the BERT encoder, chapter 4's tagger) and the one decode loop;
- :mod:`transformer_lite.pretrained`: loaders of published weights (MiniLM, SmolLM2);
- :mod:`transformer_lite.training`: data, toy tasks and the training loop (``python -m
  transformer_lite.training.train``);
- :mod:`transformer_lite.chapters`: the book's figures, widgets, exercise checkers and analyses;
- :mod:`transformer_lite.outputs`: what every attention, block, stack and model returns (named
  tuples) and the key/value cache;
- :mod:`transformer_lite.config`: the options of the models' configurations (``Literal`` types);
- :mod:`transformer_lite.interop`: reading PyTorch's own modules (the ``from_torch`` bodies);
- :mod:`transformer_lite.checks`: the input checks of the public entry points.

Every public component is batch-first, documents its shapes and its source,
and is tested against an independent oracle (see ``tests/``).
Boolean masks mean ``True`` = may attend, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

import importlib

# Where each public name lives. The names are imported on first use (PEP 562), so that
# `import transformer_lite.nn` needs torch alone: the loaders of published weights (gguf, tokenizers,
# safetensors) and the book's figures and widgets (matplotlib, plotly, ipywidgets) load only when a
# name from them is asked for.
_WHERE = {
    # config
    "Activation": ".config",
    "FFActivation": ".config",
    "Norm": ".config",
    "Positional": ".config",
    # outputs
    "AttentionOutput": ".outputs",
    "DecoderBlockOutput": ".outputs",
    "DecoderOutput": ".outputs",
    "EncoderOutput": ".outputs",
    "Generation": ".outputs",
    "KVCache": ".outputs",
    "KeyValue": ".outputs",
    "ModelOutput": ".outputs",
    # models.bert
    "BertConfig": ".models.bert",
    "BertEncoder": ".models.bert",
    # models.decoder_only
    "DecoderOnlyConfig": ".models.decoder_only",
    "DecoderOnlyTransformer": ".models.decoder_only",
    # models.encoder_decoder
    "EncoderDecoderConfig": ".models.encoder_decoder",
    "EncoderDecoderTransformer": ".models.encoder_decoder",
    "TransformerDecoder": ".models.encoder_decoder",
    "TransformerEncoder": ".models.encoder_decoder",
    "greedy_decode": ".models.encoder_decoder",
    # models.generation
    "sample_next_token": ".models.generation",
    # models.recurrent_lm
    "GRUConfig": ".models.recurrent_lm",
    "GRULanguageModel": ".models.recurrent_lm",
    # models.tagger
    "EncoderTagger": ".models.tagger",
    "TaggerConfig": ".models.tagger",
    "with_norm_first": ".models.tagger",
    # nn.attention
    "MultiHeadAttention": ".nn.attention",
    "scaled_dot_product_attention": ".nn.attention",
    # nn.blocks
    "DecoderBlock": ".nn.blocks",
    "PositionwiseFeedForward": ".nn.blocks",
    "SwiGLUFeedForward": ".nn.blocks",
    "TransformerBlock": ".nn.blocks",
    # nn.efficient_attention
    "memory_efficient_attention": ".nn.efficient_attention",
    # nn.masks
    "attention_bias": ".nn.masks",
    "bool_to_additive_mask": ".nn.masks",
    "causal_mask": ".nn.masks",
    "padding_mask": ".nn.masks",
    # nn.normalization
    "LayerNorm": ".nn.normalization",
    "RMSNorm": ".nn.normalization",
    # nn.positional
    "LearnedPositionalEmbedding": ".nn.positional",
    "RotaryEmbedding": ".nn.positional",
    "SinusoidalPositionalEncoding": ".nn.positional",
    "apply_rotary": ".nn.positional",
    "sinusoidal_positional_encoding": ".nn.positional",
    # nn.recurrent
    "GRU": ".nn.recurrent",
    "RNN": ".nn.recurrent",
    # nn.relative_position
    "ClippedRelativePositionBias": ".nn.relative_position",
    "T5RelativePositionBias": ".nn.relative_position",
    "alibi_bias": ".nn.relative_position",
    "alibi_slopes": ".nn.relative_position",
    "relative_positions": ".nn.relative_position",
    "t5_relative_bucket": ".nn.relative_position",
    # pretrained.minilm
    "WordPieceTokenizer": ".pretrained.minilm",
    "load_minilm": ".pretrained.minilm",
    # pretrained.smollm2
    "BPETokenizer": ".pretrained.smollm2",
    "load_smollm2": ".pretrained.smollm2",
}

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
    "RMSNorm", "SwiGLUFeedForward", "attention_bias",
    # outputs: what the modules and models return; the options of the configurations
    "KeyValue", "AttentionOutput", "DecoderBlockOutput", "EncoderOutput", "DecoderOutput",
    "ModelOutput", "Generation", "KVCache", "Activation", "FFActivation", "Norm", "Positional",
    # models
    "TransformerEncoder", "TransformerDecoder", "EncoderDecoderConfig", "EncoderDecoderTransformer",
    "greedy_decode", "DecoderOnlyConfig", "DecoderOnlyTransformer", "sample_next_token",
    "GRUConfig", "GRULanguageModel", "BertConfig", "BertEncoder",
    "TaggerConfig", "EncoderTagger", "with_norm_first",
    # pretrained
    "WordPieceTokenizer", "load_minilm", "BPETokenizer", "load_smollm2",
]
# fmt: on


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""Whole models built from :mod:`transformer_lite.nn`.

- :mod:`.encoder_decoder`: the encoder-decoder transformer of Vaswani et al. (2017), its encoder
  and decoder stacks, and greedy decoding;
- :mod:`.decoder_only`: the GPT-style language model with a key/value cache;
- :mod:`.recurrent_lm`: the GRU language model it is compared with;
- :mod:`.generation`: choosing the next token, and the one decode loop every model generates with;
- :mod:`.bert`: the BERT encoder that ``pretrained.load_minilm`` fills with published weights;
- :mod:`.tagger`: a per-position classifier on an encoder stack, post-norm or pre-norm.

Each model takes one frozen configuration dataclass (``DecoderOnlyConfig``, ``GRUConfig``, ...)
and returns the named tuples of :mod:`transformer_lite.outputs`.
"""

from .bert import BertConfig, BertEncoder
from .decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from .encoder_decoder import (
    EncoderDecoderConfig,
    EncoderDecoderTransformer,
    TransformerDecoder,
    TransformerEncoder,
    greedy_decode,
)
from .generation import decode, sample_next_token
from .recurrent_lm import GRUConfig, GRULanguageModel
from .tagger import EncoderTagger, TaggerConfig, with_norm_first

__all__ = [
    "BertConfig",
    "BertEncoder",
    "DecoderOnlyConfig",
    "DecoderOnlyTransformer",
    "EncoderDecoderConfig",
    "EncoderDecoderTransformer",
    "TransformerDecoder",
    "TransformerEncoder",
    "greedy_decode",
    "decode",
    "sample_next_token",
    "GRUConfig",
    "GRULanguageModel",
    "EncoderTagger",
    "TaggerConfig",
    "with_norm_first",
]

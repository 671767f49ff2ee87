"""Checkers for the book's exercises: they test a learner's function and name the likely mistake.

Each ``check_*`` function calls the learner's function on seeded, distinct
inputs of several shapes (L != S, odd ``d_model``, a single position, masks),
compares with this package's reference in float64, and

* returns ``None`` (after printing a short confirmation) when every case agrees;
* raises ``AssertionError`` whose message names the classic mistake that
  reproduces the wrong answer (e.g. "scaled by d_k instead of sqrt(d_k)"),
  or, when no known mistake fits, says which case failed and how;
* prints ``not implemented yet`` and returns ``None`` when the function raises
  ``NotImplementedError`` (the stubs of the student edition do), so that a
  notebook still runs from top to bottom.

One module per chapter, named after its notebook; the shared machinery is in :mod:`._checking`:

* :mod:`.ch1_attention`: scaled dot-product attention, a head's score spread, splitting and merging
  heads, a multi-head attention module;
* :mod:`.ch2_causal_masks`: the causal mask, attention with a key/value cache, positions read from
  the mask; a causal self-attention module with a key/value cache;
* :mod:`.ch3_positional_encodings`: the sinusoidal encoding and rotary position embedding; the
  positional-encoding module and self-attention with rotary positions and a key/value cache;
* :mod:`.ch4_transformer_block`: layer normalization and a pre-norm block, as functions; the layer-norm,
  feed-forward and block modules (post-norm and pre-norm from one class);
* :mod:`.ch5_encoder_decoder`: teacher forcing's shift; the decoder block and the encoder-decoder model
  (its three masks) as modules;
* :mod:`.ch6_rnn_gradients`: an RNN step's Jacobian; the RNN and GRU cells as modules, with their step
  Jacobians;
* :mod:`.ch7_cost`: merging two blocks' online-softmax statistics; attention tile by tile with the
  online softmax;
* :mod:`.ch8_language_model`: the next-token loss, temperature and top-k, loss units, the size of a
  key/value cache;
* :mod:`.ch9_build_a_gpt`: the learner's GPT from the modules of chapters 1 and 4, its training loop,
  generation with a key/value cache, and the capstone (that GPT trained on chapter 8's corpus).

Every checker is importable from here: ``from transformer_lite.chapters.exercises import check_rotary``.
"""

from .ch1_attention import (
    check_multi_head_attention,
    check_scaled_dot_product_attention,
    check_score_spread,
    check_split_merge_heads,
)
from .ch2_causal_masks import (
    check_cached_causal_attention,
    check_causal_mask,
    check_causal_positions,
    check_causal_self_attention_module,
)
from .ch3_positional_encodings import (
    check_rotary,
    check_rotary_attention_module,
    check_sinusoidal_module,
    check_sinusoidal_positional_encoding,
    reference_sinusoidal_positional_encoding,
)
from .ch4_transformer_block import (
    check_block_module,
    check_feed_forward_module,
    check_layer_norm,
    check_layer_norm_module,
    check_pre_norm_block,
)
from .ch5_encoder_decoder import (
    check_decoder_block_module,
    check_encoder_decoder_module,
    check_shift_right,
)
from .ch6_rnn_gradients import (
    check_gru_cell_module,
    check_rnn_cell_module,
    check_rnn_step_jacobian,
)
from .ch7_cost import check_online_softmax_merge, check_tiled_attention
from .ch8_language_model import (
    check_kv_cache_bytes,
    check_loss_units,
    check_next_token_loss,
    check_temperature_top_k,
)
from .ch9_build_a_gpt import (
    check_cached_generation,
    check_capstone,
    check_gpt_module,
    check_training_loop,
)

__all__ = [
    "check_scaled_dot_product_attention",
    "check_multi_head_attention",
    "check_layer_norm_module",
    "check_feed_forward_module",
    "check_block_module",
    "check_score_spread",
    "check_split_merge_heads",
    "check_causal_mask",
    "check_cached_causal_attention",
    "check_causal_positions",
    "check_causal_self_attention_module",
    "reference_sinusoidal_positional_encoding",
    "check_sinusoidal_positional_encoding",
    "check_rotary",
    "check_sinusoidal_module",
    "check_rotary_attention_module",
    "check_layer_norm",
    "check_pre_norm_block",
    "check_shift_right",
    "check_decoder_block_module",
    "check_encoder_decoder_module",
    "check_rnn_step_jacobian",
    "check_rnn_cell_module",
    "check_gru_cell_module",
    "check_online_softmax_merge",
    "check_tiled_attention",
    "check_next_token_loss",
    "check_temperature_top_k",
    "check_loss_units",
    "check_kv_cache_bytes",
    "check_gpt_module",
    "check_training_loop",
    "check_cached_generation",
    "check_capstone",
]

"""Interactive figures that work in the static book, with no kernel and no network.

The ipywidgets explorers of :mod:`transformer_lite.chapters.explorers` need a running
Python kernel. The figures here are plotly figures whose every state (each
layer, each number of keys, each mask variant) is computed when the notebook
runs and stored in the page; sliders and menus only switch between stored
states in the browser. The page loads ``plotly.min.js`` once, from the book's
own ``_static`` folder (see ``book/_ext/plotly_offline.py``), never from a CDN.

Colours are colour-blind safe (viridis for weights, the two ends of cividis for masks).

One module per chapter, named after its notebook, holds the figures that chapter shows;
:func:`show`, which every chapter uses to put a figure in the page, and the helpers shared by
several chapters are in :mod:`._page`:

* :mod:`.ch1_attention`: ``attention_layers_figure``;
* :mod:`.ch2_causal_masks`: ``mask_alignment_figure``, ``mask_variants_figure``;
* :mod:`.ch3_positional_encodings`: ``sinusoid_shift_matrix``, ``positional_offset_figure``;
* :mod:`.ch4_transformer_block`: ``gradient_norms_depth_figure``;
* :mod:`.ch5_encoder_decoder`: ``cross_attention_examples_figure``;
* :mod:`.ch6_rnn_gradients`: ``rnn_lag_profile``, ``rnn_gradient_figure``;
* :mod:`.ch7_cost`: ``attention_cost_figure``;
* :mod:`.ch8_language_model`: ``next_token_temperature_figure``.

Every figure is importable from here: ``from transformer_lite.chapters import interactive;
interactive.show(...)``.
"""

from ._page import show
from .ch1_attention import attention_layers_figure
from .ch2_causal_masks import mask_alignment_figure, mask_variants_figure
from .ch3_positional_encodings import positional_offset_figure, sinusoid_shift_matrix
from .ch4_transformer_block import gradient_norms_depth_figure
from .ch5_encoder_decoder import cross_attention_examples_figure
from .ch6_rnn_gradients import rnn_gradient_figure, rnn_lag_profile
from .ch7_cost import attention_cost_figure
from .ch8_language_model import next_token_temperature_figure

__all__ = [
    "show",
    "attention_layers_figure",
    "mask_alignment_figure",
    "mask_variants_figure",
    "sinusoid_shift_matrix",
    "positional_offset_figure",
    "gradient_norms_depth_figure",
    "cross_attention_examples_figure",
    "rnn_lag_profile",
    "rnn_gradient_figure",
    "attention_cost_figure",
    "next_token_temperature_figure",
]

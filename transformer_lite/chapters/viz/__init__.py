"""Static figures (matplotlib) for the chapters: heatmaps, masks, diagrams, curves.

All figures use colour-blind-safe colormaps (viridis / cividis), label both
axes with tokens, carry a colorbar, and take a title that says what to notice.

One module per chapter, named after its notebook, holds the figures that chapter introduces (later
chapters reuse them, e.g. ``plot_attention`` in chapters 5 and 8); colours and axis helpers shared
by several chapters are in :mod:`._style`, with the chapters' figure settings (``use_book_figures``:
text size, retina PNGs that record their smallest text on a phone, ``smallest_text_px``; log axes labelled
at full size, ``label_log_decades``):

* :mod:`.ch1_attention`: ``plot_attention``, ``plot_head_grid``;
* :mod:`.ch2_causal_masks`: ``plot_mask``, ``plot_batch_masks``;
* :mod:`.ch3_positional_encodings`: ``plot_score_bias``, ``plot_accuracy_vs_length``;
* :mod:`.ch4_transformer_block`: ``plot_activations``, ``plot_norm_placement``;
* :mod:`.ch5_encoder_decoder`: ``plot_decoder_block``;
* :mod:`.ch6_rnn_gradients`: ``plot_norms_vs_lag``, ``plot_jacobian_terms``;
* :mod:`.ch7_cost`: ``fit_loglog_slope``, ``plot_loglog_fit``, ``plot_roofline``.

Every figure is importable from here: ``from transformer_lite.chapters import viz; viz.plot_mask(...)``.
"""

from ._style import (
    COLUMN_WIDTH,
    MASK_CMAP,
    PHONE_COLUMN_PX,
    label_log_decades,
    smallest_text_px,
    use_book_figures,
)
from .ch1_attention import plot_attention, plot_head_grid
from .ch2_causal_masks import plot_batch_masks, plot_mask
from .ch3_positional_encodings import plot_accuracy_vs_length, plot_score_bias
from .ch4_transformer_block import plot_activations, plot_norm_placement
from .ch5_encoder_decoder import plot_decoder_block
from .ch6_rnn_gradients import plot_jacobian_terms, plot_norms_vs_lag
from .ch7_cost import fit_loglog_slope, plot_loglog_fit, plot_roofline

__all__ = [
    "COLUMN_WIDTH",
    "MASK_CMAP",
    "PHONE_COLUMN_PX",
    "smallest_text_px",
    "label_log_decades",
    "use_book_figures",
    "plot_attention",
    "plot_head_grid",
    "plot_mask",
    "plot_batch_masks",
    "plot_score_bias",
    "plot_accuracy_vs_length",
    "plot_activations",
    "plot_norm_placement",
    "plot_decoder_block",
    "plot_norms_vs_lag",
    "plot_jacobian_terms",
    "fit_loglog_slope",
    "plot_loglog_fit",
    "plot_roofline",
]

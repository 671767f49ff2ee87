"""Interactive explorers for live Jupyter (ipywidgets). They need a running kernel;
the built book shows static figures in their place.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from .masks import causal_mask, padding_mask
from .viz import plot_attention, plot_mask

__all__ = ["attention_explorer", "mask_explorer"]


def attention_explorer(encoder, tokenizer, text: str = "The cat sat on the mat because it was tired."):
    """Type a sentence, pick a layer and a head, and see that head's attention weights.

    Args:
        encoder: a :class:`~transformer_lite.pretrained.BertEncoder` (e.g. from ``load_minilm()``).
        tokenizer: its :class:`~transformer_lite.pretrained.WordPieceTokenizer`.
        text: the initial sentence.

    Returns:
        An ``ipywidgets`` widget (display it as the last expression of a cell).
    """
    import ipywidgets as w

    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads

    def show(text: str, layer: int, head: int) -> None:
        if not text.strip():
            return
        ids = torch.tensor([tokenizer.encode(text)])
        with torch.no_grad():
            _, attentions = encoder(ids)
        tokens = tokenizer.tokens(text)
        plot_attention(attentions[layer][0, head], tokens,
                       title=f"layer {layer}, head {head}: where each token (row) looks")
        plt.show()

    return w.interactive(
        show,
        text=w.Text(value=text, description="sentence", continuous_update=False, layout=w.Layout(width="520px")),
        layer=w.IntSlider(value=0, min=0, max=n_layers - 1, description="layer"),
        head=w.IntSlider(value=2, min=0, max=n_heads - 1, description="head"),
    )


def mask_explorer():
    """Choose L, S and a padding length; see the causal mask, the padding mask and their combination.

    Returns:
        An ``ipywidgets`` widget.
    """
    import ipywidgets as w

    def show(L: int, S: int, real_keys: int) -> None:
        real_keys = min(real_keys, S)
        causal = causal_mask(L, S)
        pad = padding_mask(torch.arange(S)[None, :] < real_keys)[0, 0]  # (1, S): True for real keys
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), constrained_layout=True)
        plot_mask(causal, title=f"causal, bottom-right (S - L = {S - L})", ax=axes[0])
        plot_mask(pad.expand(L, S), title=f"padding: {real_keys} real keys", ax=axes[1])
        plot_mask(causal & pad, title="both (logical and)", ax=axes[2])
        plt.show()

    return w.interactive(
        show,
        L=w.IntSlider(value=4, min=1, max=12, description="L (queries)"),
        S=w.IntSlider(value=6, min=1, max=12, description="S (keys)"),
        real_keys=w.IntSlider(value=5, min=0, max=12, description="real keys"),
    )

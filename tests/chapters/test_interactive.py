"""Plotly figures for the static book. Oracle: the tensors the figures were built from
(every slider step / menu entry must carry exactly the stored state), and the masks
module (the mask figures must show causal_mask and torch's top-left convention)."""

import json

import pytest
import torch

from transformer_lite import causal_mask
from transformer_lite.chapters import interactive

TOKENS = ["[CLS]", "a", "b", "[SEP]"]


def _attentions():
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(3, 4, 4, 4, generator=g), dim=-1)  # (n_layers, H, L, L)


def test_attention_layers_figure_steps_hold_each_layer():
    A = _attentions()
    fig = interactive.attention_layers_figure(A, TOKENS, title="t", initial_layer=1, n_cols=2)
    assert len(fig.data) == 4  # one heatmap per head
    assert torch.allclose(torch.tensor(fig.data[3].z), A[1, 3], atol=1e-4)  # initial layer shown
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["0", "1", "2"]
    for layer, step in enumerate(steps):
        z = torch.tensor(step.args[0]["z"])  # (H, L, L)
        assert torch.allclose(z, A[layer], atol=1e-4)
        assert list(step.args[1]) == [0, 1, 2, 3]
    assert list(fig.data[0].y) == ["0:[CLS]", "1:a", "2:b", "3:[SEP]"]


def test_attention_layers_figure_errors():
    with pytest.raises(ValueError, match=r"expected \(n_layers, H, L, L\) with L = 4"):
        interactive.attention_layers_figure(torch.ones(2, 3, 4), TOKENS, title="t")
    with pytest.raises(ValueError, match="initial_layer"):
        interactive.attention_layers_figure(_attentions(), TOKENS, title="t", initial_layer=3)


def test_mask_alignment_figure_shows_both_conventions():
    fig = interactive.mask_alignment_figure(L=2, S_values=(2, 4))
    for step, S in zip(fig.layout.sliders[0].steps, (2, 4)):
        ours, top_left = step.args[0]["z"]
        assert torch.equal(torch.tensor([r[:S] for r in ours]).double(), causal_mask(2, S).double())
        assert torch.equal(
            torch.tensor([r[:S] for r in top_left]).double(), torch.ones(2, S).tril().double()
        )
        # keys that do not exist yet: gaps
        assert all(v is None for r in ours + top_left for v in r[S:])
    # strict JSON: no NaN or inf for Jupyter to warn about
    json.dumps(fig.to_plotly_json(), allow_nan=False)
    with pytest.raises(ValueError, match="L >= 1"):
        interactive.mask_alignment_figure(L=0)


def test_mask_variants_figure_menu():
    fig = interactive.mask_variants_figure(TOKENS, n_real=3)
    menu = {b.label: torch.tensor(b.args[0]["z"][0]) for b in fig.layout.updatemenus[0].buttons}
    assert set(menu) == {"no mask", "causal", "padding", "causal and padding"}
    assert torch.equal(menu["causal and padding"].bool(), causal_mask(4) & (torch.arange(4) < 3))
    assert torch.equal(menu["padding"].bool()[:, 3], torch.zeros(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_real"):
        interactive.mask_variants_figure(TOKENS, n_real=0)


def test_show_emits_fixed_id_alt_text_and_both_representations(monkeypatch):
    shown = []
    monkeypatch.setattr(
        "transformer_lite.chapters.interactive._page.display", lambda obj, raw: shown.append(obj)
    )
    fig = interactive.mask_variants_figure(TOKENS, n_real=2)
    interactive.show(fig, div_id="masks", alt='Masks "menu"')
    bundle = shown[0]
    assert (
        'id="masks"' in bundle["text/html"]
        and 'aria-label="Masks &quot;menu&quot;"' in bundle["text/html"]
    )
    assert "cdn" not in bundle["text/html"].lower()  # plotly.js comes from the book, not from a CDN
    assert json.dumps(bundle["application/vnd.plotly.v1+json"])  # JSON-serializable for JupyterLab
    interactive.show(fig, div_id="masks", alt='Masks "menu"')
    # deterministic: nbval compares stored outputs
    assert shown[1]["text/html"] == bundle["text/html"]
    with pytest.raises(ValueError, match="HTML id"):
        interactive.show(fig, div_id="1 bad", alt="x")
    with pytest.raises(ValueError, match="alt"):
        interactive.show(fig, div_id="ok", alt=" ")

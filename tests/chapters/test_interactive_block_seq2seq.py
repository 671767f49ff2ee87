"""Figures and helpers of chapters 4 and 5: interactive.gradient_norms_depth_figure,
interactive.cross_attention_examples_figure, viz.plot_activations, viz.plot_decoder_block,
depth.layer_gradient_norms (on models/tagger.py's EncoderTagger; with_norm_first is tested in
tests/models/test_tagger.py) and the two explorers.

Oracles: the values the figures were built from (every slider step must carry exactly the
stored state), gradients computed directly from ``p.grad``, and the modules' own definitions
(post-norm and pre-norm blocks have the same parameters)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from tests.conftest import small_encoder_decoder
from transformer_lite.chapters import depth, interactive, viz
from transformer_lite.models.tagger import EncoderTagger, TaggerConfig


def _norms():
    g = torch.Generator().manual_seed(0)
    return {
        n: {
            "post-norm": (torch.rand(n, generator=g) + 0.1).tolist(),
            "pre-norm": (torch.rand(n, generator=g) + 0.1).tolist(),
        }
        for n in (2, 5)
    }


def test_gradient_norms_figure_steps_hold_each_depth():
    norms = _norms()
    fig = interactive.gradient_norms_depth_figure(norms, title="t", initial_depth=5)
    assert [trace.name for trace in fig.data] == ["post-norm", "pre-norm"]
    assert list(fig.data[1].y) == pytest.approx(norms[5]["pre-norm"], abs=1e-4)
    assert fig.layout.yaxis.type == "log"
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["2", "5"] and fig.layout.sliders[0].active == 1
    for step, n in zip(steps, (2, 5)):
        x, y = step.args[0]["x"], step.args[0]["y"]
        assert x == [list(range(1, n + 1))] * 2
        assert y[0] == pytest.approx(norms[n]["post-norm"], abs=1e-4)
        assert y[1] == pytest.approx(norms[n]["pre-norm"], abs=1e-4)
        assert list(step.args[1]) == [0, 1]


def test_gradient_norms_figure_errors():
    with pytest.raises(ValueError, match="at least one depth"):
        interactive.gradient_norms_depth_figure({}, title="t")
    with pytest.raises(ValueError, match="expected variants"):
        interactive.gradient_norms_depth_figure({2: {"post-norm": [1.0, 1.0]}}, title="t")
    with pytest.raises(ValueError, match="expected 2 positive norms for pre-norm"):
        interactive.gradient_norms_depth_figure(
            {2: {"post-norm": [1.0, 1.0], "pre-norm": [1.0]}}, title="t"
        )
    with pytest.raises(ValueError, match="positive norms"):
        interactive.gradient_norms_depth_figure(
            {1: {"post-norm": [0.0], "pre-norm": [1.0]}}, title="t"
        )
    with pytest.raises(ValueError, match="initial_depth"):
        interactive.gradient_norms_depth_figure(_norms(), title="t", initial_depth=3)


def test_cross_attention_figure_steps_hold_each_example():
    g = torch.Generator().manual_seed(1)
    weights = [
        torch.softmax(torch.randn(3, 2, generator=g), -1),
        torch.softmax(torch.randn(4, 3, generator=g), -1),
    ]
    src = [["a", "b"], ["c", "d", "e"]]
    tgt = [["BOS", "b", "a"], ["BOS", "e", "d", "c"]]
    fig = interactive.cross_attention_examples_figure(weights, src, tgt, title="t")
    assert torch.allclose(torch.tensor(fig.data[0].z), weights[0], atol=1e-4)
    assert list(fig.data[0].x) == ["0:a", "1:b"] and list(fig.data[0].y) == ["0:BOS", "1:b", "2:a"]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["0", "1"]
    state = steps[1].args[0]
    assert torch.allclose(torch.tensor(state["z"][0]), weights[1], atol=1e-4)
    assert state["x"] == [["0:c", "1:d", "2:e"]] and state["y"] == [["0:BOS", "1:e", "2:d", "3:c"]]


def test_cross_attention_figure_errors():
    w = [torch.ones(2, 2) / 2]
    with pytest.raises(ValueError, match="as many weights"):
        interactive.cross_attention_examples_figure(w, [["a", "b"]], [], title="t")
    with pytest.raises(ValueError, match="as many weights"):
        interactive.cross_attention_examples_figure([], [], [], title="t")
    with pytest.raises(
        ValueError, match=r"example 0 has weights \(2, 2\), but 3 target and 2 source labels"
    ):
        interactive.cross_attention_examples_figure(w, [["a", "b"]], [["x", "y", "z"]], title="t")


def test_plot_activations_uses_symmetric_limits_and_rejects_3d():
    x = torch.tensor([[1.0, -3.0], [0.5, 2.0]])
    ax = viz.plot_activations(x, title="t")
    im = ax.images[0]
    assert im.get_clim() == (-3.0, 3.0)
    assert ax.get_xlabel() == "feature" and ax.get_ylabel() == "position"
    ax2 = viz.plot_activations(x, limit=5)
    assert ax2.images[0].get_clim() == (-5.0, 5.0)
    plt.close("all")
    with pytest.raises(ValueError, match="2-D"):
        viz.plot_activations(torch.zeros(2, 2, 2))


@pytest.mark.parametrize("norm_first, n_plus", [(False, 0), (True, 3)])
def test_plot_decoder_block_draws_the_three_sublayers_in_order(norm_first, n_plus):
    ax = viz.plot_decoder_block(norm_first=norm_first)
    # a label may wrap: compare with its words on one line
    texts = [(t.get_position()[1], " ".join(t.get_text().split())) for t in ax.texts]
    order = [text for _, text in sorted(texts)]
    pos = {
        key: next(i for i, t in enumerate(order) if t.startswith(key))
        for key in ("masked self-attention", "cross-attention", "position-wise")
    }
    assert pos["masked self-attention"] < pos["cross-attention"] < pos["position-wise"]
    assert sum(t == "+" for t in order) == n_plus
    assert any(t.startswith("memory") for t in order)
    plt.close("all")


def test_layer_gradient_norms_equal_the_norm_of_all_gradients_of_a_layer():
    torch.manual_seed(0)
    model = EncoderTagger(TaggerConfig(5, 4, n_layers=2, d_model=8, n_heads=2, d_ff=16))
    with pytest.raises(ValueError, match="call loss.backward"):
        depth.layer_gradient_norms(model.encoder.layers)
    model(torch.randint(0, 5, (3, 4))).logits.pow(2).sum().backward()
    got = depth.layer_gradient_norms(model.encoder.layers)
    for layer, value in zip(model.encoder.layers, got):
        squares = sum(float((p.grad.double() ** 2).sum()) for p in layer.parameters())
        assert value == pytest.approx(squares**0.5, rel=1e-12)


def test_explorers_build():
    from transformer_lite.chapters.explorers import gradient_norm_explorer, reversal_explorer

    widget = gradient_norm_explorer()
    assert widget.children[0].description == "layers"
    # the callback itself (ipywidgets would swallow its errors)
    widget.f(n_layers=3, d_model=16, seed=1)
    model = small_encoder_decoder(
        13, 13, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=2, max_len=14
    )
    widget = reversal_explorer(model, text="abc")
    assert widget.children[1].max == 1
    widget.f(text="abcd", layer=1)
    widget.f(text="xyz", layer=0)  # no letter a-j: a hint, not an error
    plt.close("all")

"""Chapter 8's figure and explorer: interactive.next_token_temperature_figure and explorers.generation_explorer.

Oracles: logits ln(1, 2, 3, 4), whose softmax at temperature T is proportional to (1, 2, 3, 4) ** (1 / T), so
the probabilities, the entropy -sum p ln p and the mass outside the shown bars are worked out here by hand
(with ``math``, not torch); for the explorer, the model's own ``generate`` called directly with the same
seed, and a spy on ``generate`` that records whether the key/value cache was used.
"""

import math
import re

import pytest
import torch

from transformer_lite.chapters import interactive
from transformer_lite.models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from transformer_lite.models.recurrent_lm import GRUConfig, GRULanguageModel
from transformer_lite.training.data import CharVocab

# p at temperature T is proportional to (1, 2, 3, 4)**(1/T)
LOGITS = torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0]))
LABELS = ["a", "\n", " ", "b"]


def _note(step) -> tuple[float, float]:
    """(entropy, probability outside) read back from a slider step's annotation text."""
    text = step.args[1]["annotations[0].text"]
    entropy = float(re.search(r"entropy ([0-9.]+) nats", text).group(1))
    outside = float(re.search(r"outside the top \d+: ([0-9.e-]+)", text).group(1))
    return entropy, outside


def _by_hand(weights: list[float]) -> tuple[list[float], float]:
    total = sum(weights)
    p = [w / total for w in weights]
    return p, -sum(q * math.log(q) for q in p)


def test_figure_states_order_and_labels():
    temperatures = (0.0, 0.5, 1.0, 2.0)
    fig = interactive.next_token_temperature_figure(
        LOGITS, LABELS, temperatures=temperatures, top_n=2
    )
    (bars,) = fig.data
    assert bars.type == "bar"
    assert list(bars.x) == ["b", "␣"]  # largest logits first: ids 3 (b) and 2 (space, drawn as ␣)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["0 (greedy)", "0.5", "1", "2"]
    assert fig.layout.sliders[0].active == 2  # temperature 1 when the page opens
    assert list(bars.y) == steps[2].args[0]["y"][0]
    assert all(s.method == "update" and list(s.args[2]) == [0] for s in steps)
    # each state's axis ends at the first tenth above 1.1 times its tallest bar (at most 1)
    for s in steps:
        top = max(s.args[0]["y"][0])
        assert s.args[1]["yaxis.range"] == [0, min(1.0, math.ceil(11 * top) / 10)]
        assert top <= s.args[1]["yaxis.range"][1] <= max(1.1 * top + 0.1, top)
    assert steps[0].args[1]["yaxis.range"] == [0, 1.0]  # greedy: one bar at 1
    assert list(fig.layout.yaxis.range) == steps[2].args[1]["yaxis.range"]
    assert (
        fig.layout.xaxis.title.text == "next character"
        and fig.layout.yaxis.title.text == "probability"
    )
    assert bars.marker.color == "#3b528b"


def test_figure_greedy_state_is_one_hot():
    fig = interactive.next_token_temperature_figure(LOGITS, LABELS, top_n=4)
    greedy = fig.layout.sliders[0].steps[0]
    assert greedy.label == "0 (greedy)"
    assert greedy.args[0]["y"][0] == [1.0, 0.0, 0.0, 0.0]
    assert _note(greedy) == (0.0, 0.0)


@pytest.mark.parametrize(
    "t, weights", [(1.0, [4, 3, 2, 1]), (0.5, [16, 9, 4, 1]), (2.0, [2, 3**0.5, 2**0.5, 1])]
)
def test_figure_probabilities_entropy_and_outside_mass_by_hand(t, weights):
    fig = interactive.next_token_temperature_figure(LOGITS, LABELS, temperatures=(t,), top_n=2)
    (step,) = fig.layout.sliders[0].steps
    p, entropy = _by_hand(weights)  # p in the figure's order: b, space, newline, a
    shown = step.args[0]["y"][0]
    assert shown == pytest.approx(p[:2], abs=5e-5)  # stored rounded to 4 decimals
    got_entropy, got_outside = _note(step)
    assert got_entropy == pytest.approx(entropy, abs=5e-4)  # printed with 3 decimals
    assert got_outside == pytest.approx(p[2] + p[3], abs=5e-5)
    # the shown values account for all the mass
    assert sum(shown) + got_outside == pytest.approx(1.0, abs=2e-4)


def test_figure_default_temperatures_on_a_larger_vocabulary():
    g = torch.Generator().manual_seed(0)
    logits = 2 * torch.randn(30, generator=g)
    labels = [chr(ord("A") + i) for i in range(30)]
    fig = interactive.next_token_temperature_figure(logits, labels)
    steps = fig.layout.sliders[0].steps
    assert len(steps) == 7 and len(fig.data[0].x) == 20
    entropies = [_note(s)[0] for s in steps]
    assert entropies == sorted(entropies) and entropies[0] == 0.0  # hotter is flatter
    assert entropies[-1] < math.log(30)
    for s in steps:
        assert sum(s.args[0]["y"][0]) + _note(s)[1] == pytest.approx(1.0, abs=2e-3)
    top = torch.argsort(logits, descending=True)[:20].tolist()
    assert list(fig.data[0].x) == [labels[i] for i in top]
    # every bar has its label: plotly would skip every other one where they are crowded (a phone)
    assert list(fig.layout.xaxis.tickvals) == list(fig.layout.xaxis.ticktext) == list(fig.data[0].x)


def test_figure_top_n_larger_than_vocabulary_and_initial_state():
    fig = interactive.next_token_temperature_figure(
        LOGITS, LABELS, temperatures=(0.25, 0.5), top_n=50, initial_temperature=0.5
    )
    assert list(fig.data[0].x) == ["b", "␣", "⏎", "a"]
    assert fig.layout.sliders[0].active == 1
    # nothing outside when every token is shown
    assert _note(fig.layout.sliders[0].steps[1])[1] == 0.0


def test_figure_errors():
    f = interactive.next_token_temperature_figure
    with pytest.raises(
        ValueError,
        match=r"expected floating logits of shape \(V,\), received \(1, 4\) torch.float32",
    ):
        f(LOGITS[None], LABELS)
    with pytest.raises(ValueError, match=r"shape \(V,\), received \(4,\) torch.int64"):
        f(torch.arange(4), LABELS)
    with pytest.raises(ValueError, match="received list"):
        f([0.0, 1.0], LABELS[:2])
    with pytest.raises(ValueError, match="expected 4 distinct labels .* received 3"):
        f(LOGITS, LABELS[:3])
    with pytest.raises(ValueError, match="received 4 with 3 distinct"):
        f(LOGITS, ["a", "b", "a", "c"])
    with pytest.raises(ValueError, match="temperatures >= 0"):
        f(LOGITS, LABELS, temperatures=(1.0, -0.5))
    with pytest.raises(ValueError, match="temperatures >= 0"):
        f(LOGITS, LABELS, temperatures=())
    with pytest.raises(ValueError, match="top_n >= 1"):
        f(LOGITS, LABELS, top_n=0)
    with pytest.raises(ValueError, match="initial_temperature"):
        f(LOGITS, LABELS, temperatures=(0.5,), initial_temperature=1.0)


# --------------------------------------------------------------------------- the generation explorer

TEXT = "ROMEO\nO, she doth teach the torches to burn bright!\n"


def _tiny_transformer(vocab, max_len=16):
    torch.manual_seed(0)
    config = DecoderOnlyConfig(
        len(vocab), max_len=max_len, d_model=16, n_heads=2, n_layers=1, d_ff=32
    )
    return DecoderOnlyTransformer(config)


def _spy(model):
    calls = []
    generate = model.generate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return generate(*args, **kwargs)

    model.generate = spy
    return calls


def test_generation_explorer_builds_and_prints_the_right_length(capsys):
    from transformer_lite.chapters.explorers import generation_explorer

    vocab = CharVocab.from_text(TEXT)
    model = _tiny_transformer(vocab)
    calls = _spy(model)
    # the first call (at construction) returns at once
    widget = generation_explorer(model, vocab, prompt="")
    names = [c.description for c in widget.children[:5]]
    assert names == ["prompt", "temperature", "top_k (0 = all)", "new characters", "seed"]
    assert (
        widget.children[1].min == 0
        and widget.children[1].max == 2
        and widget.children[1].step == 0.05
    )
    assert (widget.children[2].min, widget.children[2].max) == (0, len(vocab))
    assert (widget.children[3].min, widget.children[3].max) == (20, 400)
    capsys.readouterr()

    widget.f(prompt="ROMEO\n", temperature=1.0, top_k=0, length=25, seed=3)
    text = capsys.readouterr().out
    assert text.startswith("ROMEO\n") and len(text) == len("ROMEO\n") + 25 + 1  # + print's newline
    assert calls[-1]["use_cache"] is False  # 6 + 25 positions > max_len = 16: the sliding window
    assert calls[-1]["top_k"] is None and calls[-1]["temperature"] == 1.0

    widget.f(prompt="O", temperature=1.0, top_k=3, length=15, seed=3)  # 1 + 15 = max_len: the cache
    text = capsys.readouterr().out
    assert len(text) == 1 + 15 + 1 and calls[-1]["use_cache"] is True and calls[-1]["top_k"] == 3


def test_generation_explorer_is_seeded_and_greedy_at_zero(capsys):
    from transformer_lite.chapters.explorers import generation_explorer

    vocab = CharVocab.from_text(TEXT)
    model = _tiny_transformer(vocab, max_len=64)
    # the first call (at construction) returns at once
    widget = generation_explorer(model, vocab, prompt="")
    capsys.readouterr()
    outputs = []
    for temperature, top_k, seed in [
        (1.0, 0, 5),
        (1.0, 0, 5),
        (1.0, 0, 6),
        (0.0, 0, 1),
        (1.0, 1, 9),
    ]:
        widget.f(prompt="RO", temperature=temperature, top_k=top_k, length=20, seed=seed)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0] != outputs[2]  # same seed, same text
    # top_k = 1 keeps only the arg-max: greedy whatever the temperature
    assert outputs[3] == outputs[4]
    ids = vocab.encode("RO")[None]
    greedy = model.generate(ids, 20, temperature=0.0).tokens
    assert outputs[3] == "RO" + vocab.decode(greedy[0, 2:]) + "\n"
    sampled = model.generate(
        ids, 20, temperature=1.0, generator=torch.Generator().manual_seed(5)
    ).tokens
    assert outputs[0] == "RO" + vocab.decode(sampled[0, 2:]) + "\n"


def test_generation_explorer_with_a_gru_and_bad_prompts(capsys):
    from transformer_lite.chapters.explorers import generation_explorer

    vocab = CharVocab.from_text(TEXT)
    torch.manual_seed(0)
    model = GRULanguageModel(GRUConfig(vocab_size=len(vocab), d_model=8))
    widget = generation_explorer(model, vocab, prompt="")
    capsys.readouterr()
    widget.f(prompt="the", temperature=0.5, top_k=0, length=30, seed=0)
    text = capsys.readouterr().out
    assert text.startswith("the") and len(text) == 3 + 30 + 1
    widget.f(prompt="JULIET<", temperature=0.5, top_k=0, length=30, seed=0)  # no J, I, L, <
    text = capsys.readouterr().out
    assert "no id for: '<', 'I', 'J', 'L'" in text
    widget.f(prompt="", temperature=0.5, top_k=0, length=30, seed=0)
    assert "at least one character" in capsys.readouterr().out

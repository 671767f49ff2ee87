"""Interactive explorers for live Jupyter (ipywidgets). They need a running kernel;
the built book shows static figures in their place.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..models.decoder_only import DecoderOnlyTransformer
from ..models.encoder_decoder import greedy_decode
from ..models.tagger import EncoderTagger, TaggerConfig, with_norm_first
from ..nn.masks import causal_mask, padding_mask
from ..nn.positional import sinusoidal_positional_encoding
from ..training.toy_tasks import BOS, EOS, ids_to_symbols, make_histogram_batch, symbols_to_ids
from .depth import layer_gradient_norms
from .interactive import rnn_lag_profile
from .viz import plot_attention, plot_mask

__all__ = [
    "attention_explorer",
    "mask_explorer",
    "positional_explorer",
    "gradient_norm_explorer",
    "reversal_explorer",
    "rnn_gradient_explorer",
    "generation_explorer",
]


def _text_input(value: str, description: str, multiline: bool = False, **size):
    """A text field that calls back when the reader presses Enter or leaves it, not at every key;
    ``size`` (width, height as CSS lengths) sets its box."""
    field = widgets.Textarea if multiline else widgets.Text
    layout = widgets.Layout(**size)
    return field(value=value, description=description, continuous_update=False, layout=layout)


def attention_explorer(
    encoder, tokenizer, text: str = "The cat sat on the mat because it was tired."
):
    """Type a sentence, pick a layer and a head, and see that head's attention weights.

    Args:
        encoder: a :class:`~transformer_lite.models.bert.BertEncoder` (e.g. from ``load_minilm()``).
        tokenizer: its :class:`~transformer_lite.pretrained.minilm.WordPieceTokenizer`.
        text: the initial sentence.

    Returns:
        An ``ipywidgets`` widget (display it as the last expression of a cell).
    """

    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads

    def show(text: str, layer: int, head: int) -> None:
        if not text.strip():
            return
        ids = torch.tensor([tokenizer.encode(text)])
        with torch.no_grad():
            _, attentions = encoder(ids)
        tokens = tokenizer.tokens(text)
        plot_attention(
            attentions[layer][0, head],
            tokens,
            title=f"layer {layer}, head {head}: where each token (row) looks",
        )
        plt.show()

    return widgets.interactive(
        show,
        text=_text_input(text, "sentence", width="520px"),
        layer=widgets.IntSlider(value=0, min=0, max=n_layers - 1, description="layer"),
        head=widgets.IntSlider(value=2, min=0, max=n_heads - 1, description="head"),
    )


def mask_explorer():
    """Choose L, S and a padding length; see the causal mask, the padding mask and their combination.

    Returns:
        An ``ipywidgets`` widget.
    """

    def show(L: int, S: int, real_keys: int) -> None:
        real_keys = min(real_keys, S)
        causal = causal_mask(L, S)
        pad = padding_mask(torch.arange(S)[None, :] < real_keys)[0, 0]  # (1, S): True for real keys
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), constrained_layout=True)
        plot_mask(causal, title=f"causal, bottom-right (S - L = {S - L})", ax=axes[0])
        plot_mask(pad.expand(L, S), title=f"padding: {real_keys} real keys", ax=axes[1])
        plot_mask(causal & pad, title="both (logical and)", ax=axes[2])
        plt.show()

    return widgets.interactive(
        show,
        L=widgets.IntSlider(value=4, min=1, max=12, description="L (queries)"),
        S=widgets.IntSlider(value=6, min=1, max=12, description="S (keys)"),
        real_keys=widgets.IntSlider(value=5, min=0, max=12, description="real keys"),
    )


def positional_explorer(max_position: int = 128):
    """Choose d_model, a position p and an offset k; see the sinusoidal encoding, rows p and p + k,
    and the dot product PE[p] . PE[p + k] over all offsets (the same curve for every p).

    Source of the encoding: Vaswani et al. (2017), Sec. 3.5
    (:func:`~transformer_lite.nn.positional.sinusoidal_positional_encoding`).

    Args:
        max_position: the largest position the sliders reach (p + k is capped there).

    Returns:
        An ``ipywidgets`` widget.
    """

    def show(d_model: int, p: int, k: int) -> None:
        q = min(max(p + k, 0), max_position)  # the second position, kept on the table
        # (P, D)
        pe = sinusoidal_positional_encoding(max_position + 1, d_model, dtype=torch.float64)
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), constrained_layout=True)
        im = axes[0].imshow(
            pe.numpy(), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
        )
        for row, colour in ((p, "black"), (q, "darkorange")):
            axes[0].axhline(row, color=colour, lw=1.5)
        axes[0].set(xlabel="feature", ylabel="position", title=f"PE, d_model = {d_model}")
        fig.colorbar(im, ax=axes[0], label="value")
        axes[1].plot(pe[p].numpy(), ".-", color="black", label=f"PE[{p}]")
        axes[1].plot(pe[q].numpy(), ".-", color="darkorange", label=f"PE[{q}]")
        axes[1].set(xlabel="feature", ylabel="value", title="the two rows: fast pairs on the left")
        axes[1].legend(loc="lower right")
        offsets = torch.arange(-p, max_position - p + 1)
        axes[2].plot(offsets.numpy(), (pe[p] @ pe.T).numpy(), color="#3b528b")
        axes[2].plot([q - p], [float(pe[p] @ pe[q])], "o", color="darkorange")
        axes[2].set(
            xlabel="offset k",
            ylabel="PE[p] · PE[p + k]",
            title=f"dot product at k = {q - p}: {float(pe[p] @ pe[q]):.3f}",
        )
        plt.show()

    return widgets.interactive(
        show,
        d_model=widgets.IntSlider(value=64, min=2, max=256, step=2, description="d_model"),
        p=widgets.IntSlider(value=10, min=0, max=max_position, description="position p"),
        k=widgets.IntSlider(value=5, min=-max_position, max=max_position, description="offset k"),
    )


def gradient_norm_explorer(vocab_size: int = 6, seq_len: int = 8):
    """Choose a depth, a width and a seed; see the gradient norm of every layer, post-norm against pre-norm.

    Both stacks hold the same weights (:func:`~transformer_lite.models.tagger.with_norm_first`); the loss is the
    cross-entropy of an untrained :class:`~transformer_lite.models.tagger.EncoderTagger` on one batch of the
    histogram task (:func:`~transformer_lite.training.toy_tasks.make_histogram_batch`).

    Returns:
        An ``ipywidgets`` widget.
    """

    def show(n_layers: int, d_model: int, seed: int) -> None:
        ids, counts = make_histogram_batch(
            64, seq_len, vocab_size, generator=torch.Generator().manual_seed(seed)
        )
        with torch.random.fork_rng():  # seeded weights, without touching the reader's random state
            torch.manual_seed(seed)
            config = TaggerConfig(
                vocab_size=vocab_size,
                n_classes=seq_len + 1,
                n_layers=n_layers,
                d_model=d_model,
                n_heads=4,
                d_ff=2 * d_model,
            )
            post = EncoderTagger(config)
        _, ax = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
        for model, name, marker in (
            (post, "post-norm", "o"),
            (with_norm_first(post), "pre-norm", "D"),
        ):
            loss = torch.nn.functional.cross_entropy(
                model(ids).logits.flatten(0, 1), counts.flatten()
            )
            loss.backward()
            ax.semilogy(
                range(1, n_layers + 1),
                layer_gradient_norms(model.encoder.layers),
                marker=marker,
                label=name,
            )
        ax.set_xlabel("layer (1 = input side)")
        ax.set_ylabel("gradient norm")
        ax.set_title(f"{n_layers} layers, d_model = {d_model}, at initialization")
        ax.legend()
        plt.show()

    return widgets.interactive(
        show,
        n_layers=widgets.IntSlider(value=12, min=1, max=64, description="layers"),
        d_model=widgets.Dropdown(options=[16, 32, 64, 128], value=32, description="d_model"),
        seed=widgets.IntSlider(value=0, min=0, max=9, description="seed"),
    )


def reversal_explorer(model, text: str = "abcdefg", layer: int = -1):
    """Type a sequence of letters ``a``-``j``; see the model's output and its cross-attention.

    Args:
        model: an :class:`~transformer_lite.models.encoder_decoder.EncoderDecoderTransformer` trained on
            :func:`~transformer_lite.training.toy_tasks.make_reversal_batch` (ten symbols).
        text: the initial sequence.
        layer: initial decoder layer whose cross-attention is shown (averaged over heads).

    Returns:
        An ``ipywidgets`` widget.
    """

    n_layers = model.config.n_decoder_layers
    max_src = model.config.max_len - 2

    def show(text: str, layer: int) -> None:
        text = "".join(c for c in text.lower() if "a" <= c <= "j")[:max_src]
        if not text:
            print("type letters a to j")
            return
        src = torch.tensor([symbols_to_ids(text)])  # (1, S)
        out = greedy_decode(model, src, max_len=len(text) + 1, bos_id=BOS, eos_id=EOS).tokens
        # the decoder inputs that produced the output
        dec_in = out[:, :-1] if int(out[0, -1]) == EOS else out
        with torch.no_grad():
            memory, _ = model.eval().encode(src)
            _, _, cross = model.decode(dec_in, memory)
        produced = ids_to_symbols(out[0, 1:].tolist())
        answer = "".join(produced[: produced.index("EOS")] if "EOS" in produced else produced)
        print(f"input: {text}   output: {answer}   expected: {text[::-1]}")
        plot_attention(
            cross[layer][0].mean(0),
            ids_to_symbols(dec_in[0].tolist()),
            list(text),
            title=f"decoder layer {layer + 1}, cross-attention (mean over heads)",
        )
        plt.show()

    return widgets.interactive(
        show,
        text=_text_input(text, "letters a-j"),
        layer=widgets.IntSlider(
            value=layer % n_layers, min=0, max=n_layers - 1, description="layer (0-based)"
        ),
    )


# --------------------------------------------------------------------------- chapter 6: RNN gradient reach


def rnn_gradient_explorer(hidden_size: int = 64):
    """Choose the spectral radius of ``W_hh``, the nonlinearity, the input scale and the lag.

    Draws ``||dh_T/dh_{T-k}||`` against the lag ``k`` (log scale) for an Elman RNN built by
    :func:`~transformer_lite.chapters.interactive.rnn_lag_profile`, with ``radius**k`` for comparison, and prints
    the mean derivative of the nonlinearity (1 = linear regime).

    Returns:
        An ``ipywidgets`` widget.
    """

    def show(spectral_radius: float, nonlinearity: str, input_scale: float, lag: int) -> None:
        lags, norms, mean_dphi = rnn_lag_profile(
            spectral_radius, input_scale, hidden_size, lag, nonlinearity
        )
        _, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
        ax.semilogy(lags, norms.clamp_min(1e-300), label=f"{nonlinearity} RNN")
        ax.semilogy(lags, spectral_radius ** lags.double(), "--", color="0.4", label="radius^lag")
        ax.set_xlabel("lag k (steps back from the last state)")
        ax.set_ylabel("||dh_T / dh_(T-k)||")
        ax.set_title(
            f"radius {spectral_radius:.2f}, inputs with std {input_scale:g}: "
            f"mean derivative {mean_dphi:.2f}"
        )
        ax.legend()
        plt.show()

    return widgets.interactive(
        show,
        spectral_radius=widgets.FloatSlider(
            value=1.0, min=0.0, max=2.0, step=0.05, description="radius"
        ),
        nonlinearity=widgets.Dropdown(
            options=["tanh", "relu"], value="tanh", description="nonlinearity"
        ),
        input_scale=widgets.FloatLogSlider(
            value=0.01, base=10, min=-3, max=1, step=0.25, description="input std"
        ),
        lag=widgets.IntSlider(value=60, min=1, max=200, description="steps T"),
    )


# --------------------------------------------------------------------------- chapter 8: generation


def generation_explorer(model, vocab, prompt: str = "ROMEO\n"):
    """Type a prompt, choose temperature, top-k, length and seed; read the characters the model writes next.

    Sampling as in :func:`~transformer_lite.models.generation.sample_next_token`: temperature 0 is greedy
    decoding, otherwise softmax(logits / T) restricted to the ``top_k`` most likely characters (0 = all).
    A :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` uses its key/value cache while the
    prompt plus the new characters fit in ``model.config.max_len`` positions, and otherwise generates without
    the cache, which slides a window of the last ``max_len`` characters. The draws use a
    ``torch.Generator`` seeded with ``seed``, so the same settings give the same text.

    Args:
        model: a :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` or
            :class:`~transformer_lite.models.recurrent_lm.GRULanguageModel` over ``vocab``'s ids.
        vocab: a :class:`~transformer_lite.training.data.CharVocab` (``encode(str) -> (N,) int64``, ``decode(ids) -> str``).
        prompt: the initial prompt.

    Returns:
        An ``ipywidgets`` widget; its callback prints the prompt followed by the generated characters, or a
        message when the prompt is empty or holds characters outside the vocabulary.
    """

    V = len(vocab)

    def show(prompt: str, temperature: float, top_k: int, length: int, seed: int) -> None:
        if not prompt:
            print("type a prompt of at least one character")
            return
        unknown = sorted({c for c in prompt if c not in vocab.stoi})
        if unknown:
            print(
                f"the prompt holds characters the model has no id for: {', '.join(map(repr, unknown))}; "
                f"it knows these {V}: {''.join(vocab.chars)!r}"
            )
            return
        ids = vocab.encode(prompt)[None]  # (1, P)
        options = dict(
            temperature=temperature,
            top_k=top_k or None,
            generator=torch.Generator().manual_seed(seed),
        )
        if isinstance(model, DecoderOnlyTransformer):
            # every position has an embedding: use the cache
            fits = ids.shape[1] + length <= model.config.max_len
            out = model.generate(ids, length, use_cache=fits, **options).tokens  # (1, P + length)
        else:
            out = model.generate(ids, length, **options).tokens  # (1, P + length)
        print(prompt + vocab.decode(out[0, ids.shape[1] :]))

    wide = dict(description_width="initial")  # long descriptions stay readable
    return widgets.interactive(
        show,
        prompt=_text_input(prompt, "prompt", multiline=True, width="520px", height="60px"),
        temperature=widgets.FloatSlider(
            value=0.8, min=0.0, max=2.0, step=0.05, description="temperature", style=wide
        ),
        top_k=widgets.IntSlider(value=0, min=0, max=V, description="top_k (0 = all)", style=wide),
        length=widgets.IntSlider(
            value=200, min=20, max=400, description="new characters", style=wide
        ),
        seed=widgets.IntSlider(value=0, min=0, max=99, description="seed", style=wide),
    )

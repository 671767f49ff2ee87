"""Exercise checkers of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
teacher forcing's shift; the decoder block and the encoder-decoder model (its three masks) as modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ...models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderTransformer
from ...nn.blocks import DecoderBlock
from ...nn.masks import causal_mask, padding_mask
from ...nn.normalization import LayerNorm
from . import _checking as checking

__all__ = [
    "check_shift_right",
    "check_decoder_block_module",
    "check_encoder_decoder_module",
]


# --------------------------------------------------------------------------- chapter 5: teacher forcing


@checking.checker("check_shift_right")
def check_shift_right(fn: Callable) -> None:
    """Check ``fn(tgt, bos_id) -> decoder_input``: teacher forcing's shift (Vaswani et al., 2017, Sec. 3.1).

    ``tgt (B, T)`` int64; expected ``(B, T)``: ``bos_id`` in column 0, then ``tgt[:, :-1]``.

    Raises:
        AssertionError: naming the likely mistake (shifted left, BOS appended instead of prepended, the last
            column kept so the length grows, BOS overwriting the first token).
    """
    g = checking.gen(5)
    for B, T, bos in [(3, 6, 1), (1, 1, 1), (4, 9, 7), (2, 2, 0)]:
        case = f"tgt of shape {(B, T)}, bos_id={bos}"
        tgt = torch.randint(3, 13, (B, T), generator=g)
        tgt[0, -1] = 0  # some padding at the end of the first row
        out = checking.call(fn, tgt.clone(), bos)
        ref = torch.cat([torch.full((B, 1), bos), tgt[:, :-1]], dim=1)
        if (
            isinstance(out, Tensor)
            and tuple(out.shape) == (B, T + 1)
            and torch.equal(out.long(), torch.cat([torch.full((B, 1), bos), tgt], dim=1))
        ):
            raise AssertionError(
                f"wrong decoder input for {case}. Likely mistake: the last target column was kept, "
                f"so the input is one longer than the target; drop it (tgt[:, :-1])"
            )
        checking.check_tensor(out, "decoder input", (B, T), case)
        if out.is_floating_point():
            raise AssertionError(
                f"decoder input for {case}: expected integer token ids, received dtype {out.dtype}"
            )
        if torch.equal(out.long(), ref):
            continue
        variants = {
            "shifted left: the decoder input starts with BOS and is the target moved one step to the RIGHT": torch.cat(
                [tgt[:, 1:], torch.full((B, 1), bos)], dim=1
            ),
            "BOS overwrites the first target token instead of being prepended": torch.cat(
                [torch.full((B, 1), bos), tgt[:, 1:]], dim=1
            ),
            "no shift: the decoder would see the token it must predict": tgt,
        }
        for mistake, value in variants.items():
            if torch.equal(out.long(), value):
                raise AssertionError(f"wrong decoder input for {case}. Likely mistake: {mistake}")
        bad = (out.long() != ref).nonzero()[0].tolist()
        raise AssertionError(
            f"wrong decoder input for {case}: entry {tuple(bad)} is {int(out[bad[0], bad[1]])}, "
            f"expected {int(ref[bad[0], bad[1]])}"
        )


# --------------------------------------------------------------------------- chapter 5: the decoder block as a module

_DECODER_BLOCK_NAMES = "self_attn, cross_attn, ff (linear1, linear2), norm1, norm2, norm3 (weight, bias), dropout1..dropout3"


def _random_norms(module: nn.Module, g: torch.Generator) -> None:
    """Give every LayerNorm in ``module`` a gain and shift that are not 1 and 0, so that a missing or
    misplaced norm shows."""
    with torch.no_grad():
        for norm in module.modules():
            if isinstance(norm, LayerNorm):
                D = norm.weight.shape[0]
                norm.weight.copy_(torch.rand(D, generator=g, dtype=torch.float64) + 0.5)
                norm.bias.copy_(torch.randn(D, generator=g, dtype=torch.float64) * 0.5)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _decoder_variant(block, x, memory, attn_mask, memory_mask, norm_first, mistake=None):
    """The forward pass of ``block`` (a :class:`DecoderBlock` in eval mode), or one classic mistake."""
    sa_mask = None if mistake == "self mask ignored" else attn_mask
    ca_mask = None if mistake == "memory mask ignored" else memory_mask
    if mistake == "masks swapped":
        sa_mask, ca_mask = memory_mask, attn_mask
    n1, n2, n3 = block.norm1, block.norm2, block.norm3
    if mistake == "one norm":
        n2 = n3 = n1
    mem = n2(memory) if mistake == "memory normalized" else memory

    def sa(h):
        return block.self_attn(h, h, h, attn_mask=sa_mask)[0]

    def ca(h):
        if mistake == "cross reads x":
            return block.cross_attn(h, h, h, attn_mask=ca_mask)[0]
        return block.cross_attn(h, mem, mem, attn_mask=ca_mask)[0]

    if mistake == "order swapped":
        norm_first = not norm_first
    sublayers = [(sa, n1), (ca, n2), (block.ff, n3)]
    if mistake == "cross first":
        sublayers[0], sublayers[1] = (ca, n1), (sa, n2)
    for k, (f, n) in enumerate(sublayers):
        skip = 0 if mistake == f"no residual {k}" else x
        if norm_first:
            if mistake == "residual of the normalized input":
                h = n(x)
                x = h + f(h)
            else:
                x = skip + f(n(x))
        elif mistake == "norm on the branch":
            x = x + n(f(x))
        else:
            x = n(skip + f(x))
    return n3(x) if norm_first and mistake == "extra norm" else x


_DECODER_MISTAKES = {
    False: {
        "pre-norm computed for norm_first=False: post-norm is norm(x + sublayer(x)), the norm after "
        "the sum": "order swapped",
        "norm in the wrong place: post-norm normalizes the SUM, norm(x + sublayer(x)), not the "
        "branch, x + norm(sublayer(x))": "norm on the branch",
    },
    True: {
        "post-norm computed for norm_first=True: pre-norm is x + sublayer(norm(x)), the norm on the "
        "sublayer's input only": "order swapped",
        "residual taken from the normalized input: add the sublayer output to x itself, not to "
        "norm(x)": "residual of the normalized input",
        "norm in the wrong place: pre-norm never normalizes the sum; the stack's final norm does "
        "that, once": "extra norm",
        "the memory was normalized too: in pre-norm, norm2 applies to the queries' side only; the "
        "memory is used as given (the encoder's final norm already normalized it)": "memory normalized",
    },
}
_DECODER_MISTAKES_BOTH = {
    "cross-attention keys and values from the decoder: cross_attn(h, memory, memory), the queries "
    "from the decoder, the keys and values from the encoder's memory": "cross reads x",
    "residual missing around the self-attention: its output is added to x": "no residual 0",
    "residual missing around the cross-attention: its output is added to x": "no residual 1",
    "residual missing around the feed-forward network: its output is added to x": "no residual 2",
    "one layer norm for all three sublayers: norm1 goes with the self-attention, norm2 with the "
    "cross-attention, norm3 with the feed-forward network": "one norm",
    "cross-attention before self-attention: the decoder first attends to its own prefix "
    "(self_attn), then to the source (cross_attn), then the feed-forward network": "cross first",
    "self-attention mask not applied: pass attn_mask (the causal and target padding mask) to "
    "self.self_attn": "self mask ignored",
    "memory mask not applied in the cross-attention: pass memory_mask (the source padding) to "
    "self.cross_attn": "memory mask ignored",
    "the two masks swapped: attn_mask (L, L) goes to the self-attention, memory_mask (L, S) to "
    "the cross-attention": "masks swapped",
}
# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_DECODER_EVAL_DROPOUT = (
    "dropout active in eval mode: call the modules self.dropout1..3 (they follow "
    "model.eval()), never F.dropout(..., training=True)"
)


def _variants(compute, mistakes: dict) -> dict:
    """``{message: compute(mistake)}``, leaving out a mistake that cannot run on these shapes."""
    out = {}
    for message, mistake in mistakes.items():
        try:
            out[message] = compute(mistake)
        except (ValueError, RuntimeError):  # e.g. an (L, S) mask in an (L, L) attention
            continue
    return out


def _block_case(g, B, L, S, D, lengths):
    """Target states, memory, and (if ``lengths``) the masks a decoder gets: causal and target
    padding for the self-attention, source padding for the cross-attention."""
    x = torch.randn(B, L, D, generator=g, dtype=torch.float64) * 1.5 + 0.3
    memory = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    if lengths is None:
        return x, memory, None, None
    tgt_len, src_len = lengths
    tgt_valid = torch.arange(L)[None, :] < torch.tensor(tgt_len)[:, None]  # (B, L)
    src_valid = torch.arange(S)[None, :] < torch.tensor(src_len)[:, None]  # (B, S)
    attn_mask = causal_mask(L, L) & padding_mask(tgt_valid)  # (B, 1, L, L)
    return x, memory, attn_mask, padding_mask(src_valid)  # (B, 1, 1, S)


@checking.checker("check_decoder_block_module")
def check_decoder_block_module(cls) -> None:
    """Check a module class ``cls(d_model, n_heads, d_ff, dropout=0.0, norm_first=False)`` computing
    :class:`~transformer_lite.nn.blocks.DecoderBlock`, post-norm and pre-norm.

    ``forward(x, memory, attn_mask=None, memory_mask=None)`` with target states ``x (B, L, D)`` and the
    encoder's ``memory (B, S, D)``: masked self-attention (``attn_mask``), cross-attention with queries
    from the decoder and keys and values from ``memory`` (``memory_mask``), feed-forward, each with its
    residual, norm and dropout placed as in the package's block; returns ``y (B, L, D)`` (or a tuple whose
    first element is ``y``). The package block's weights (with layer norms that are not the identity) are
    copied in; both run in eval mode in float64; outputs and the gradients with respect to ``x`` and
    ``memory`` must agree, for both values of ``norm_first``, with L != S, odd sizes, and a causal mask
    with target padding and a source padding mask of different lengths per example.

    Raises:
        AssertionError: naming the likely mistake (keys and values of the cross-attention from the
            decoder, a mask not applied or the two swapped, a residual missing, norm in the wrong place,
            post-norm and pre-norm swapped, one norm for all sublayers, the sublayers' order, dropout
            active in eval mode).
    """
    g = checking.gen(51)
    name = getattr(cls, "__name__", "your module")
    cases = [  # B, L, S, D, H, (target lengths, source lengths) or None
        (2, 5, 7, 8, 2, None),
        (1, 1, 3, 6, 3, None),
        (2, 5, 5, 10, 2, ([5, 3], [2, 5])),  # L = S: two swapped masks still fit
        (3, 4, 6, 12, 4, ([4, 2, 3], [6, 3, 1])),
        (3, 6, 3, 9, 3, ([6, 1, 4], [3, 2, 1])),
    ]
    for norm_first in (False, True):
        for B, L, S, D, H, lengths in cases:
            d_ff = 2 * D + 1
            case = (
                f"{name}({D}, {H}, {d_ff}, dropout=0.2, norm_first={norm_first}) on x of shape "
                f"{(B, L, D)}, memory of shape {(B, S, D)}"
                + (", causal and padding masks" if lengths else ", no masks")
            )
            student = checking.build(
                cls, (D, H, d_ff), {"dropout": 0.2, "norm_first": norm_first}, seed=D
            )
            with torch.random.fork_rng():
                torch.manual_seed(D)
                ref = DecoderBlock(D, H, d_ff, dropout=0.2, norm_first=norm_first).double()
            _random_norms(ref, g)
            checking.load_reference(
                student, ref, "check_decoder_block_module", _DECODER_BLOCK_NAMES
            )
            student.eval(), ref.eval()
            x, memory, attn_mask, memory_mask = _block_case(g, B, L, S, D, lengths)
            masks = {"attn_mask": attn_mask, "memory_mask": memory_mask}
            with torch.no_grad():
                y = _first(checking.call(student, x.clone(), memory.clone(), **masks))
                checking.check_tensor(y, "output", (B, L, D), case)
                again = _first(checking.call(student, x.clone(), memory.clone(), **masks))
                expected = ref(x, memory, **masks)[0]
                checking.check_eval_repeatable(y, again, expected, case, _DECODER_EVAL_DROPOUT)
                if not checking.close(y, expected):
                    mistakes = {**_DECODER_MISTAKES[norm_first], **_DECODER_MISTAKES_BOTH}
                    variants = _variants(
                        lambda m: _decoder_variant(
                            ref, x, memory, attn_mask, memory_mask, norm_first, m
                        ),
                        mistakes,
                    )
                    raise checking.diagnose(y, variants, case, "output", expected)
            upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
            checking.compare_input_grads(
                student,
                ref,
                (x, memory),
                ("target states x", "memory"),
                upstream,
                case,
                **masks,
            )


# --------------------------------------------------------------------------- chapter 5: the model and its three masks

_MODEL_NAMES = (
    "src_embed, tgt_embed, pos, encoder (the package's TransformerEncoder), decoder (an nn.ModuleList "
    "of your decoder blocks), decoder_norm (a LayerNorm if norm_first, else None) and out_proj"
)


def _student_key(ref_key: str) -> str:
    """The name of the package model's parameter ``ref_key`` in the learner's model: the package keeps
    its decoder blocks and final norm in ``decoder.layers`` and ``decoder.norm``, the learner's model in
    ``decoder`` (a ModuleList) and ``decoder_norm``."""
    if ref_key.startswith("decoder.layers."):
        return "decoder." + ref_key[len("decoder.layers.") :]
    if ref_key.startswith("decoder.norm."):
        return "decoder_norm." + ref_key[len("decoder.norm.") :]
    return ref_key


def _model_variant(model, src, tgt, src_valid, tgt_valid, mistake=None):
    """The logits of ``model`` (an :class:`EncoderDecoderTransformer` in eval mode) with its masks built
    by hand, or with one classic mistake."""
    D, S, L = model.config.d_model, src.shape[1], tgt.shape[1]
    scale = 1.0 if mistake == "not scaled" else math.sqrt(D)

    def embed(ids, table):
        x = table(ids) * scale  # (B, len, D)
        return x if mistake == "no positions" else model.pos(x)

    src_mask = None if src_valid is None else padding_mask(src_valid)  # (B, 1, 1, S)
    tgt_pad = None if tgt_valid is None else padding_mask(tgt_valid)  # (B, 1, 1, L)
    causal = causal_mask(L, L)  # (L, L)
    if mistake in ("all inverted", "padding inverted"):
        src_mask = None if src_mask is None else ~src_mask
        tgt_pad = None if tgt_pad is None else ~tgt_pad
    if mistake in ("all inverted", "causal inverted"):
        causal = ~causal
    self_mask = causal if tgt_pad is None else causal & tgt_pad  # (B, 1, L, L)
    if mistake == "no causal":
        self_mask = tgt_pad
    elif mistake == "no target padding":
        self_mask = causal
    enc_mask = None if mistake == "no encoder padding" else src_mask
    mem_mask = None if mistake == "no memory padding" else src_mask
    if mistake in ("causal cross", "causal cross, top-left"):
        c = (
            causal_mask(L, S)
            if mistake == "causal cross"
            else torch.ones(L, S, dtype=torch.bool).tril()
        )
        mem_mask = c if src_mask is None else c & src_mask
    x = embed(src, model.src_embed)
    if mistake == "encoder norm skipped":
        for layer in model.encoder.layers:
            x = layer(x, attn_mask=enc_mask)[0]
        memory = x
    else:
        memory = model.encoder(x, attn_mask=enc_mask)[0]  # (B, S, D)
    if mistake == "memory from embeddings":
        memory = embed(src, model.src_embed)
    h = embed(tgt, model.tgt_embed)
    for layer in model.decoder.layers:
        h = layer(h, memory, attn_mask=self_mask, memory_mask=mem_mask)[0]
    if model.decoder.norm is not None and mistake != "no final norm":
        h = model.decoder.norm(h)
    return model.out_proj(h)  # (B, L, V)


_MODEL_MISTAKES = {
    "causal mask missing on the decoder's self-attention: its mask is causal_mask(L, L) AND the "
    "target padding, so that position t never sees a later target token": "no causal",
    "causal mask applied to the cross-attention: every target position may read the whole "
    "(unpadded) source, so the cross-attention gets the source padding mask only": "causal cross",
    "causal mask applied to the cross-attention (top-left aligned): every target position may read "
    "the whole (unpadded) source, so the cross-attention gets the source padding mask only": "causal cross, top-left",
    "source padding mask not applied in the cross-attention: pass padding_mask(src_padding) as the "
    "decoder blocks' memory_mask, so no target position reads a padded source position": "no memory padding",
    "source padding mask not applied in the encoder: pass padding_mask(src_padding) as the "
    "encoder's attn_mask": "no encoder padding",
    "target padding mask missing: the decoder's self-attention mask is causal AND the target "
    "padding (here only the rows of padded positions change, which the loss ignores, but the "
    "package masks them)": "no target padding",
    "mask polarity inverted: in this package True = may attend (src_padding and tgt_padding are "
    "True at real tokens), the opposite of torch's nn.Transformer masks": "all inverted",
    "mask polarity inverted in the padding masks: src_padding and tgt_padding are True at real "
    "tokens, and padding_mask keeps True = may attend": "padding inverted",
    "mask polarity inverted in the causal mask: True = may attend, so the causal mask is "
    "lower-triangular (causal_mask(L, L) or torch.ones(L, L, dtype=torch.bool).tril())": "causal inverted",
    "embeddings not scaled: multiply the embedding by sqrt(d_model) before adding the positions "
    "(Vaswani et al., Sec. 3.4)": "not scaled",
    "positions missing: self.pos(...) adds the sinusoidal encoding to the scaled embeddings": "no positions",
    "the decoder's final norm skipped: a pre-norm stack ends with decoder_norm": "no final norm",
    "the encoder's final norm skipped: call self.encoder(x, attn_mask=...) (a pre-norm encoder ends "
    "with its norm), not its layers one by one": "encoder norm skipped",
    "the decoder reads the source embeddings instead of the encoder's output (the memory)": "memory from embeddings",
}
# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_MODEL_EVAL_DROPOUT = (
    "dropout active in eval mode (self.pos and the blocks' dropout modules follow "
    "model.eval(); never F.dropout(..., training=True))"
)


def _ids(g, B, n, vocab, lengths):
    """``(B, n)`` random ids in 1..vocab-1, 0 (a padding id) after each row's length, and the
    ``(B, n)`` bool marker of real tokens (None when every row is full)."""
    ids = torch.randint(1, vocab, (B, n), generator=g)
    if lengths is None:
        return ids, None
    valid = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]  # (B, n)
    return ids.masked_fill(~valid, 0), valid


@checking.checker("check_encoder_decoder_module")
def check_encoder_decoder_module(cls) -> None:
    """Check a module class ``cls(config)`` (a :class:`~transformer_lite.models.encoder_decoder.EncoderDecoderConfig`)
    computing :class:`~transformer_lite.models.encoder_decoder.EncoderDecoderTransformer` with the
    learner's decoder blocks.

    ``forward(src_ids (B, S), tgt_ids (B, L), src_padding=None, tgt_padding=None)`` returns logits
    ``(B, L, tgt_vocab_size)``; the paddings are ``(B, len)`` bool, ``True`` = a real token. Expected: the
    embeddings scaled by ``sqrt(d_model)`` plus positions (``self.pos``), the encoder with the source
    padding mask, the decoder blocks with the causal and target padding mask on the self-attention and the
    source padding mask on the cross-attention, ``decoder_norm`` if pre-norm, then ``out_proj``. The
    package model's weights (layer norms not the identity) are copied in; both run in eval mode in float64;
    logits and the gradients of every parameter must agree, post-norm and pre-norm, with L != S, odd sizes,
    and padded batches whose sources have different lengths. The learner's decoder blocks are checked
    first, inside the model.

    Raises:
        AssertionError: naming the likely mistake (causal mask missing, or applied to the cross-attention;
            a padding mask not applied; mask polarity inverted; embeddings not scaled; positions or a
            final norm missing; the decoder reading the embeddings), or that a decoder block does not
            compute what the package's computes (make it pass ``check_decoder_block_module`` first).
    """
    g = checking.gen(52)
    name = getattr(cls, "__name__", "your module")
    cases = [  # B, S, L, D, H, source lengths, target lengths
        (1, 5, 1, 6, 2, None, None),
        (3, 7, 5, 12, 3, [7, 4, 2], [5, 3, 5]),
        (2, 3, 6, 10, 2, [3, 1], [6, 2]),
    ]
    for norm_first in (False, True):
        for B, S, L, D, H, src_len, tgt_len in cases:
            config = EncoderDecoderConfig(
                src_vocab_size=11,
                tgt_vocab_size=13,
                d_model=D,
                n_heads=H,
                n_encoder_layers=2,
                n_decoder_layers=2,
                d_ff=2 * D + 1,
                dropout=0.1,
                max_len=16,
                norm_first=norm_first,
            )
            case = (
                f"{name}(config) with d_model={D}, n_heads={H}, norm_first={norm_first}, on src_ids of "
                f"shape {(B, S)} and tgt_ids of shape {(B, L)}"
                + (
                    f", source lengths {src_len}, target lengths {tgt_len}"
                    if src_len
                    else ", no padding"
                )
            )
            student = checking.build(cls, (config,), {}, seed=D)
            with torch.random.fork_rng():
                torch.manual_seed(D)
                ref = EncoderDecoderTransformer(config).double()
            _random_norms(ref, g)
            weights = {_student_key(k): v for k, v in ref.state_dict().items()}
            checking.load_reference(
                student, _StateDict(weights), "check_encoder_decoder_module", _MODEL_NAMES
            )
            student.eval(), ref.eval()
            src, src_valid = _ids(g, B, S, 11, src_len)
            tgt, tgt_valid = _ids(g, B, L, 13, tgt_len)
            paddings = {"src_padding": src_valid, "tgt_padding": tgt_valid}
            with torch.no_grad():
                _check_decoder_layers(student, ref, g, B, L, S, D, src_valid, tgt_valid, case)
                out = _first(checking.call(student, src.clone(), tgt.clone(), **paddings))
                checking.check_tensor(out, "logits", (B, L, 13), case)
                again = _first(checking.call(student, src.clone(), tgt.clone(), **paddings))
                expected = ref(src, tgt, **paddings).logits
                checking.check_eval_repeatable(out, again, expected, case, _MODEL_EVAL_DROPOUT)
                if not checking.close(out, expected):
                    variants = _variants(
                        lambda m: _model_variant(ref, src, tgt, src_valid, tgt_valid, m),
                        _MODEL_MISTAKES,
                    )
                    raise checking.diagnose(out, variants, case, "logits", expected)
            _compare_parameter_grads(student, ref, (src, tgt), paddings, g, case)


class _StateDict:
    """Stands for a module in :func:`load_reference`: its ``state_dict()`` is the given mapping."""

    def __init__(self, weights: dict) -> None:
        self.weights = weights

    def state_dict(self) -> dict:
        return self.weights


def _check_decoder_layers(student, ref, g, B, L, S, D, src_valid, tgt_valid, case) -> None:
    """Each of the learner's decoder blocks, inside the model, computes the package's block."""
    layers = getattr(student, "decoder", None)
    lengths = None
    if src_valid is not None:
        lengths = (tgt_valid.sum(1).tolist(), src_valid.sum(1).tolist())
    x, memory, attn_mask, memory_mask = _block_case(g, B, L, S, D, lengths)
    for i, layer in enumerate(ref.decoder.layers):
        got = _first(
            checking.call(
                layers[i], x.clone(), memory.clone(), attn_mask=attn_mask, memory_mask=memory_mask
            )
        )
        if not checking.close(
            got, layer(x, memory, attn_mask=attn_mask, memory_mask=memory_mask)[0]
        ):
            raise AssertionError(
                f"{case}: decoder block {i} of your model does not compute what the package's "
                "DecoderBlock computes with the same weights; make MyDecoderBlock pass "
                "check_decoder_block_module first"
            )


def _compare_parameter_grads(student, ref, ids, paddings, g, case) -> None:
    """The gradient of ``sum(logits * R)`` with respect to every parameter must agree (the logits were
    already checked)."""
    params = dict(student.named_parameters())
    upstream = None
    for module in (student, ref):
        module.zero_grad(set_to_none=True)
        out = _first(checking.call(module, *(t.clone() for t in ids), **paddings))
        if upstream is None:
            upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
        if out.requires_grad:
            out.backward(upstream)
    for key, p in ref.named_parameters():
        mine = params.get(_student_key(key))
        expected = p.grad if p.grad is not None else torch.zeros_like(p)
        if mine is None or mine.grad is None:
            if (expected != 0).any():
                raise AssertionError(
                    f"no gradient reached {_student_key(key)} for {case}: the logits are right, but "
                    "forward cuts the graph; do not use .detach(), .data, torch.no_grad() or numpy "
                    "inside forward"
                )
            continue
        if not checking.close(mine.grad, expected):
            err = (mine.grad - expected).abs().max().item()
            raise AssertionError(
                f"wrong gradient of {_student_key(key)} for {case} (largest difference {err:.3g}), "
                "although the logits are right. Likely mistake: part of forward is cut from the graph "
                "(.detach(), .data, torch.no_grad()), or a tensor is modified in place after it was used"
            )

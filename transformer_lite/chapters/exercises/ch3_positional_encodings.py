"""Exercise checkers of chapter 3, ``notebooks/03_positional_encodings.ipynb``:
the sinusoidal encoding and rotary position embedding, as functions and as modules (a
positional-encoding module, and self-attention with rotary positions and a key/value cache).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ...nn.attention import MultiHeadAttention, scaled_dot_product_attention
from ...nn.masks import causal_mask
from ...nn.positional import RotaryEmbedding, SinusoidalPositionalEncoding, apply_rotary
from . import _checking as checking
from ._checking import ATOL

__all__ = [
    "reference_sinusoidal_positional_encoding",
    "check_sinusoidal_positional_encoding",
    "check_sinusoidal_module",
    "check_rotary",
    "check_rotary_attention_module",
]


# --------------------------------------------------------------------------- sinusoidal encoding


def reference_sinusoidal_positional_encoding(
    seq_len: int,
    d_model: int,
    base: float = 10000.0,
    start: int = 0,
    layout: str = "interleaved",
    exponent: str = "2i",
) -> Tensor:
    """The fixed encoding of Vaswani et al. (2017), Sec. 3.5, and the variants the checker recognises.

    ``PE[pos, 2i] = sin(pos / base^(2i/d_model))``, ``PE[pos, 2i+1] = cos(pos / base^(2i/d_model))``;
    for odd ``d_model`` the last feature is a sine. Returns float64 ``(seq_len, d_model)``.
    """
    pos = torch.arange(start, start + seq_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    rate = two_i / 2 if exponent == "i" else two_i
    angles = pos / base ** (rate / d_model)  # (L, ceil(D/2))
    n_cos = d_model // 2
    pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles[:, :n_cos])
    elif layout == "swapped":
        pe[:, 0::2] = torch.cos(angles)
        pe[:, 1::2] = torch.sin(angles[:, :n_cos])
    else:  # "concatenated": all sines, then all cosines
        n_sin = angles.shape[1]
        pe[:, :n_sin] = torch.sin(angles)
        pe[:, n_sin:] = torch.cos(angles[:, :n_cos])
    return pe


@checking.checker("check_sinusoidal_positional_encoding")
def check_sinusoidal_positional_encoding(fn: Callable) -> None:
    """Check ``fn(seq_len, d_model) -> (seq_len, d_model)``, the interleaved sinusoidal encoding (Vaswani et al., 2017).

    Raises:
        AssertionError: naming the likely mistake (sin/cos halves concatenated, wrong base, positions starting
            at 1, sin and cos swapped, exponent i/d instead of 2i/d).
    """
    for seq_len, d_model in [(6, 8), (50, 16), (9, 7), (30, 33), (1, 4)]:
        case = f"seq_len={seq_len}, d_model={d_model}"
        pe = checking.call(fn, seq_len, d_model)
        checking.check_tensor(pe, "encoding", (seq_len, d_model), case)
        ref = reference_sinusoidal_positional_encoding(seq_len, d_model)
        if checking.close(pe, ref):
            continue
        r = reference_sinusoidal_positional_encoding
        variants = {
            "sin and cos halves concatenated instead of interleaved: even features 2i are sines, odd 2i+1 cosines": r(
                seq_len, d_model, layout="concatenated"
            ),
            "sin and cos swapped: even features 2i must be sines and odd features 2i+1 cosines": r(
                seq_len, d_model, layout="swapped"
            ),
            "off-by-one position: positions start at 0": r(seq_len, d_model, start=1),
            "wrong base: the wavelengths grow as 10000^(2i/d_model)": r(
                seq_len, d_model, base=1000.0
            ),
            "wrong base (100000): the wavelengths grow as 10000^(2i/d_model)": r(
                seq_len, d_model, base=1e5
            ),
            "wrong exponent: use 2i/d_model (i indexes feature pairs), not i/d_model": r(
                seq_len, d_model, exponent="i"
            ),
        }
        raise checking.diagnose(pe, variants, case, "encoding", ref)


# --------------------------------------------------------------------------- rotary position embedding


@checking.checker("check_rotary")
def check_rotary(fn: Callable) -> None:
    """Check ``fn(x, positions) -> x rotated``: RoPE (Su et al., RoFormer, Eq. 34), interleaved pairs.

    ``x`` has shape ``(..., L, d)`` with ``d`` even and ``positions`` shape ``(L,)`` (int64). Pair ``j`` =
    features ``(2j, 2j + 1)`` of row ``m`` is rotated by the angle ``positions[m] * theta_j`` with
    ``theta_j = 10000^(-2j/d)``: ``(a, b) -> (a cos - b sin, a sin + b cos)``. The result has the shape of ``x``.
    Cases include a single row, positions that do not start at 0, and ``d = 6`` (an odd number of pairs).

    Raises:
        AssertionError: naming the likely mistake (pairs (j, j + d/2) instead of (2j, 2j + 1), rotation in the
            wrong direction, positions off by one, positions argument ignored, exponent j/d instead of
            2j/d, no rotation at all).
    """
    g = checking.gen(17)
    # The first case has several rows and starts at 7, so "positions ignored" (rows at 0..L-1) and "no
    # rotation" differ there; with a single row at position 0 they would coincide.
    for batch, L, d, start in [((2, 3), 4, 6, 7), ((2,), 5, 8, 0), ((), 1, 4, 3), ((1,), 6, 16, 2)]:
        case = f"x of shape {(*batch, L, d)}, positions {start}..{start + L - 1}"
        x = torch.randn(*batch, L, d, generator=g, dtype=torch.float64)
        positions = torch.arange(start, start + L)
        out = checking.call(fn, x.clone(), positions.clone())
        checking.check_tensor(out, "output", x.shape, case)
        ref = apply_rotary(x, positions)
        if checking.close(out, ref):
            continue
        variants = {
            "wrong pairing: rotate features (2j, 2j+1) together, not (j, j + d/2) (that is the GPT-NeoX "
            "'rotate_half' layout)": apply_rotary(x, positions, interleaved=False),
            "wrong sign: rotated the other way; (a, b) -> (a cos - b sin, a sin + b cos)": apply_rotary(
                x, -positions
            ),
            "positions off by one (one too far): use the positions as given": apply_rotary(
                x, positions + 1
            ),
            "positions off by one (one short): use the positions as given": apply_rotary(
                x, positions - 1
            ),
            "positions argument ignored: row m sits at positions[m], not at m": apply_rotary(
                x, torch.arange(L)
            ),
            "wrong exponent: theta_j = 10000^(-2j/d) (j indexes pairs), not 10000^(-j/d)": apply_rotary(
                x, positions, base=100.0
            ),
            "no rotation: the output equals the input": x,
        }
        raise checking.diagnose(out, variants, case, "output", ref)


# --------------------------------------------------------------------------- the module exercises: shared


# --------------------------------------------------------------------------- a positional-encoding module

# (B, L, d_model, max_len, offset): odd widths, B != L, a single row after 9 positions (a decoding
# step), the last rows of the table (offset + L == max_len)
_PE_CASES = [
    (2, 5, 8, 16, 0),
    (3, 4, 7, 12, 3),
    (1, 1, 6, 20, 9),
    (2, 6, 12, 10, 4),
    (4, 3, 5, 8, 0),
]
_BATCH_AXIS = (
    "positions read from the batch axis: x is batch-first (B, L, D), its positions run along axis 1 "
    "(L = x.shape[1]); the PyTorch tutorial's module takes (L, B, D) and slices pe[:x.size(0)]"
)
_TABLE = (
    "the table is wrong ({}): make my_sinusoidal pass check_sinusoidal_positional_encoding first"
)
# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_PE_EVAL_DROPOUT = (
    "dropout active in eval mode: call the module self.dropout (it follows model.eval()), "
    "never F.dropout(..., training=True)"
)


def _pe_call(module, x: Tensor, offset: int):
    """``module(x)`` (``offset`` 0, the default) or ``module(x, offset=offset)``; a broadcasting error named."""
    try:
        return checking.call(module, x, **({"offset": offset} if offset else {}))
    except AssertionError as exc:
        if "must match the size" in str(exc):
            raise AssertionError(f"{exc} Likely mistake: {_BATCH_AXIS}") from exc
        raise


def _pe_variants(x: Tensor, offset: int) -> dict[str, Tensor]:
    """The output of each classic mistake of the module in eval mode, for ``x (B, L, D)`` in float64."""
    B, L, D = x.shape
    x = x.double()
    rows = reference_sinusoidal_positional_encoding
    pe = rows(L, D, start=offset)  # (L, D)
    return {
        "offset ignored: the L rows of x sit at positions offset .. offset + L - 1; add "
        "PE[offset : offset + L], not PE[:L]": x + rows(L, D),
        _BATCH_AXIS: x + rows(B, D)[:, None, :],  # sequence b gets PE[b] at every position
        "x scaled by sqrt(d_model) before the encoding is added: this module only adds (the "
        "embedding's own scaling, Vaswani et al., Sec. 3.4, is not part of it)": x * math.sqrt(D)
        + pe,
        "the encoding multiplied into x: it is added, x + PE": x * pe,
        "the encoding was not added: return dropout(x + PE[offset : offset + L])": x,
        "only the encoding returned: add it to x": pe.expand(B, L, D),
        _TABLE.format("sin and cos halves concatenated instead of interleaved"): x
        + rows(L, D, start=offset, layout="concatenated"),
        _TABLE.format("sin and cos swapped"): x + rows(L, D, start=offset, layout="swapped"),
        _TABLE.format("exponent i/d_model instead of 2i/d_model"): x
        + rows(L, D, start=offset, exponent="i"),
    }


@checking.checker("check_sinusoidal_module")
def check_sinusoidal_module(cls) -> None:
    """Check a module class ``cls(d_model, max_len, dropout=0.0)`` computing
    :class:`~transformer_lite.nn.positional.SinusoidalPositionalEncoding`.

    ``forward(x, offset=0)`` returns ``dropout(x + PE[offset : offset + L])`` for ``x (B, L, d_model)``
    (Vaswani et al., 2017, Sec. 3.5 and 5.4), in the dtype of ``x``. The table is not learned: the
    package's module saves nothing in its state_dict, so the learner's must save nothing either (a
    buffer registered with ``persistent=False``). Cases: odd widths, ``B != L``, an offset (a decoding
    step of one row after nine), the last rows of the table; float64 in eval mode (outputs and input
    gradients), train mode with the package's random seed (the same entries dropped), and a float32
    input.

    Raises:
        AssertionError: naming the likely mistake (offset ignored, positions read from the batch axis,
            x scaled by sqrt(d_model), the encoding multiplied or not added, dropout active in eval mode,
            missing or in the wrong place, a float64 result for a float32 input, the table saved in the
            state_dict, a wrong table).
    """
    g = checking.gen(31)
    name = getattr(cls, "__name__", "your module")
    for B, L, D, max_len, offset in _PE_CASES:
        case = f"{name}({D}, {max_len}, dropout=0.3) on x of shape {(B, L, D)}, offset={offset}"
        student = checking.build(cls, (D, max_len), {"dropout": 0.3}, seed=D)
        ref = SinusoidalPositionalEncoding(D, max_len, dropout=0.3)
        saved, expected_keys = sorted(student.state_dict()), sorted(ref.state_dict())
        if saved != expected_keys:
            raise AssertionError(
                f"{case}: your module's state_dict holds {saved}, the package's holds "
                f"{expected_keys or 'nothing'}. Likely mistake: the table saved in the state_dict: it is "
                "computed, not learned; register it with register_buffer(..., persistent=False), as the "
                "stub does, so that a model's saved weights load into either module"
            )
        student.double().eval(), ref.double().eval()
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        with torch.no_grad():
            y = _pe_call(student, x.clone(), offset)
            checking.check_tensor(y, "output", (B, L, D), case)
            again = _pe_call(student, x.clone(), offset)
            expected = ref(x, offset=offset)
            checking.check_eval_repeatable(y, again, expected, case, _PE_EVAL_DROPOUT)
            if not checking.close(y, expected):
                raise checking.diagnose(y, _pe_variants(x, offset), case, "output", expected)
            # train mode: the same seed must drop the same entries of the sum as the package
            student.train(), ref.train()
            pe = reference_sinusoidal_positional_encoding(L, D, start=offset)
            with torch.random.fork_rng():
                torch.manual_seed(0)
                y_train = _pe_call(student, x.clone(), offset)
                torch.manual_seed(0)
                expected_train = ref(x, offset=offset)
                torch.manual_seed(0)
                x_dropped = F.dropout(x, p=0.3, training=True) + pe
                torch.manual_seed(0)
                pe_dropped = x + F.dropout(pe, p=0.3, training=True)
            if not checking.close(y_train, expected_train):
                variants = {
                    "dropout never applied in training mode: return self.dropout(x + PE[...])": expected,
                    "dropout on x before the encoding is added: drop the sum, dropout(x + PE) "
                    "(Vaswani et al., 2017, Sec. 5.4)": x_dropped,
                    "dropout on the table only: drop the sum, dropout(x + PE)": pe_dropped,
                }
                raise checking.diagnose(
                    y_train, variants, f"{case}, train mode", "output", expected_train
                )
        student.eval(), ref.eval()
        upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        checking.compare_grads(
            student, ref, x, upstream, case, **({"offset": offset} if offset else {})
        )
    _check_float32(cls, name, g)


def _check_float32(cls, name: str, g: torch.Generator) -> None:
    """The last case of :func:`check_sinusoidal_module`: a float32 input gives a float32 output."""
    B, L, D, max_len = 2, 5, 8, 16
    case = f"{name}({D}, {max_len}) on a float32 x of shape {(B, L, D)} (the module as constructed)"
    student = checking.build(cls, (D, max_len), {}, seed=D).eval()
    x = torch.randn(B, L, D, generator=g)
    with torch.no_grad():
        y = _pe_call(student, x.clone(), 0)
        checking.check_tensor(y, "output", (B, L, D), case)
        if y.dtype != x.dtype:
            raise AssertionError(
                f"{case}: the output has dtype {y.dtype}. Likely mistake: the table's dtype promoted the "
                "sum: cast the rows with .to(x.dtype); the package's module returns the dtype of x (a "
                "float64 table would turn the whole model's activations into float64)"
            )
        expected = SinusoidalPositionalEncoding(D, max_len)(x)
        if not checking.close(y, expected):
            raise checking.diagnose(y, _pe_variants(x, 0), case, "output", expected)


# --------------------------------------------------------------------------- rotary positions in attention

_ROPE_NAMES = "q_proj, k_proj, v_proj, out_proj (each nn.Linear(d_model, d_model), with a bias)"


def _rope_variant(m: MultiHeadAttention, x, past_kv, mask, is_causal, mistake=None):
    """``m`` (``n_kv_heads == n_heads``, a rotary embedding of base 10000, interleaved) written out step
    by step, or with one classic mistake. Returns ``(output, weights, (keys, values))``."""
    B, L, D = x.shape
    H, d = m.n_heads, m.d_head
    S_past = 0 if past_kv is None else past_kv[0].shape[-2]
    positions = torch.arange(L) if mistake == "no offset" else torch.arange(S_past, S_past + L)
    if mistake == "wrong direction":
        positions = -positions
    base = {"exponent j/d": 100.0, "exponent d_model": 10000.0 ** (d / D)}.get(mistake, 10000.0)

    def rotate(t, pos=positions):
        return apply_rotary(t, pos, base=base, interleaved=mistake != "rotate half")

    def split(t):  # (B, L, D) -> (B, H, L, d_head)
        return t.view(B, L, H, d).transpose(1, 2)

    q, k, v = m.q_proj(x), m.k_proj(x), m.v_proj(x)
    if mistake == "before split":  # pairs of the whole d_model-wide vector, one frequency set
        q, k = rotate(q), rotate(k)
    q, k, v = split(q), split(k), split(v)
    if mistake not in ("before split", "no rotation", "cache rotated again"):
        q = q if mistake == "k only" else rotate(q)
        k = k if mistake == "q only" else rotate(k)
        v = rotate(v) if mistake == "values rotated" else v
    if past_kv is not None:
        k, v = torch.cat((past_kv[0], k), dim=-2), torch.cat((past_kv[1], v), dim=-2)
    if mistake == "cache rotated again":  # all keys turned at 0 .. S-1, cached ones twice
        q, k = rotate(q), rotate(k, torch.arange(k.shape[-2]))
    S = k.shape[-2]
    if mistake == "top-left" and is_causal:  # torch's is_causal: query i sees keys 0 .. i
        top_left = torch.ones(L, S, dtype=torch.bool).tril()
        mask, is_causal = (top_left if mask is None else mask & top_left), False
    heads, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    merged = heads.transpose(1, 2).reshape(B, L, D)  # (B, H, L, d_head) -> (B, L, D)
    return m.out_proj(merged), w, (k, v)


_NO_ROTATION = "the positions never enter; turn q and k with your my_rotary"
_ROPE_MISTAKES = {
    "values rotated too: RoPE turns the queries and keys only (the values carry content, and their "
    "weighted sum would mix vectors turned by different angles)": "values rotated",
    "wrong pairing: rotate features (2j, 2j+1) of each head together, as the package and your my_rotary "
    "do, not (j, j + d_head/2) (GPT-NeoX's 'rotate_half' layout)": "rotate half",
    "rotated before the split into heads: each head turns its own d_head features, pairs "
    "j = 0 .. d_head/2 - 1 at theta_j = 10000^(-2j/d_head); split first, then rotate": "before split",
    "wrong exponent: theta_j = 10000^(-2j/d_head) (j indexes pairs), not 10000^(-j/d_head)": "exponent j/d",
    "frequencies from d_model: theta_j = 10000^(-2j/d_head), with the width of one head": "exponent d_model",
    "positions not offset with a cache: the L new rows sit at positions S_past .. S_past + L - 1, "
    "S_past = past_kv[0].shape[-2]": "no offset",
    "only the queries rotated: rotate the keys too, so that the score of q_m and k_n depends on m - n": "q only",
    "only the keys rotated: rotate the queries too, so that the score of q_m and k_n depends on m - n": "k only",
    "rotation in the wrong direction (sin and cos swapped, or the sines' signs flipped): "
    "(a, b) -> (a cos - b sin, a sin + b cos)": "wrong direction",
    "the cached keys rotated again: past_kv holds keys already turned to their positions; rotate only "
    "the new keys (at S_past .. S_past + L - 1), then concatenate": "cache rotated again",
    "causal mask aligned top-left (torch's is_causal): with a cache the L new queries are the last L of "
    "the S positions; align it bottom-right, as tl.causal_mask(L, S) and is_causal of "
    "tl.scaled_dot_product_attention do": "top-left",
    "no rotation: " + _NO_ROTATION: "no rotation",
}

# (B, S_past, L, d_model, n_heads, mask)
_ROPE_CASES = [
    (2, 0, 5, 12, 3, None),
    (2, 0, 6, 12, 2, "causal"),  # d_head 6: an odd number of pairs
    (3, 0, 4, 8, 2, "bool"),
    (2, 5, 1, 12, 3, "causal"),  # a decoding step: one new token after a cache of 5
    (3, 4, 3, 12, 2, "causal"),  # three new tokens after 4: the causal mask aligned bottom-right
    (2, 3, 2, 12, 3, "bool"),  # a cache and an (L, S) bool mask
]
_SHIFT = 7


def _rope_mask(kind, L: int, S: int, g: torch.Generator):
    """``(attn_mask, is_causal)`` for a case: a random bool ``(L, S)`` mask, the causal flag, or neither."""
    if kind == "bool":
        mask = torch.rand(L, S, generator=g) < 0.6
        mask[:, 0], mask[:, -1] = True, False  # every row has an allowed and a forbidden key
        return mask, False
    return None, kind == "causal"


def _shift_gap(student, B: int, L: int, D: int, H: int, g: torch.Generator) -> float:
    """How much the attention weights of causal self-attention change when every position moves by
    ``_SHIFT``: the same ``x`` once at positions ``0 .. L-1``, once after a cache of ``_SHIFT`` random
    keys and values that the mask hides, at ``_SHIFT .. _SHIFT + L - 1``. Zero with RoPE."""
    x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
    past = tuple(torch.randn(B, H, _SHIFT, D // H, generator=g, dtype=torch.float64) for _ in "kv")
    hidden = torch.cat((torch.zeros(L, _SHIFT, dtype=torch.bool), causal_mask(L, L)), dim=1)
    with torch.no_grad():
        w0 = checking.call(student, x.clone(), is_causal=True)[1]
        w1 = checking.call(student, x.clone(), past_kv=past, attn_mask=hidden)[1]
    return (w1[..., _SHIFT:].double() - w0.double()).abs().max().item()


def _not_relative(case: str, gap: float, what: str) -> AssertionError:
    return AssertionError(
        f"wrong {what} for {case}, and your attention weights change by up to {gap:.3g} when every "
        f"position moves by {_SHIFT} (the same x after {_SHIFT} cached keys that the mask hides). "
        "Likely mistake: positions enter other than as rotations: with RoPE the score of q_m and k_n "
        "depends on m - n only; turn the queries and the keys of each head by the same rule, each by "
        "its own position, and add nothing to x"
    )


@checking.checker("check_rotary_attention_module")
def check_rotary_attention_module(cls) -> None:
    """Check a module class ``cls(d_model, n_heads)``: self-attention whose queries and keys are turned
    by RoPE (Su et al., RoFormer, Eq. 34) in every head, with a key/value cache, as
    :class:`~transformer_lite.nn.attention.MultiHeadAttention` computes with
    ``rotary=RotaryEmbedding(d_head)`` (base 10000, interleaved pairs ``(2j, 2j+1)``).

    ``forward(x, past_kv=None, attn_mask=None, is_causal=False)`` returns ``(output, weights,
    (keys, values))``: ``(B, L, d_model)``, ``(B, H, L, S)`` and the keys (rotated) and values of all
    ``S = S_past + L`` positions, each ``(B, H, S, d_head)``. The ``L`` new rows sit at positions
    ``S_past .. S_past + L - 1``; the causal mask is aligned bottom-right. The package's weights are copied
    in (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``); in float64 the outputs, weights, cache and the
    gradients with respect to ``x`` and every parameter must agree, for ``d_model=12, n_heads=3`` and
    ``n_heads=2`` (an odd number of pairs per head), a causal and a bool mask, a single new token after a
    cache, and several new tokens after a cache. Last, the relative-position property: shifting every
    position by a constant leaves the attention weights unchanged.

    Raises:
        AssertionError: naming the likely mistake (values rotated, rotate-half pairing, rotated before the
            split, exponent j/d or frequencies from d_model, positions not offset with a cache, q or k
            alone rotated, rotation in the wrong direction (sin and cos swapped), cached keys rotated
            again, a cache of unrotated keys or of the new positions only, a top-left causal mask, no
            rotation, positions that are not relative, gradients cut).
    """
    g = checking.gen(37)
    name = getattr(cls, "__name__", "your module")
    for B, S_past, L, D, H, kind in _ROPE_CASES:
        S, d = S_past + L, D // H
        mask, is_causal = _rope_mask(kind, L, S, g)
        case = f"{name}({D}, {H}) on x of shape {(B, L, D)}" + (
            f" after a cache of {S_past} positions" if S_past else ""
        )
        case += {"causal": ", is_causal=True", "bool": f", bool mask {(L, S)}"}.get(
            kind, ", no mask"
        )
        student = checking.build(cls, (D, H), {}, seed=D + H)
        with torch.random.fork_rng():
            torch.manual_seed(D + H)
            ref = MultiHeadAttention(D, H, rotary=RotaryEmbedding(d)).double().eval()
        checking.load_reference(student, ref, "check_rotary_attention_module", _ROPE_NAMES)
        student.eval()
        x = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        past = None
        if S_past:
            with torch.no_grad():
                x_past = torch.randn(B, S_past, D, generator=g, dtype=torch.float64)
                past = ref(x_past, is_causal=True)[2]
        kwargs = {"attn_mask": mask, "is_causal": is_causal}
        with torch.no_grad():
            result = checking.call(
                student, x.clone(), **checking.fresh({"past_kv": past, **kwargs})
            )
            if not isinstance(result, tuple) or len(result) != 3:
                raise AssertionError(
                    f"for {case}: expected a tuple (output, weights, (keys, values)), as "
                    f"tl.MultiHeadAttention returns, received {type(result).__name__}"
                )
            out, w, present = result
            checking.check_cached_result(out, w, present, (B, H, L, S), (B, L, D), case)
            ref_out, ref_w, (ref_k, ref_v) = ref(x, cache=past, **kwargs)
            variants = {
                msg: _rope_variant(ref, x, past, mask, is_causal, v)
                for msg, v in _ROPE_MISTAKES.items()
            }
            for what, got, expected, i in (("weights", w, ref_w, 1), ("output", out, ref_out, 0)):
                if checking.close(got, expected):
                    continue
                matched = {m: r[i] for m, r in variants.items() if checking.close(got, r[i])}
                if not matched:  # no known mistake: is the attention still relative?
                    try:
                        gap = _shift_gap(student, B, L, D, H, checking.gen(41))
                    except AssertionError:  # the module fails on a cache: say what was wrong here
                        gap = 0.0
                    if gap > ATOL:
                        raise _not_relative(case, gap, what)
                raise checking.diagnose(
                    got, {m: r[i] for m, r in variants.items()}, case, what, expected
                )
            _check_cache(
                present, ref_k, ref_v, variants["no rotation: " + _NO_ROTATION][2][0], S_past, case
            )
        upstream = torch.randn(B, L, D, generator=g, dtype=torch.float64)
        checking.compare_grads(student, ref, x, upstream, case, cache=past, **kwargs)
    B, L, D, H = 2, 5, 12, 3
    gap = _shift_gap(student, B, L, D, H, checking.gen(41))
    if gap > ATOL:
        raise _not_relative(f"{name}({D}, {H}) on x of shape {(B, L, D)}", gap, "weights")


def _check_cache(
    present, ref_k: Tensor, ref_v: Tensor, unrotated_k: Tensor, S_past: int, case: str
):
    """The returned ``(keys, values)`` must be the package's: all S positions, keys after RoPE."""
    keys, values = present
    B, H, S, d = ref_k.shape
    for what, got in (("keys", keys), ("values", values)):
        if isinstance(got, Tensor) and S_past and tuple(got.shape) == (B, H, S - S_past, d):
            raise AssertionError(
                f"wrong cached {what} for {case}: shape {tuple(got.shape)}. Likely mistake: only the new "
                f"positions returned: the cache holds the {what} of all S = S_past + L positions, the "
                "past ones and the new ones, concatenated along the positions (dim=-2)"
            )
        checking.check_tensor(got, f"cached {what}", (B, H, S, d), case)
    if not checking.close(keys, ref_k):
        if checking.close(keys, unrotated_k):
            raise AssertionError(
                f"wrong cached keys for {case}. Likely mistake: the cache holds the keys before "
                "rotation: return them rotated, as the package's cache does (each key is turned once, at "
                "its own position, and never again)"
            )
        raise checking.diagnose(keys, {}, case, "cached keys", ref_k)
    if not checking.close(values, ref_v):
        raise checking.diagnose(values, {}, case, "cached values", ref_v)

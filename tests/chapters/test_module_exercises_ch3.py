"""The module exercises of chapter 3: check_sinusoidal_module and check_rotary_attention_module.

Oracle: learner-style ``nn.Module`` classes written here from the formulas (Vaswani et al., 2017,
Sec. 3.5 and 5.4; Su et al., RoFormer, Eq. 34), independently of the checkers' own variant helpers.
A correct class and the package's own module (same interface) must pass and print "all checks
passed"; each deliberately wrong class, one classic mistake apiece, must be rejected with an
AssertionError naming that mistake; a stub whose ``forward`` raises NotImplementedError (or whose
given constructor calls a function still raising it) must print "not implemented yet".
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

import transformer_lite as tl
from tests.chapters.learners import INF, AttentionProjections, CacheOfNewPositionsOnly
from tests.conftest import CheckerCases, module_exercise_tests
from transformer_lite.chapters.exercises.ch3_positional_encodings import (
    check_rotary_attention_module,
    check_sinusoidal_module,
)

CASES = CheckerCases()


def table(max_len, d_model):
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...), float64 ``(max_len, d_model)``."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for p in range(max_len):
        for f in range(d_model):
            angle = p / 10000 ** (2 * (f // 2) / d_model)
            pe[p, f] = math.sin(angle) if f % 2 == 0 else math.cos(angle)
    return pe


# =========================================================================== sinusoidal module
# cls(d_model, max_len, dropout=0.0) with a dropout submodule and the table as a non-persistent buffer;
# forward(x (B, L, D), offset=0) -> dropout(x + PE[offset : offset + L]), dtype of x.


@CASES.passes(check_sinusoidal_module)
class PEReference(nn.Module):
    def __init__(self, d_model, max_len, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", table(max_len, d_model), persistent=False)

    def rows(self, x, offset):
        return self.pe[offset : offset + x.shape[1]].to(x.dtype)  # (L, D)

    def forward(self, x, offset=0):
        return self.dropout(x + self.rows(x, offset))


CASES.passes(check_sinusoidal_module)(tl.SinusoidalPositionalEncoding)


@CASES.named(check_sinusoidal_module, "offset ignored")
class PEOffsetIgnored(PEReference):
    def rows(self, x, offset):
        return super().rows(x, 0)


@CASES.named(check_sinusoidal_module, "positions read from the batch axis")
class PETutorialSequenceFirst(PEReference):
    def rows(self, x, offset):  # the tutorial's pe[:x.size(0)], its table shaped (max_len, 1, D)
        return self.pe[: x.size(0)].unsqueeze(1).to(x.dtype)


@CASES.named(check_sinusoidal_module, "positions read from the batch axis")
class PESliceByBatch(PEReference):
    def rows(self, x, offset):  # a (max_len, D) table sliced by the batch size: a shape error
        return self.pe[: x.size(0)].to(x.dtype)


@CASES.named(check_sinusoidal_module, "x scaled by sqrt(d_model)")
class PEScaled(PEReference):
    def forward(self, x, offset=0):
        return self.dropout(x * math.sqrt(x.shape[-1]) + self.rows(x, offset))


@CASES.named(check_sinusoidal_module, "the encoding multiplied into x")
class PEMultiplied(PEReference):
    def forward(self, x, offset=0):
        return self.dropout(x * self.rows(x, offset))


@CASES.named(check_sinusoidal_module, "dropout active in eval mode")
class PEAlwaysDropping(PEReference):
    def forward(self, x, offset=0):
        return F.dropout(x + self.rows(x, offset), p=self.dropout.p, training=True)


@CASES.named(check_sinusoidal_module, "dropout never applied in training mode")
class PENoDropout(PEReference):
    def forward(self, x, offset=0):
        return x + self.rows(x, offset)


@CASES.named(check_sinusoidal_module, "dropout on x before the encoding is added")
class PEDropoutBeforeTheSum(PEReference):
    def forward(self, x, offset=0):
        return self.dropout(x) + self.rows(x, offset)


@CASES.named(check_sinusoidal_module, "the table's dtype promoted the sum")
class PEFloat64Table(PEReference):
    def rows(self, x, offset):
        return self.pe[offset : offset + x.shape[1]]  # no .to(x.dtype)


@CASES.named(check_sinusoidal_module, "the table saved in the state_dict")
class PEPersistentTable(PEReference):
    def __init__(self, d_model, max_len, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        self.register_buffer("pe", table(max_len, d_model))  # persistent: saved


@CASES.named(check_sinusoidal_module, "the table is wrong (sin and cos halves concatenated")
class PEConcatenatedTable(PEReference):
    def __init__(self, d_model, max_len, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        pe = table(max_len, d_model)
        self.register_buffer("pe", torch.cat((pe[:, 0::2], pe[:, 1::2]), 1), persistent=False)


@CASES.named(check_sinusoidal_module, "no gradient reached the input x")
class PEDetached(PEReference):
    def forward(self, x, offset=0):
        return super().forward(x.detach(), offset)


def test_sinusoidal_checker_tries_offsets_odd_widths_train_mode_and_float32():
    seen = []

    class Recording(PEReference):
        def forward(self, x, offset=0):
            seen.append((tuple(x.shape), offset, self.training, x.dtype))
            return super().forward(x, offset)

    check_sinusoidal_module(Recording)
    assert any(offset > 0 and shape[1] == 1 for shape, offset, _, _ in seen)  # a decoding step
    assert any(shape[2] % 2 == 1 for shape, _, _, _ in seen)
    assert any(training for _, _, training, _ in seen)
    assert any(dtype == torch.float32 for *_, dtype in seen)


# =========================================================================== rotary attention module
# cls(d_model, n_heads) with q_proj, k_proj, v_proj, out_proj; forward(x (B, L, D), past_kv=None,
# attn_mask=None, is_causal=False) -> (output (B, L, D), weights (B, H, L, S), (keys, values) of all S).


@CASES.passes(check_rotary_attention_module)
class RopeReference(AttentionProjections):
    """Self-attention with RoPE (chapter 1's projections and heads), one step per method so that a
    mistake can replace one."""

    base = 10000.0

    def theta(self, d):  # (d/2,): theta_j = base^(-2j/d)
        return self.base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)

    def turn(self, a, b, cos, sin):
        return a * cos - b * sin, a * sin + b * cos

    def rotate(self, t, positions):  # pairs (2j, 2j+1) of the last dimension
        angles = positions.to(torch.float64)[:, None] * self.theta(t.shape[-1])  # (L, d/2)
        ra, rb = self.turn(t[..., 0::2], t[..., 1::2], angles.cos(), angles.sin())
        return torch.stack((ra, rb), dim=-1).flatten(-2)

    def positions(self, S_past, L):
        return torch.arange(S_past, S_past + L)

    def heads(self, x, positions):
        q, k, v = (self.split(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.rotate(q, positions), self.rotate(k, positions), v

    def extend(self, past_kv, k, v):
        if past_kv is None:
            return k, v
        return torch.cat((past_kv[0], k), dim=-2), torch.cat((past_kv[1], v), dim=-2)

    def causal(self, L, S):  # bottom-right: query i sits at position S - L + i
        return torch.ones(L, S, dtype=torch.bool).tril(S - L)

    def attend(self, q, k, v, mask, is_causal):
        L, S = q.shape[-2], k.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if is_causal:
            scores = scores.masked_fill(~self.causal(L, S), -INF)
        if mask is not None:
            scores = scores.masked_fill(~mask, -INF)
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    def present(self, past_kv, k, v, k_attended, v_attended):
        return k_attended, v_attended

    def forward(self, x, past_kv=None, attn_mask=None, is_causal=False):
        S_past = 0 if past_kv is None else past_kv[0].shape[-2]
        q, k, v = self.heads(x, self.positions(S_past, x.shape[1]))
        k_all, v_all = self.extend(past_kv, k, v)
        out, weights = self.attend(q, k_all, v_all, attn_mask, is_causal)
        return self.out_proj(self.merge(out)), weights, self.present(past_kv, k, v, k_all, v_all)


@CASES.passes(check_rotary_attention_module)
class PackageRotaryAttention(tl.MultiHeadAttention):
    """The package's rotary self-attention (biases as nn.Linear's default) under the exercise's call."""

    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads, rotary=tl.RotaryEmbedding(d_model // n_heads))

    def forward(self, x, past_kv=None, attn_mask=None, is_causal=False):
        cache = None if past_kv is None else tl.KeyValue(*past_kv)
        return super().forward(x, attn_mask=attn_mask, is_causal=is_causal, cache=cache)


@CASES.named(check_rotary_attention_module, "values rotated too")
class RopeValuesRotated(RopeReference):
    def heads(self, x, positions):
        q, k, v = super().heads(x, positions)
        return q, k, self.rotate(v, positions)


@CASES.named(check_rotary_attention_module, "wrong pairing")
class RopeRotateHalf(RopeReference):
    def rotate(self, t, positions):  # GPT-NeoX: pairs (j, j + d/2)
        d = t.shape[-1]
        angles = positions.to(torch.float64)[:, None] * self.theta(d)
        ra, rb = self.turn(t[..., : d // 2], t[..., d // 2 :], angles.cos(), angles.sin())
        return torch.cat((ra, rb), dim=-1)


@CASES.named(check_rotary_attention_module, "rotated before the split into heads")
class RopeBeforeSplit(RopeReference):
    def heads(self, x, positions):
        q = self.split(self.rotate(self.q_proj(x), positions))
        k = self.split(self.rotate(self.k_proj(x), positions))
        return q, k, self.split(self.v_proj(x))


@CASES.named(check_rotary_attention_module, "wrong exponent")
class RopeExponentJOverD(RopeReference):
    def theta(self, d):
        return self.base ** (-torch.arange(d // 2, dtype=torch.float64) / d)


@CASES.named(check_rotary_attention_module, "frequencies from d_model")
class RopeFrequenciesOfTheModel(RopeReference):
    def theta(self, d):
        D = self.q_proj.in_features
        return self.base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / D)


@CASES.named(check_rotary_attention_module, "positions not offset with a cache")
class RopeNoOffset(RopeReference):
    def positions(self, S_past, L):
        return torch.arange(L)


@CASES.named(check_rotary_attention_module, "only the queries rotated")
class RopeQueriesOnly(RopeReference):
    def heads(self, x, positions):
        q, _, v = super().heads(x, positions)
        return q, self.split(self.k_proj(x)), v


@CASES.named(check_rotary_attention_module, "only the keys rotated")
class RopeKeysOnly(RopeReference):
    def heads(self, x, positions):
        _, k, v = super().heads(x, positions)
        return self.split(self.q_proj(x)), k, v


@CASES.named(check_rotary_attention_module, "rotation in the wrong direction")
class RopeWrongDirection(RopeReference):
    def turn(self, a, b, cos, sin):
        return a * cos + b * sin, -a * sin + b * cos


@CASES.named(check_rotary_attention_module, "wrong direction (sin and cos swapped")
class RopeSinCosSwapped(RopeReference):
    def turn(self, a, b, cos, sin):
        return a * sin - b * cos, a * cos + b * sin


@CASES.named(check_rotary_attention_module, "the cached keys rotated again")
class RopeRotatesEveryKey(RopeReference):
    """Keeps keys unrotated and turns all S of them at 0 .. S-1 at every step."""

    def heads(self, x, positions):
        q, _, v = super().heads(x, positions)
        return q, self.split(self.k_proj(x)), v

    def extend(self, past_kv, k, v):
        k, v = super().extend(past_kv, k, v)
        return self.rotate(k, torch.arange(k.shape[-2])), v


@CASES.named(check_rotary_attention_module, "the cache holds the keys before rotation")
class RopeCachesUnrotatedKeys(RopeReference):
    def heads(self, x, positions):
        self.unrotated_keys = self.split(self.k_proj(x))
        return super().heads(x, positions)

    def present(self, past_kv, k, v, k_all, v_all):
        return self.extend(past_kv, self.unrotated_keys, v)


@CASES.named(check_rotary_attention_module, "only the new positions returned")
class RopeCachesNewOnly(CacheOfNewPositionsOnly, RopeReference):
    """The next step's keys would be rotated at the right positions but miss the earlier ones."""


@CASES.named(check_rotary_attention_module, "causal mask aligned top-left")
class RopeTopLeftCausal(RopeReference):
    def causal(self, L, S):  # torch's is_causal
        return torch.ones(L, S, dtype=torch.bool).tril()


@CASES.named(check_rotary_attention_module, "no rotation: the positions never enter")
class RopeNoRotation(RopeReference):
    def rotate(self, t, positions):
        return t


@CASES.named(check_rotary_attention_module, "positions enter other than as rotations")
class RopeSinusoidAddedToX(RopeReference):
    """Absolute positions inside attention: the sinusoid added to x, no rotation."""

    def heads(self, x, positions):
        x = x + table(int(positions.max()) + 1, x.shape[-1])[positions].to(x.dtype)
        return tuple(self.split(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))


@CASES.named(check_rotary_attention_module, "part of forward is cut from the graph")
class RopeDetachedKeys(RopeReference):
    def heads(self, x, positions):
        q, k, v = super().heads(x, positions)
        return q, k.detach(), v


@CASES.named(check_rotary_attention_module, "no gradient reached the parameter q_proj.weight")
class RopeFrozenQueryWeights(RopeReference):
    def heads(self, x, positions):
        _, k, v = super().heads(x, positions)
        q = self.split(F.linear(x, self.q_proj.weight.detach(), self.q_proj.bias))
        return self.rotate(q, positions), k, v


@CASES.named(
    check_rotary_attention_module, match=r"could not copy the package's weights .*q_proj, k_proj"
)
class RopeOtherNames(RopeReference):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.add_module("W_o", self.out_proj)  # the paper's name
        del self.out_proj


@CASES.named(
    check_rotary_attention_module, match=r"expected a tuple \(output, weights, \(keys, values\)\)"
)
class RopeNoCacheReturned(RopeReference):
    def forward(self, x, past_kv=None, attn_mask=None, is_causal=False):
        return super().forward(x, past_kv, attn_mask, is_causal)[:2]


def test_rotary_checker_tries_a_decoding_step_masks_and_shifted_positions():
    seen = []

    class Recording(RopeReference):
        def forward(self, x, past_kv=None, attn_mask=None, is_causal=False):
            S_past = 0 if past_kv is None else past_kv[0].shape[-2]
            seen.append((x.shape[1], S_past, attn_mask, is_causal, self.n_heads, self.d_head))
            return super().forward(x, past_kv, attn_mask, is_causal)

    check_rotary_attention_module(Recording)
    assert any(L == 1 and S_past > 0 and causal for L, S_past, _, causal, *_ in seen)
    assert any(L > 1 and S_past > 0 and causal for L, S_past, _, causal, *_ in seen)
    assert any(m is not None and m.dtype == torch.bool for _, _, m, *_ in seen)
    assert any((H, d) == (3, 4) for *_, H, d in seen) and any(d % 4 == 2 for *_, d in seen)
    # the relative-position property: a mask that hides a cache in front of the same tokens
    assert any(m is not None and not m[:, 0].any() for _, S_past, m, *_ in seen if S_past)


def test_rope_reference_is_the_package():
    """The test's own oracle agrees with tl.MultiHeadAttention with copied weights (float64)."""
    torch.manual_seed(0)
    ours = RopeReference(12, 2).double()
    package = PackageRotaryAttention(12, 2).double()
    package.load_state_dict(ours.state_dict())
    x, x_next = (
        torch.randn(2, 5, 12, dtype=torch.float64),
        torch.randn(2, 3, 12, dtype=torch.float64),
    )
    out, w, cache = ours(x, is_causal=True)
    out_p, w_p, cache_p = package(x, is_causal=True)
    torch.testing.assert_close((out, w, cache), (out_p, w_p, cache_p))
    torch.testing.assert_close(
        ours(x_next, past_kv=cache, is_causal=True), package(x_next, past_kv=cache, is_causal=True)
    )


# =========================================================================== stubs and random state


class PEStubTable(PEReference):
    """The student edition's given constructor while my_sinusoidal is still a stub."""

    def __init__(self, d_model, max_len, dropout=0.0):
        raise NotImplementedError("exercise: replace this line with your code")


test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone = (
    module_exercise_tests(
        stubs=[
            (check_sinusoidal_module, PEReference),
            (check_sinusoidal_module, PEStubTable),
            (check_rotary_attention_module, RopeReference),
        ],
        references=[
            (check_sinusoidal_module, PEReference),
            (check_rotary_attention_module, RopeReference),
        ],
    )
)
test_right_answers_pass, test_mistakes_are_named = CASES.tests()

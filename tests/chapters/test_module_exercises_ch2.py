"""The module exercise of chapter 2: check_causal_self_attention_module.

Oracle: learner-style ``nn.Module`` classes written here from the formulas (Vaswani et al., 2017,
Sec. 3.2.2 and 3.2.3, with the key/value cache of incremental decoding and the bottom-right causal
mask; the projections and the split into heads are chapter 1's, from tests/chapters/learners.py),
independently of the checker's variant helpers, and the package's own
``tl.MultiHeadAttention`` under the same call (``forward(x, past_kv=None)``). A second right class
computes its output with torch's ``F.scaled_dot_product_attention`` and torch's own bottom-right bias
(``causal_lower_right``), the twin of the mask. The right classes must pass and print "all checks
passed"; each deliberately wrong class, one classic mistake apiece, must be rejected with an
AssertionError naming that mistake; a stub whose ``forward`` raises NotImplementedError must print
"not implemented yet".
"""

import math

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

import transformer_lite as tl
from tests.chapters.learners import (
    AttentionProjections,
    CacheOfNewPositionsOnly,
    MergeWithoutTranspose,
    SplitWithoutTranspose,
)
from tests.conftest import (
    CheckerCases,
    assert_leaves_global_random_state,
    assert_not_implemented,
    assert_prints_not_implemented,
    stub_of,
)
from transformer_lite.chapters.exercises import check_causal_self_attention_module

CASES = CheckerCases()
check = check_causal_self_attention_module

# cls(d_model, n_heads) with q_proj, k_proj, v_proj, out_proj;
# forward(x (B, L, D), past_kv=None) -> (output (B, L, D), weights (B, H, L, S), (keys, values))


@CASES.passes(check)
class CausalReference(AttentionProjections):
    """One method per step, so that a mistake can replace one."""

    def append(self, past_kv, k, v):
        if past_kv is None:
            return k, v
        return torch.cat((past_kv[0], k), dim=2), torch.cat((past_kv[1], v), dim=2)

    def mask(self, L, S):  # query i at position S - L + i sees keys 0 .. S - L + i
        return torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)

    def scale(self):
        return 1.0 / math.sqrt(self.d_head)

    def weights(self, scores, mask):
        return torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)

    def attend(self, q, k, v, mask):
        w = self.weights(q @ k.transpose(-2, -1) * self.scale(), mask)  # (B, H, L, S)
        return w @ v, w

    def present(self, past_kv, k, v, k_all, v_all):
        return k_all, v_all

    def forward(self, x, past_kv=None):
        q, k, v = self.split(self.q_proj(x)), self.split(self.k_proj(x)), self.split(self.v_proj(x))
        k_all, v_all = self.append(past_kv, k, v)
        L, S = q.shape[2], k_all.shape[2]
        heads, w = self.attend(q, k_all, v_all, self.mask(L, S))
        return self.out_proj(self.merge(heads)), w, self.present(past_kv, k, v, k_all, v_all)


@CASES.passes(check)
class CausalTorchTwin(CausalReference):
    """The output from torch's fused attention with torch's bottom-right causal bias."""

    def attend(self, q, k, v, mask):
        L, S = q.shape[2], k.shape[2]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(L, S))
        return out, super().attend(q, k, v, mask)[1]


@CASES.passes(check)
class PackageCausal(tl.MultiHeadAttention):
    """The package's cached attention under the exercise's call."""

    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)

    def forward(self, x, past_kv=None):
        cache = None if past_kv is None else tl.KeyValue(*past_kv)
        return super().forward(x, cache=cache, is_causal=True)


@CASES.passes(check)
class CausalPackageMask(CausalReference):
    def mask(self, L, S):
        return tl.causal_mask(L, S)


@CASES.named(check, "aligned top-left (the is_causal=True trap")
class CausalTopLeft(CausalReference):
    def mask(self, L, S):  # torch's is_causal=True
        return torch.ones(L, S, dtype=torch.bool).tril()


@CASES.named(check, "aligned top-left (the is_causal=True trap")
class CausalTorchIsCausal(CausalReference):
    """torch's fused attention with is_causal=True, weights computed to match it."""

    def attend(self, q, k, v, mask):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        top_left = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
        return out, super().attend(q, k, v, top_left)[1]


@CASES.named(check, "inverted mask polarity")
class CausalInverted(CausalReference):
    def weights(self, scores, mask):
        return torch.softmax(scores.masked_fill(mask, -math.inf), dim=-1)


@CASES.named(check, "mask applied after the softmax")
class CausalAfterSoftmax(CausalReference):
    def weights(self, scores, mask):
        return torch.softmax(scores, dim=-1) * mask


@CASES.named(check, "no causal mask")
class CausalNoMask(CausalReference):
    def weights(self, scores, mask):
        return torch.softmax(scores, dim=-1)


@CASES.named(check, "scores not scaled")
class CausalNoScale(CausalReference):
    def scale(self):
        return 1.0


@CASES.named(check, "scaled by sqrt(d_model)")
class CausalScaleDModel(CausalReference):
    def scale(self):
        return 1.0 / math.sqrt(self.d_head * self.n_heads)


@CASES.named(check, "diagonal excluded")
class CausalNoDiagonal(CausalReference):
    def weights(self, scores, mask):
        L, S = mask.shape
        strict = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L - 1)
        return torch.softmax(scores.masked_fill(~strict, -math.inf), dim=-1).nan_to_num(0.0)


@CASES.named(check, "concatenated on the wrong dimension")
class CausalCatHeads(CausalReference):
    def append(self, past_kv, k, v):
        if past_kv is None:
            return k, v
        return torch.cat((past_kv[0], k), dim=1), torch.cat((past_kv[1], v), dim=1)


@CASES.named(check, "concatenated on the wrong dimension")
class CausalCatFeatures(CausalReference):
    def append(self, past_kv, k, v):
        if past_kv is None:
            return k, v
        return torch.cat((past_kv[0], k), dim=-1), torch.cat((past_kv[1], v), dim=-1)


@CASES.named(check, "new keys not appended / cache returned stale")
class CausalStaleCache(CausalReference):
    def present(self, past_kv, k, v, k_all, v_all):
        return past_kv if past_kv is not None else (k, v)


@CASES.named(check, "new keys not appended / cache returned stale")
class CausalPastOnly(CausalReference):
    """Attends to the cache without appending the new keys and values."""

    def append(self, past_kv, k, v):
        return (k, v) if past_kv is None else past_kv

    def mask(self, L, S):
        return torch.ones(L, S, dtype=torch.bool) if S != L else super().mask(L, S)


@CASES.named(check, "only the new positions returned as the cache")
class CausalNewOnly(CacheOfNewPositionsOnly, CausalReference):
    """The cache returned after a decoding step holds one position."""


@CASES.named(check, "cache not read")
class CausalCacheNotRead(CausalReference):
    def append(self, past_kv, k, v):
        return k, v

    def present(self, past_kv, k, v, k_all, v_all):
        return super().append(past_kv, k, v)


@CASES.named(check, "keys and values swapped")
class CausalSwappedCache(CausalReference):
    def present(self, past_kv, k, v, k_all, v_all):
        return v_all, k_all

    def append(self, past_kv, k, v):  # reads its own swapped cache back the right way round
        if past_kv is None:
            return k, v
        return torch.cat((past_kv[1], k), dim=2), torch.cat((past_kv[0], v), dim=2)


@CASES.named(check, "heads split in the wrong order")
class CausalSplitOrder(SplitWithoutTranspose, MergeWithoutTranspose, CausalReference):
    """Split into heads and merged back by reshapes alone."""


@CASES.named(check, "heads merged without undoing the transpose")
class CausalMergeOrder(MergeWithoutTranspose, CausalReference):
    """Split right, merged back by a reshape alone."""


@CASES.named(check, "kept before the split into heads")
class CausalCacheBeforeSplit(CausalReference):
    def forward(self, x, past_kv=None):
        k_in, v_in = self.k_proj(x), self.v_proj(x)  # (B, L, D)
        if past_kv is not None:
            k_in, v_in = torch.cat((past_kv[0], k_in), 1), torch.cat((past_kv[1], v_in), 1)
        q, k, v = self.split(self.q_proj(x)), self.split(k_in), self.split(v_in)
        heads, w = self.attend(q, k, v, self.mask(q.shape[2], k.shape[2]))
        return self.out_proj(self.merge(heads)), w, (k_in, v_in)


@CASES.named(check, "no gradient reached")
class CausalDetached(CausalReference):
    def forward(self, x, past_kv=None):
        out, w, present = super().forward(x, past_kv)
        return out.detach(), w, present


test_right_answers_pass, test_mistakes_are_named = CASES.tests()


def test_checker_tries_prefill_decode_chunks_and_odd_sizes():
    seen = []

    class Recording(CausalReference):
        def forward(self, x, past_kv=None):
            S_past = 0 if past_kv is None else past_kv[0].shape[2]
            seen.append((x.shape[1], S_past, x.shape[2], self.n_heads))
            return super().forward(x, past_kv)

    check(Recording)
    assert any(L > 1 and S_past == 0 for L, S_past, *_ in seen)  # the whole sequence
    assert any(L == 1 and S_past > 1 for L, S_past, *_ in seen)  # decoding steps
    assert any(L > 1 and S_past > 0 for L, S_past, *_ in seen)  # a chunk after a cache
    assert (1, 0, 6, 3) in seen  # d_model 6, three heads of width 2, one position


def test_reference_is_the_package_and_torch():
    """The test's oracle agrees with tl.MultiHeadAttention (is_causal, with and without a cache)
    with copied weights in float64, and a prompt followed by one-token steps gives the whole sequence."""
    torch.manual_seed(0)
    ours = CausalReference(12, 3).double()
    package = PackageCausal(12, 3).double()
    package.load_state_dict(ours.state_dict())
    mha = tl.MultiHeadAttention(12, 3).double()
    mha.load_state_dict(ours.state_dict())
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    out, w, cache = ours(x)
    torch.testing.assert_close((out, w, cache), package(x))
    torch.testing.assert_close((out, w), tuple(mha(x, x, x, is_causal=True)[:2]))
    steps, past = [], None
    for a, b in [(0, 3), (3, 4), (4, 6), (6, 7)]:
        y, _, past = ours(x[:, a:b], past)
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, dim=1), out)
    torch.testing.assert_close(past, cache)


def test_stub_prints_not_implemented(capsys):
    assert_prints_not_implemented(check, capsys, stub_of(CausalReference))
    assert_not_implemented(check, capsys)  # a constructor that raises


def test_checker_leaves_the_global_random_state_alone():
    assert_leaves_global_random_state(check, CausalReference)

"""The module exercises of chapters 1 and 4: check_multi_head_attention, check_layer_norm_module,
check_feed_forward_module and check_block_module.

Oracle: learner-style ``nn.Module`` classes written here from the formulas, independently of the
checkers' own variant helpers. A correct class (and the package's or torch's own module, which has the
same interface) must pass and print "all checks passed"; each deliberately wrong class, one classic
mistake apiece, must be rejected with an AssertionError naming that mistake; a stub whose ``forward``
raises NotImplementedError must print "not implemented yet" and return None.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lite as tl
from tests.conftest import CheckerCases, assert_not_implemented
from transformer_lite.chapters.exercises.ch1_attention import check_multi_head_attention
from transformer_lite.chapters.exercises.ch4_transformer_block import (
    check_block_module,
    check_feed_forward_module,
    check_layer_norm_module,
)

CASES = CheckerCases()
INF = float("inf")


# =========================================================================== multi-head attention
# cls(d_model, n_heads); forward(query (B, L, D), key (B, S, D), value (B, S, D), attn_mask=None)
# -> (output (B, L, D), weights (B, H, L, S)); attn_mask (L, S), bool True = may attend, or float (added).


@CASES.passes(check_multi_head_attention)
class MHAReference(nn.Module):
    """Written from Vaswani et al. (2017), Sec. 3.2.2, one step per method so that a mistake can replace one."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x):  # (B, T, D) -> (B, H, T, d_head)
        B, T, D = x.shape
        return x.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)

    def merge(self, heads):  # (B, H, L, d_head) -> (B, L, D)
        B, H, L, d_head = heads.shape
        return heads.transpose(1, 2).reshape(B, L, H * d_head)

    def scores(self, q, k):
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])

    def masked(self, scores, mask):
        if mask is None:
            return scores
        if mask.dtype == torch.bool:
            return scores.masked_fill(~mask, -INF)
        return scores + mask

    def softmax(self, scores):
        return torch.softmax(scores, dim=-1)

    def project(self, query, key, value):
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def output(self, merged):
        return self.out_proj(merged)

    def forward(self, query, key, value, attn_mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        weights = self.softmax(self.masked(self.scores(q, k), attn_mask))
        return self.output(self.merge(weights @ v)), weights


@CASES.passes(check_multi_head_attention)
class PackageMultiHeadAttention(tl.MultiHeadAttention):
    """The package's attention under the exercise's contract: ``(output, weights)``."""

    def forward(self, query, key, value, attn_mask=None):
        return tuple(super().forward(query, key, value, attn_mask=attn_mask)[:2])


@CASES.named(check_multi_head_attention, "scores not scaled")
class MHANoScaling(MHAReference):
    def scores(self, q, k):
        return q @ k.transpose(-2, -1)


@CASES.named(check_multi_head_attention, "scaled by sqrt(d_model) instead of sqrt(d_head)")
class MHAScaledByModelWidth(MHAReference):
    def scores(self, q, k):
        return q @ k.transpose(-2, -1) / math.sqrt(self.q_proj.in_features)


@CASES.named(check_multi_head_attention, "heads split in the wrong order")
class MHASplitByReshape(MHAReference):
    def split(self, x):
        B, T, D = x.shape
        return x.reshape(B, self.n_heads, T, D // self.n_heads)


@CASES.named(check_multi_head_attention, "heads merged without undoing the transpose")
class MHAMergeByReshape(MHAReference):
    def merge(self, heads):
        B, H, L, d_head = heads.shape
        return heads.reshape(B, L, H * d_head)


@CASES.named(check_multi_head_attention, "inverted mask polarity")
class MHAInvertedMask(MHAReference):
    def masked(self, scores, mask):
        if mask is not None and mask.dtype == torch.bool:
            return scores.masked_fill(mask, -INF)  # nn.MultiheadAttention's convention
        return super().masked(scores, mask)

    def softmax(self, scores):
        return torch.softmax(scores, dim=-1).nan_to_num(0.0)


@CASES.named(check_multi_head_attention, "mask not applied")
class MHAMaskIgnored(MHAReference):
    def masked(self, scores, mask):
        return scores


@CASES.named(check_multi_head_attention, "float mask subtracted")
class MHAFloatMaskSubtracted(MHAReference):
    def masked(self, scores, mask):
        if mask is not None and mask.is_floating_point():
            return scores - mask
        return super().masked(scores, mask)

    def softmax(self, scores):
        return torch.softmax(scores, dim=-1).nan_to_num(0.0)


@CASES.named(check_multi_head_attention, "softmax over the wrong axis")
class MHASoftmaxOverQueries(MHAReference):
    def softmax(self, scores):
        return torch.softmax(scores, dim=-2).nan_to_num(0.0)


@CASES.named(check_multi_head_attention, "output projection missing")
class MHANoOutputProjection(MHAReference):
    def output(self, merged):
        return merged


@CASES.named(check_multi_head_attention, "k_proj and v_proj swapped")
class MHAProjectionsSwapped(MHAReference):
    def project(self, query, key, value):
        return self.q_proj(query), self.v_proj(key), self.k_proj(value)


@CASES.named(check_multi_head_attention, "Likely mistake: part of forward is cut from the graph")
class MHADetachedKeys(MHAReference):
    def project(self, query, key, value):
        q, k, v = super().project(query, key, value)
        return q, k.detach(), v  # e.g. a cache written with .detach()


@CASES.named(
    check_multi_head_attention, match=r"could not copy the package's weights .*q_proj, k_proj"
)
class MHAOtherNames(MHAReference):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.W_q = self.q_proj
        del self.q_proj

    def project(self, query, key, value):
        return self.W_q(query), self.k_proj(key), self.v_proj(value)


@CASES.named(check_multi_head_attention, match=r"expected a tuple \(output, weights\)")
class MHAOutputOnly(MHAReference):
    def forward(self, query, key, value, attn_mask=None):
        return super().forward(query, key, value, attn_mask)[0]


@CASES.named(check_multi_head_attention, match=r"weights for .*expected shape \(2, 3, 5, 5\)")
class MHAWeightsAveragedOverHeads(MHAReference):
    def forward(self, query, key, value, attn_mask=None):
        output, weights = super().forward(query, key, value, attn_mask)
        return output, weights.mean(1)  # nn.MultiheadAttention's default


def test_multi_head_attention_checker_tries_cross_attention_and_both_masks():
    seen = []

    class Recording(MHAReference):
        def forward(self, query, key, value, attn_mask=None):
            seen.append((query.shape[1], key.shape[1], attn_mask))
            return super().forward(query, key, value, attn_mask)

    check_multi_head_attention(Recording)
    assert any(L != S for L, S, _ in seen)
    masks = [m for _, _, m in seen if m is not None]
    assert any(m.dtype == torch.bool for m in masks) and any(m.is_floating_point() for m in masks)


# =========================================================================== layer norm module
# cls(d_model, eps=1e-5) with parameters weight (ones) and bias (zeros); forward(x (..., D)) -> (..., D).


@CASES.passes(check_layer_norm_module)
class LayerNormReference(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def normalize(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)

    def forward(self, x):
        return self.normalize(x) * self.weight + self.bias


CASES.passes(check_layer_norm_module)(tl.LayerNorm)
CASES.passes(check_layer_norm_module)(nn.LayerNorm)


@CASES.named(check_layer_norm_module, "unbiased variance")
class LayerNormUnbiased(LayerNormReference):
    def normalize(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + self.eps)


@CASES.named(check_layer_norm_module, "epsilon outside the square root")
class LayerNormEpsOutside(LayerNormReference):
    def normalize(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        std = ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()
        return (x - mean) / (std + self.eps)


@CASES.named(check_layer_norm_module, "normalizing over the wrong axis")
class LayerNormFirstAxis(LayerNormReference):
    def normalize(self, x):
        mean = x.mean(dim=0, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)


@CASES.named(check_layer_norm_module, "forgot the learned scale and shift")
class LayerNormNoAffine(LayerNormReference):
    def forward(self, x):
        return self.normalize(x)


@CASES.named(check_layer_norm_module, "eps ignored")
class LayerNormFixedEps(LayerNormReference):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model)  # eps dropped: always 1e-5


@CASES.named(check_layer_norm_module, "weight must start as ones")
class LayerNormRandomInit(LayerNormReference):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.randn(d_model))


@CASES.named(check_layer_norm_module, "expected a parameter 'bias'")
class LayerNormBiasNotAParameter(LayerNormReference):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        del self.bias
        self.register_buffer("bias", torch.zeros(d_model))


@CASES.named(check_layer_norm_module, "no gradient reached the input")
class LayerNormDetached(LayerNormReference):
    def forward(self, x):
        return super().forward(x.detach())


# =========================================================================== feed-forward module
# cls(d_model, d_ff, dropout=0.0) with linear1, linear2, dropout; forward = linear2(dropout(relu(linear1(x)))).


@CASES.passes(check_feed_forward_module)
class FeedForwardReference(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


CASES.passes(check_feed_forward_module)(tl.PositionwiseFeedForward)


@CASES.named(check_feed_forward_module, "no activation between the two linear layers")
class FeedForwardLinear(FeedForwardReference):
    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x)))


@CASES.named(check_feed_forward_module, "GELU instead of ReLU")
class FeedForwardGelu(FeedForwardReference):
    def forward(self, x):
        return self.linear2(self.dropout(F.gelu(self.linear1(x))))


@CASES.named(check_feed_forward_module, "a ReLU after the last layer too")
class FeedForwardReluAtTheEnd(FeedForwardReference):
    def forward(self, x):
        return F.relu(super().forward(x))


@CASES.named(check_feed_forward_module, "dropout active in eval mode")
class FeedForwardAlwaysDropping(FeedForwardReference):
    def forward(self, x):
        hidden = F.dropout(F.relu(self.linear1(x)), p=self.dropout.p, training=True)
        return self.linear2(hidden)


@CASES.named(check_feed_forward_module, "dropout in the wrong place: after linear2")
class FeedForwardDropoutAtTheEnd(FeedForwardReference):
    def forward(self, x):
        return self.dropout(self.linear2(F.relu(self.linear1(x))))


@CASES.named(check_feed_forward_module, "dropout never applied in training mode")
class FeedForwardNoDropout(FeedForwardReference):
    def forward(self, x):
        return self.linear2(F.relu(self.linear1(x)))


@CASES.named(check_feed_forward_module, match=r"could not copy .*linear1, linear2")
class FeedForwardOtherNames(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


# =========================================================================== block module
# cls(d_model, n_heads, d_ff, dropout=0.0, norm_first=False) with self_attn, ff, norm1, norm2, dropout1,
# dropout2; forward(x (B, L, D), attn_mask=None) -> y (B, L, D), post-norm or pre-norm.


@CASES.passes(check_block_module)
class BlockReference(nn.Module):
    """Post-norm (Vaswani et al., 2017, Sec. 3.1) and pre-norm (Xiong et al., 2020), one method each."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = tl.MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = FeedForwardReference(d_model, d_ff, dropout)
        self.norm1 = LayerNormReference(d_model)
        self.norm2 = LayerNormReference(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def sa(self, h, mask):
        return self.dropout1(self.self_attn(h, h, h, attn_mask=mask)[0])

    def ffn(self, h):
        return self.dropout2(self.ff(h))

    def post_norm(self, x, mask):
        x = self.norm1(x + self.sa(x, mask))
        return self.norm2(x + self.ffn(x))

    def pre_norm(self, x, mask):
        x = x + self.sa(self.norm1(x), mask)
        return x + self.ffn(self.norm2(x))

    def forward(self, x, attn_mask=None):
        return self.pre_norm(x, attn_mask) if self.norm_first else self.post_norm(x, attn_mask)


CASES.passes(check_block_module)(tl.TransformerBlock)


@CASES.named(check_block_module, "post-norm computed for norm_first=True")
class BlockAlwaysPostNorm(BlockReference):
    def forward(self, x, attn_mask=None):
        return self.post_norm(x, attn_mask)


@CASES.named(check_block_module, "pre-norm computed for norm_first=False")
class BlockAlwaysPreNorm(BlockReference):
    def forward(self, x, attn_mask=None):
        return self.pre_norm(x, attn_mask)


@CASES.named(check_block_module, "norm in the wrong place: post-norm normalizes the SUM")
class BlockNormOnTheBranch(BlockReference):
    def post_norm(self, x, mask):
        x = x + self.norm1(self.sa(x, mask))
        return x + self.norm2(self.ffn(x))


@CASES.named(check_block_module, "norm in the wrong place: pre-norm never normalizes the sum")
class BlockPreNormNormalizesTheSum(BlockReference):
    def pre_norm(self, x, mask):
        return self.norm2(super().pre_norm(x, mask))


@CASES.named(check_block_module, "residual taken from the normalized input")
class BlockResidualOfNormalized(BlockReference):
    def pre_norm(self, x, mask):
        h = self.norm1(x)
        x = h + self.sa(h, mask)
        h = self.norm2(x)
        return h + self.ffn(h)


@CASES.named(check_block_module, "residual missing around the attention")
class BlockNoAttentionResidual(BlockReference):
    def post_norm(self, x, mask):
        x = self.norm1(self.sa(x, mask))
        return self.norm2(x + self.ffn(x))


@CASES.named(check_block_module, "residual missing around the feed-forward network")
class BlockNoFeedForwardResidual(BlockReference):
    def post_norm(self, x, mask):
        x = self.norm1(x + self.sa(x, mask))
        return self.norm2(self.ffn(x))


@CASES.named(check_block_module, "one layer norm for both sublayers")
class BlockOneNorm(BlockReference):
    def post_norm(self, x, mask):
        x = self.norm1(x + self.sa(x, mask))
        return self.norm1(x + self.ffn(x))


@CASES.named(check_block_module, "mask not applied")
class BlockMaskIgnored(BlockReference):
    def sa(self, h, mask):
        return super().sa(h, None)


@CASES.named(check_block_module, "dropout active in eval mode")
class BlockAlwaysDropping(BlockReference):
    def ffn(self, h):
        return F.dropout(self.ff(h), p=0.2, training=True)


@CASES.named(check_block_module, "norm1 does not compute what the package's norm1 computes")
class BlockWithUnbiasedNorm(BlockReference):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1, self.norm2 = LayerNormUnbiased(d_model), LayerNormUnbiased(d_model)


@CASES.named(check_block_module, "no gradient reached the input")
class BlockDetached(BlockReference):
    def forward(self, x, attn_mask=None):
        return super().forward(x.detach(), attn_mask)


@CASES.named(check_block_module, match=r"could not copy .*self_attn, ff .*norm1, norm2")
class BlockOtherNames(BlockReference):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ln1 = self.norm1
        del self.norm1


# =========================================================================== stubs and random state


def _stub(base):
    """``base`` with the forward of the student edition's stub."""

    class Stub(base):
        def forward(self, *args, **kwargs):
            raise NotImplementedError("exercise: replace this line with your code")

    return Stub


@pytest.mark.parametrize(
    "check, base",
    [
        (check_multi_head_attention, MHAReference),
        (check_layer_norm_module, LayerNormReference),
        (check_feed_forward_module, FeedForwardReference),
        (check_block_module, BlockReference),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_stub_prints_not_implemented(check, base, capsys):
    assert check(_stub(base)) is None
    assert f"{check.__name__}: not implemented yet" in capsys.readouterr().out
    assert_not_implemented(check, capsys)  # a constructor that raises


@pytest.mark.parametrize(
    "check, cls",
    [
        (check_multi_head_attention, MHAReference),
        (check_layer_norm_module, LayerNormReference),
        (check_feed_forward_module, FeedForwardReference),
        (check_block_module, BlockReference),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_checkers_leave_the_global_random_state_alone(check, cls):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check(cls)
    assert torch.equal(torch.rand(3), expected)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

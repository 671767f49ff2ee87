"""The module exercises of chapters 1 and 4: check_multi_head_attention, check_layer_norm_module,
check_feed_forward_module and check_block_module.

Oracle: learner-style ``nn.Module`` classes written from the formulas, independently of the checkers'
own variant helpers (the right ones in tests/chapters/learners.py, shared with the later chapters
that build on them; the wrong ones here). A correct class (and the package's or torch's own module,
which has the same interface) must pass and print "all checks passed"; each deliberately wrong
class, one classic mistake apiece, must be rejected with an AssertionError naming that mistake; a
stub whose ``forward`` raises NotImplementedError must print "not implemented yet" and return None.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

import transformer_lite as tl
from tests.chapters.learners import (
    INF,
    BlockReference,
    FeedForwardReference,
    LayerNormReference,
    MergeWithoutTranspose,
    MHAReference,
    SplitWithoutTranspose,
)
from tests.conftest import CheckerCases, module_exercise_tests
from transformer_lite.chapters.exercises.ch1_attention import check_multi_head_attention
from transformer_lite.chapters.exercises.ch4_transformer_block import (
    check_block_module,
    check_feed_forward_module,
    check_layer_norm_module,
)

CASES = CheckerCases()


# =========================================================================== multi-head attention
# cls(d_model, n_heads); forward(query (B, L, D), key (B, S, D), value (B, S, D), attn_mask=None)
# -> (output (B, L, D), weights (B, H, L, S)); attn_mask (L, S), bool True = may attend, or float (added).


CASES.passes(check_multi_head_attention)(MHAReference)


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
class MHASplitByReshape(SplitWithoutTranspose, MHAReference):
    """Everything right but the split into heads."""


@CASES.named(check_multi_head_attention, "heads merged without undoing the transpose")
class MHAMergeByReshape(MergeWithoutTranspose, MHAReference):
    """Everything right but the merge of the heads."""


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
    def forward(self, query, key, value, attn_mask=None):
        return super().forward(query, key, value)


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


CASES.passes(check_layer_norm_module)(LayerNormReference)
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
        return F.layer_norm(x, x.shape[-1:], eps=self.eps)  # no weight, no bias


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


CASES.passes(check_feed_forward_module)(FeedForwardReference)
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
        hidden = F.relu(self.linear1(x))
        return self.dropout(self.linear2(hidden))


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


CASES.passes(check_block_module)(BlockReference)
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


REFERENCES = [
    (check_multi_head_attention, MHAReference),
    (check_layer_norm_module, LayerNormReference),
    (check_feed_forward_module, FeedForwardReference),
    (check_block_module, BlockReference),
]
test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone = (
    module_exercise_tests(stubs=REFERENCES, references=REFERENCES)
)
test_right_answers_pass, test_mistakes_are_named = CASES.tests()

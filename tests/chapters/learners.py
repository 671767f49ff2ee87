"""The learner's modules of chapters 1 and 4, written once for the exercise tests of every chapter.

A reader writes multi-head attention in chapter 1 and the layer norm, the feed-forward network and the
block in chapter 4, then pastes them into chapter 9's GPT; chapters 2 and 3 start their attention from
the same projections and split into heads. These classes are that code, written here from the papers'
formulas (Vaswani et al., 2017, Sec. 3.1-3.3; Ba et al., 2016; Xiong et al., 2020), independently of
the checkers' own variant helpers. One step per method, so that a test's wrong class can replace one
step with one classic mistake; the mixins at the end are mistakes that more than one chapter names.

The tests that register them: tests/chapters/test_module_exercises*.py.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

import transformer_lite as tl

INF = float("inf")


class AttentionProjections(nn.Module):
    """The four projections of multi-head attention, and the split into heads and the merge back."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x):  # (B, L, D) -> (B, H, L, d_head)
        B, L, D = x.shape
        return x.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2)

    def merge(self, heads):  # (B, H, L, d_head) -> (B, L, D)
        B, H, L, d_head = heads.shape
        return heads.transpose(1, 2).reshape(B, L, H * d_head)


class MHAReference(AttentionProjections):
    """Chapter 1's multi-head attention (Vaswani et al., 2017, Sec. 3.2.2).

    ``forward(query (B, L, D), key (B, S, D), value (B, S, D), attn_mask=None)`` returns
    ``(output (B, L, D), weights (B, H, L, S))``; ``attn_mask (L, S)``: bool True = may attend, or a
    float mask added to the scores.
    """

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

    def attend(self, q, k, v, mask):  # heads (B, H, L, d_head) -> (B, H, L, d_head), (B, H, L, S)
        weights = self.softmax(self.masked(self.scores(q, k), mask))
        return weights @ v, weights

    def project(self, query, key, value):
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def output(self, merged):
        return self.out_proj(merged)

    def forward(self, query, key, value, attn_mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        heads, weights = self.attend(q, k, v, attn_mask)
        return self.output(self.merge(heads)), weights


class LayerNormReference(nn.Module):
    """Chapter 4's layer norm (Ba et al., 2016): ``cls(d_model, eps=1e-5)``, weight ones, bias zeros."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def normalize(self, x):  # over the last axis, with the biased variance
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)

    def forward(self, x):
        return self.normalize(x) * self.weight + self.bias


class FeedForwardReference(nn.Module):
    """Chapter 4's position-wise network: ``linear2(dropout(relu(linear1(x))))``."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class BlockReference(nn.Module):
    """Chapter 4's block: post-norm (Vaswani et al., 2017, Sec. 3.1) and pre-norm (Xiong et al., 2020),
    one method each. ``forward(x (B, L, D), attn_mask=None)`` returns ``y (B, L, D)``."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = self.attention(d_model, n_heads, dropout)
        self.ff = FeedForwardReference(d_model, d_ff, dropout)
        self.norm1 = LayerNormReference(d_model)
        self.norm2 = LayerNormReference(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def attention(self, d_model, n_heads, dropout):  # chapter 4's stub gives the package's
        return tl.MultiHeadAttention(d_model, n_heads, dropout=dropout)

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


# --------------------------------------------------------------------------- mistakes of several chapters


class SplitWithoutTranspose:
    """Mistake: (B, L, D) reshaped straight to (B, H, L, d_head), which mixes positions and features."""

    def split(self, x):
        B, L, D = x.shape
        return x.reshape(B, self.n_heads, L, D // self.n_heads)


class MergeWithoutTranspose:
    """Mistake: (B, H, L, d_head) reshaped straight to (B, L, D), without moving the heads back."""

    def merge(self, heads):
        B, H, L, d_head = heads.shape
        return heads.reshape(B, L, H * d_head)


class CacheOfNewPositionsOnly:
    """Mistake of the cached attention of chapters 2 and 3 (their step ``present``): the cache returned
    holds this call's keys and values only, not those of the whole sequence so far."""

    def present(self, past_kv, k, v, k_all, v_all):
        return k, v

"""Tests for transformer_lite.outputs: the named tuples every module returns, and KVCache.

Oracles: the field names and order of the contract (issue 21 plan, section 1.1), which code and
stored notebooks unpack by position; ``len`` and ``num_bytes`` of a cache counted by hand.
"""

import pytest
import torch

import transformer_lite as tl
from transformer_lite.outputs import (
    AttentionOutput,
    DecoderBlockOutput,
    DecoderOutput,
    EncoderOutput,
    Generation,
    KeyValue,
    KVCache,
    ModelOutput,
)


@pytest.mark.parametrize(
    "cls, fields",
    [
        (KeyValue, ("keys", "values")),
        (AttentionOutput, ("output", "weights", "cache")),
        (DecoderBlockOutput, ("output", "weights", "cross_weights")),
        (EncoderOutput, ("output", "attentions")),
        (DecoderOutput, ("output", "attentions", "cross_attentions")),
        (ModelOutput, ("logits", "attentions", "cache")),
        (Generation, ("tokens", "logits")),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_fields_in_order_and_unpacking_by_position(cls, fields):
    assert cls._fields == fields
    values = [object() for _ in fields]
    r = cls(*values)
    assert tuple(r) == tuple(values)  # unpacking gives the fields in this order
    assert all(getattr(r, f) is v for f, v in zip(fields, values))
    assert getattr(tl, cls.__name__) is cls  # exported at the top level


def test_kv_cache_len_and_num_bytes_counted_by_hand():
    assert tl.KVCache is KVCache
    cache = KVCache()
    assert len(cache) == 0 and cache.num_bytes() == 0 and cache.layers == []
    B, H_kv, S, d_head = 2, 3, 5, 4
    for dtype in (torch.float32, torch.float16):  # two layers of different element sizes
        k = torch.zeros(B, H_kv, S, d_head, dtype=dtype)
        cache.layers.append(KeyValue(k, k.clone()))
    assert len(cache) == S
    n = B * H_kv * S * d_head  # elements of one tensor
    assert cache.num_bytes() == 2 * n * 4 + 2 * n * 2  # keys and values, float32 then float16


def test_kv_cache_is_filled_by_the_attention_cache_it_is_handed():
    """A layer's cache is the KeyValue the attention returned: pass it back for the next step."""
    torch.manual_seed(0)
    attn = tl.MultiHeadAttention(8, 4, 2, bias=False)
    x = torch.randn(2, 3, 8)
    cache = tl.KVCache()
    cache.layers.append(attn(x, is_causal=True).cache)
    assert len(cache) == 3
    step = attn(x[:, :1], cache=cache.layers[0], is_causal=True)
    cache.layers[0] = step.cache
    assert len(cache) == 4 and isinstance(step.cache, KeyValue)

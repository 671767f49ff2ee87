"""Tests for transformer_lite.models.decoder_only: the block with a cache, the decoder-only model, generation.

Oracles:

* :class:`TransformerBlock` with grouped-query attention (``n_kv_heads == n_heads``) against
  the same block with multi-head attention (itself tested against ``nn.TransformerEncoderLayer``):
  the same seeded parameters, ``is_causal=True``, float64, pre- and post-norm, ReLU and GELU;
  the cache continues the full sequence;
* :class:`DecoderOnlyTransformer` against the same model assembled by hand from
  ``TransformerBlock`` s, a LayerNorm and the transposed embedding matrix;
* generation with and without the key/value cache: the same tokens and logits
  within 1e-5 (float32), for every positional encoding, GQA and post-norm; greedy
  decoding against an explicit arg-max loop;
* a small LM overfits one batch (deterministic, seeded); causality of the logits;
  parameter counts by hand; error paths.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import F64, close, small_decoder_only
from transformer_lite import (
    MultiHeadAttention,
    TransformerBlock,
    sinusoidal_positional_encoding,
)
from transformer_lite.models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from transformer_lite.models.generation import sample_next_token
from transformer_lite.outputs import Generation, KeyValue, KVCache, ModelOutput


def tiny(seed=0, **overrides):
    kwargs = dict(vocab_size=11, max_len=24, d_model=16, n_heads=4, n_layers=2, d_ff=32)
    kwargs.update(overrides)
    torch.manual_seed(seed)
    return DecoderOnlyTransformer(DecoderOnlyConfig(**kwargs)).eval()


def randomize_norms(model):
    with torch.no_grad():  # non-trivial gains and biases, so that copying them is tested
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if name.endswith("weight") else 0.0))
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.3)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_grouped_query_block_matches_multi_head_block(norm_first, activation):
    """n_kv_heads == n_heads: the same parameters, created in the same order, and the same output."""
    kwargs = dict(activation=activation, norm_first=norm_first)
    torch.manual_seed(0)
    ref = TransformerBlock(8, 2, 16, **kwargs).double().eval()  # MultiHeadAttention
    torch.manual_seed(0)
    ours = TransformerBlock(8, 2, 16, n_kv_heads=2, **kwargs).double().eval()
    assert isinstance(ref.self_attn, MultiHeadAttention)
    assert isinstance(ours.self_attn, MultiHeadAttention)
    ref_sd, sd = ref.state_dict(), ours.state_dict()
    assert list(sd) == list(ref_sd)  # same names, same order
    assert all(torch.equal(sd[k], ref_sd[k]) for k in sd)  # same seeded values
    randomize_norms(ref)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 6, 8, dtype=F64)
    y, weights, (k, v) = ours(x, is_causal=True)
    ref_y, ref_weights, _ = ref(x, is_causal=True)
    close(y, ref_y)
    close(weights, ref_weights)
    assert k.shape == v.shape == (3, 2, 6, 4)


def test_block_cache_continues_the_full_sequence():
    torch.manual_seed(1)
    blk = TransformerBlock(8, 4, 16, n_kv_heads=2, norm_first=True).double().eval()
    x = torch.randn(2, 7, 8, dtype=F64)
    full, full_w, _ = blk(x, is_causal=True)
    y0, _, past = blk(x[:, :4], is_causal=True)
    y1, w1, (k, v) = blk(x[:, 4:], is_causal=True, cache=past)
    close(torch.cat((y0, y1), dim=1), full)
    close(w1, full_w[:, :, 4:])
    assert k.shape == (2, 2, 7, 2)


def test_block_errors():
    # (the errors "key/value cache needs grouped-query attention" and "rotary embedding needs
    # grouped-query attention" ceased to exist: one attention class takes both)
    with pytest.raises(
        ValueError, match="expected norm 'layernorm' or 'rmsnorm', received 'batchnorm'"
    ):
        TransformerBlock(8, 2, 16, norm="batchnorm")


def test_sinusoidal_positions_match_the_table_and_add_nothing_to_the_state_dict():
    model = tiny(positional="sinusoidal")
    learned = tiny(positional="learned")
    assert set(model.state_dict()) == set(learned.state_dict()) - {"position_embedding.weight"}
    ids = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(4))
    table = sinusoidal_positional_encoding(24, 16)  # (max_len, D)
    for offset in (0, 3):
        expected = model.token_embedding(ids) + table[offset : offset + 5]
        torch.testing.assert_close(model._embed(ids, offset), expected, atol=0, rtol=0)


@pytest.mark.parametrize("norm_first", [True, False])
def test_model_matches_hand_assembly(norm_first):
    model = tiny(norm_first=norm_first, activation="relu").double()
    randomize_norms(model)
    ids = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(3))
    x = model.token_embedding.weight[ids] + model.position_embedding.weight[:9]
    for block in model.blocks:
        ref = TransformerBlock(16, 4, 32, activation="relu", norm_first=norm_first).double().eval()
        ref.load_state_dict(block.state_dict())
        x = ref(x, is_causal=True).output
    if norm_first:
        x = F.layer_norm(x, (16,), model.final_norm.weight, model.final_norm.bias, eps=1e-5)
    close(model(ids).logits, x @ model.token_embedding.weight.T)  # tied head: logits = h E^T


CACHE_CASES = {
    "learned": {},
    "sinusoidal": {"positional": "sinusoidal"},
    "rotary": {"positional": "rotary"},
    "rotary-gqa-rms-swiglu": {
        "positional": "rotary",
        "n_kv_heads": 2,
        "norm": "rmsnorm",
        "activation": "swiglu",
        "bias": False,
        "rope_interleaved": False,
    },
    "post-norm": {"norm_first": False},
    "untied-mqa": {"tie_embeddings": False, "n_kv_heads": 1},
}


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@pytest.mark.parametrize("case", list(CACHE_CASES))
def test_generate_with_and_without_cache_agree(case):
    model = tiny(seed=1, **CACHE_CASES[case])
    prompt = torch.randint(0, 11, (3, 5), generator=torch.Generator().manual_seed(0))
    for temperature, top_k in ((0.0, None), (1.0, None), (0.7, 4)):
        outs = [
            model.generate(
                prompt,
                12,
                temperature=temperature,
                top_k=top_k,
                use_cache=use_cache,
                generator=torch.Generator().manual_seed(7),
            )
            for use_cache in (True, False)
        ]
        (tok_c, logits_c), (tok_n, logits_n) = outs
        assert tok_c.shape == (3, 17) and torch.equal(tok_c[:, :5], prompt)
        assert torch.equal(tok_c, tok_n), f"{case}, T={temperature}: the cache changed the tokens"
        close(logits_c, logits_n, atol=1e-5, rtol=0)


def test_greedy_is_the_argmax_loop_and_cache_length():
    model = tiny(seed=2, positional="rotary")
    tokens = torch.tensor([[1, 2, 3]])
    for _ in range(6):
        nxt = model(tokens).logits[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat((tokens, nxt), dim=1)
    generation = model.generate(tokens[:, :3], 6, temperature=0)
    assert isinstance(generation, Generation) and torch.equal(generation.tokens, tokens)
    cache = KVCache()
    model(tokens[:, :4], cache=cache)
    model(tokens[:, 4:5], cache=cache)
    assert len(cache) == 5 and len(cache.layers) == 2
    # layers * (k, v) * (B H S d_head) * float32
    assert cache.num_bytes() == 2 * 2 * (1 * 4 * 5 * 4) * 4
    empty = model.generate(tokens, 0)
    assert empty.tokens is tokens and empty.logits.shape == (1, 0, 11)


def test_forward_with_cache_equals_full_forward_and_attentions():
    model = tiny(seed=3, positional="learned")
    ids = torch.randint(0, 11, (2, 10))
    out = model(ids)
    assert isinstance(out, ModelOutput) and out.cache is None
    full, attentions = out.logits, out.attentions
    assert len(attentions) == 2 and attentions[0].shape == (2, 4, 10, 10)
    assert torch.all(attentions[1].masked_select(~torch.ones(10, 10, dtype=torch.bool).tril()) == 0)
    cache = KVCache()
    part1 = model(ids[:, :7], cache=cache).logits
    part2, att2, returned = model(ids[:, 7:], cache=cache)
    assert returned is cache
    close(torch.cat((part1, part2), dim=1), full, atol=1e-6, rtol=0)
    assert att2[0].shape == (2, 4, 3, 10)


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    t=st.integers(0, 8), seed=st.integers(0, 100), positional=st.sampled_from(["learned", "rotary"])
)
def test_logits_do_not_depend_on_future_tokens(t, seed, positional):
    model = tiny(seed=seed, positional=positional).double()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 11, (1, 10), generator=g)
    other = ids.clone()
    other[:, t + 1 :] = (
        ids[:, t + 1 :] + 1 + torch.randint(0, 10, (1, 9 - t), generator=g)
    ) % 11  # all different
    close(model(ids).logits[:, : t + 1], model(other).logits[:, : t + 1])


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_sliding_window_without_cache_and_training_mode_restored():
    model = tiny(seed=4, max_len=8, dropout=0.1).train()
    out = model.generate(torch.tensor([[1, 2, 3]]), 20, temperature=0, use_cache=False)
    assert out.tokens.shape == (1, 23) and out.logits.shape == (1, 20, 11) and model.training
    with pytest.raises(ValueError, match="needs 9 positions, but max_len=8"):
        model.generate(torch.tensor([[1, 2, 3]]), 7, use_cache=True)
    assert model.generate(torch.tensor([[1, 2, 3]]), 6, use_cache=True).tokens.shape == (1, 9)


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_sample_next_token():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 0.0, 4.0]])
    assert sample_next_token(logits, temperature=0).tolist() == [[1], [0]]
    g = torch.Generator().manual_seed(0)
    draws = torch.cat(
        [sample_next_token(logits, 1.0, top_k=2, generator=g) for _ in range(300)], dim=1
    )
    assert set(draws[0].tolist()) == {1, 3} and set(draws[1].tolist()) == {0, 3}, (
        "top_k=2 keeps the 2 largest"
    )
    assert torch.equal(
        sample_next_token(logits, 5.0, top_k=1, generator=g), torch.tensor([[1], [0]])
    )
    cold = torch.cat([sample_next_token(logits, 0.05, generator=g) for _ in range(50)], dim=1)
    assert torch.all(cold[0] == 1), "a low temperature concentrates on the arg-max"
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        sample_next_token(logits[0])
    with pytest.raises(ValueError, match="temperature >= 0"):
        sample_next_token(logits, -1.0)
    with pytest.raises(ValueError, match=r"top_k in \[1, 4\]"):
        sample_next_token(logits, 1.0, top_k=5)


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_overfits_one_batch():
    model = small_decoder_only(vocab_size=13, max_len=16, n_layers=2, positional="rotary", seed=0)
    ids = torch.randint(0, 13, (4, 17), generator=torch.Generator().manual_seed(1))
    x, y = ids[:, :-1], ids[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        loss = F.cross_entropy(model(x).logits.reshape(-1, 13), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(2.565, abs=0.05)  # about log(13) = 2.565 at initialisation
    assert losses[-1] < 0.3 * losses[0], f"loss went from {losses[0]:.3f} to {losses[-1]:.3f}"


def test_parameter_counts():
    config = DecoderOnlyConfig(
        vocab_size=78, max_len=128, d_model=128, n_heads=4, n_layers=2, d_ff=512
    )
    model = DecoderOnlyTransformer(config)
    D, F_, V, T = 128, 512, 78, 128
    # attention, network, 2 LayerNorms
    per_block = 4 * (D * D + D) + (D * F_ + F_) + (F_ * D + D) + 2 * 2 * D
    # the chapter's 0.43M
    assert model.num_parameters() == V * D + T * D + 2 * per_block + 2 * D == 423_168
    assert model.lm_head.weight is model.token_embedding.weight
    untied = DecoderOnlyTransformer(
        DecoderOnlyConfig(**{**config.to_dict(), "tie_embeddings": False})
    )
    assert untied.num_parameters() == 423_168 + V * D
    gqa = DecoderOnlyTransformer(DecoderOnlyConfig(vocab_size=78, n_kv_heads=1, bias=False))
    assert gqa.blocks[0].self_attn.k_proj.weight.shape == (32, 128)


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="expected d_model to be a positive int"):
        DecoderOnlyConfig(vocab_size=5, d_model=0)
    with pytest.raises(ValueError, match="n_heads | d_model"):
        DecoderOnlyConfig(vocab_size=5, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="n_kv_heads | n_heads"):
        DecoderOnlyConfig(vocab_size=5, n_kv_heads=3)
    with pytest.raises(ValueError, match="dropout"):
        DecoderOnlyConfig(vocab_size=5, dropout=1.0)
    with pytest.raises(
        ValueError,
        match="expected positional 'learned', 'sinusoidal' or 'rotary', received 'alibi'",
    ):
        DecoderOnlyConfig(vocab_size=5, positional="alibi")
    with pytest.raises(ValueError, match="expected norm 'layernorm' or 'rmsnorm'"):
        DecoderOnlyConfig(vocab_size=5, norm="batchnorm")
    with pytest.raises(ValueError, match="expected activation 'relu', 'gelu' or 'swiglu'"):
        DecoderOnlyConfig(vocab_size=5, activation="tanh")
    with pytest.raises(ValueError, match="even d_head"):
        DecoderOnlyConfig(vocab_size=5, d_model=12, n_heads=4, positional="rotary")
    model = tiny()
    with pytest.raises(ValueError, match=r"integer input_ids of shape \(B, L\)"):
        model(torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"at least 1 position"):
        model(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[0, 11\), received min 0, max 11"):
        model(torch.tensor([[0, 11]]))
    with pytest.raises(ValueError, match="positions 0..24 requested, but max_len=24"):
        model(torch.zeros(1, 25, dtype=torch.long))
    cache = KVCache()
    model(torch.zeros(1, 20, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="positions 20..24"):
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="max_new_tokens >= 0"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), -1)
    with pytest.raises(
        ValueError,
        match=r"DecoderOnlyTransformer: expected KVCache \(or None\) as cache, received KeyValue",
    ):
        kv = KeyValue(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
        model(torch.zeros(1, 1, dtype=torch.long), cache=kv)
    with pytest.raises(ValueError, match="expected DecoderOnlyConfig, received dict"):
        DecoderOnlyTransformer(model.config.to_dict())


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("d_model", 64.0, "expected d_model to be a positive int, received 64.0"),
        ("n_layers", True, "expected n_layers to be a positive int, received True"),
        ("n_kv_heads", 0, "expected n_kv_heads to be a positive int, received 0"),
        ("n_kv_heads", 3, "n_heads must be divisible by n_kv_heads, received n_heads=4"),
    ],
)
def test_config_refuses_sizes_that_are_not_positive_ints(field, value, message):
    fields = dict(vocab_size=10, max_len=8, d_model=16, n_heads=4, n_layers=1, d_ff=32)
    with pytest.raises(ValueError, match=message):
        DecoderOnlyConfig(**{**fields, field: value})

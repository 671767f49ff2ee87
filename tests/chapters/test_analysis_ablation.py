"""Head ablation and the evaluation windows of transformer_lite.chapters.analysis.

Oracles: zeroing a head's slice of out_proj's input equals zeroing that head's columns
of out_proj's weight; replacing it by a constant m equals zeroing the columns and adding
W_O[:, cols] @ m to the bias; the mean of out_proj applied to the mean head outputs equals
the mean of the attention sublayer's own output; evaluate() itself for the windows.
"""

import copy

import pytest
import torch

import transformer_lite as tl
from transformer_lite.chapters import analysis
from transformer_lite.training.train import TrainConfig, evaluate, lm_loss


@pytest.fixture(params=[None, 2])
def model(request):
    torch.manual_seed(0)
    # multi-head attention (n_kv_heads None) and grouped-query attention
    config = tl.DecoderOnlyConfig(
        vocab_size=11, max_len=16, d_model=24, n_heads=4, n_layers=3, n_kv_heads=request.param
    )
    m = tl.DecoderOnlyTransformer(config).double().eval()
    with torch.no_grad():  # every out_proj with a non-zero bias
        for block in m.blocks:
            if block.self_attn.out_proj.bias is None:
                block.self_attn.out_proj.bias = torch.nn.Parameter(
                    torch.zeros(24, dtype=torch.float64)
                )
            block.self_attn.out_proj.bias.normal_()
    return m


def ids():
    return torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))


def test_zero_ablation_equals_zeroed_weight_columns(model):
    heads = [(0, 1), (2, 3), (2, 0)]
    with analysis.ablate_heads(model, heads):
        ablated = model(ids()).logits
    oracle = copy.deepcopy(model)
    d = oracle.blocks[0].self_attn.d_head
    with torch.no_grad():
        for layer, head in heads:
            oracle.blocks[layer].self_attn.out_proj.weight[:, head * d : (head + 1) * d] = 0
    torch.testing.assert_close(ablated, oracle(ids()).logits, rtol=0, atol=1e-12)
    # the hooks are gone afterwards, and the ablation changed something
    torch.testing.assert_close(model(ids()).logits, copy.deepcopy(model)(ids()).logits)
    assert (model(ids()).logits - ablated).abs().max() > 1e-5


def test_mean_ablation_equals_bias_shift(model):
    text = torch.randint(0, 11, (3, 16), generator=torch.Generator().manual_seed(2))
    means = analysis.head_outputs_mean(model, text)
    assert means.shape == (3, 4, 6)
    heads = [(1, 2), (0, 0)]
    with analysis.ablate_heads(model, heads, means=means):
        ablated = model(ids()).logits
    oracle = copy.deepcopy(model)
    d = 6
    with torch.no_grad():
        for layer, head in heads:
            proj = oracle.blocks[layer].self_attn.out_proj
            cols = slice(head * d, (head + 1) * d)
            proj.bias += proj.weight[:, cols] @ means[layer, head]
            proj.weight[:, cols] = 0
    torch.testing.assert_close(ablated, oracle(ids()).logits, rtol=0, atol=1e-12)


def test_head_outputs_mean_matches_sublayer_output(model):
    text = torch.randint(0, 11, (3, 16), generator=torch.Generator().manual_seed(2))
    means = analysis.head_outputs_mean(model, text, skip=1)
    outputs = []
    hooks = [
        b.self_attn.register_forward_hook(
            lambda mod, a, out: outputs.append(out[0] if isinstance(out, tuple) else out)
        )
        for b in model.blocks
    ]
    with torch.no_grad():
        model(text)
    for h in hooks:
        h.remove()
    for layer, out in enumerate(outputs):  # out: (B, L, D)
        proj = model.blocks[layer].self_attn.out_proj
        expected = out[:, 1:].mean(dim=(0, 1))
        torch.testing.assert_close(proj(means[layer].reshape(-1)), expected, rtol=0, atol=1e-12)


def test_evaluation_batches_are_evaluates_windows():
    torch.manual_seed(0)
    model = tl.DecoderOnlyTransformer(
        tl.DecoderOnlyConfig(vocab_size=7, max_len=8, d_model=8, n_heads=2, n_layers=1)
    ).eval()
    ids = torch.randint(0, 7, (200,), generator=torch.Generator().manual_seed(3))
    cfg = TrainConfig(steps=1, batch_size=4, context=8, eval_batches=3, seed=5)
    batches = analysis.evaluation_batches(ids, cfg)
    assert len(batches) == 3 and batches[0][0].shape == (4, 8)
    with torch.no_grad():
        mine = sum(float(lm_loss(model(x).logits, y)) for x, y in batches) / len(batches)
    assert mine == pytest.approx(evaluate(model, ids, cfg), abs=1e-7)
    # not the training batches (seed)
    other = TrainConfig(steps=1, batch_size=4, context=8, eval_batches=3, seed=4)
    assert not torch.equal(analysis.evaluation_batches(ids, other)[0][0], batches[0][0])

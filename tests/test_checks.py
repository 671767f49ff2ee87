"""The shared checks (transformer_lite.checks) and the finder of installed files.

Oracles: the messages the docstrings promise; a module's mode before and after; importlib.metadata;
``torch.export``, which refuses a forward that reads a tensor's values (a check there would).
(The blocks' post-norm and pre-norm formulas are checked against torch's layers in tests/nn/test_blocks.py
and tests/nn/test_decoder_block.py.)
"""

import importlib.metadata

import pytest
import torch
from torch import nn

import transformer_lite as tl
from transformer_lite import checks
from transformer_lite.files import installed_files


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_even_after_an_error(training):
    model = nn.Sequential(nn.Dropout(0.5)).train(training)
    with checks.eval_mode(model) as m:
        assert m is model and not model.training and not model[0].training
    assert model.training is training
    with pytest.raises(RuntimeError, match="boom"), checks.eval_mode(model):
        raise RuntimeError("boom")
    assert model.training is training


def test_token_id_checks_name_what_was_expected_and_received():
    checks.check_token_ids("M", "ids", torch.tensor([[0, 4]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"M: expected integer ids of shape \(B, L\), received \(2,\) torch.int64"
    ):
        checks.check_token_ids("M", "ids", torch.tensor([0, 4]), vocab_size=5)
    with pytest.raises(ValueError, match=r"received \(1, 2\) torch.float32"):
        checks.check_token_ids("M", "ids", torch.zeros(1, 2), vocab_size=5)
    with pytest.raises(ValueError, match=r"received \(1, 2\) torch.bool"):
        checks.check_token_ids("M", "ids", torch.zeros(1, 2, dtype=torch.bool), vocab_size=5)
    with pytest.raises(ValueError, match="received list"):
        checks.check_token_ids("M", "ids", [[0]], vocab_size=5)
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 5\), received min 0, max 5 in ids"
    ):
        checks.check_token_ids("M", "ids", torch.tensor([[0, 5]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 5\), received min -1, max 2 in ids"
    ):
        checks.check_token_ids("M", "ids", torch.tensor([[-1, 2]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"expected ids with at least 1 position\(s\), received \(3, 0\)"
    ):
        checks.check_token_ids(
            "M", "ids", torch.zeros(3, 0, dtype=torch.long), vocab_size=5, min_len=1
        )


def test_size_and_shape_checks():
    checks.check_positive_int("f", "n", 1)
    for bad in (0, -1, 1.0, True, "2"):
        with pytest.raises(
            ValueError, match=rf"f: expected n to be a positive int, received {bad!r}"
        ):
            checks.check_positive_int("f", "n", bad)
    checks.check_nonnegative_int("g", "k", 0)
    for bad in (-1, 1.0, False, None):
        with pytest.raises(ValueError, match=rf"g: expected an int k >= 0, received {bad!r}"):
            checks.check_nonnegative_int("g", "k", bad)
    checks.check_positive_sizes("F", d_model=1, d_ff=2)
    with pytest.raises(
        ValueError, match="F: expected positive int d_model and d_ff, received 4, 0"
    ):
        checks.check_positive_sizes("F", d_model=4, d_ff=0)
    for bad in (64.0, True):
        with pytest.raises(
            ValueError,
            match=rf"F: expected positive int d_model, n_heads and d_ff, received {bad!r}, 2, 8",
        ):
            checks.check_positive_sizes("F", d_model=bad, n_heads=2, d_ff=8)
    checks.check_last_dim("N", torch.zeros(2, 3), 3)
    with pytest.raises(
        ValueError, match=r"N: expected input of shape \(\.\.\., 4\), received \(2, 3\)"
    ):
        checks.check_last_dim("N", torch.zeros(2, 3), 4)


def test_head_position_and_sequence_checks():
    checks.check_heads("A", 12, 4, 2)
    with pytest.raises(
        ValueError, match="A: d_model must be divisible by n_heads, received d_model=10, n_heads=4"
    ):
        checks.check_heads("A", 10, 4)
    with pytest.raises(
        ValueError,
        match="A: n_heads must be divisible by n_kv_heads, received n_heads=4, n_kv_heads=3",
    ):
        checks.check_heads("A", 12, 4, 3)
    checks.check_positions("P", 6, 4, 10)  # positions 6..9
    with pytest.raises(
        ValueError,
        match=r"P: positions 7\.\.10 requested, but max_len=10 allows positions 0\.\.9 only",
    ):
        checks.check_positions("P", 7, 4, 10)
    with pytest.raises(ValueError, match=r"P: expected an int offset >= 0, received -1"):
        checks.check_positions("P", -1, 4, 10)
    x, memory = torch.zeros(2, 5, 8), torch.zeros(2, 3, 8)
    checks.check_sequences("S", 8, x=x, memory=memory)  # lengths may differ
    with pytest.raises(
        ValueError, match=r"S: expected memory of shape \(B, len, 8\), received \(2, 3\)"
    ):
        checks.check_sequences("S", 8, x=x, memory=torch.zeros(2, 3))
    with pytest.raises(
        ValueError,
        match=r"S: expected one batch size B, received x \(2, 5, 8\), memory \(1, 3, 8\)",
    ):
        checks.check_sequences("S", 8, x=x, memory=torch.zeros(1, 3, 8))


def test_installed_files_finds_a_distribution_and_nothing_for_a_missing_one():
    files = installed_files("torch")
    assert files and {str(f) for f in files} == {str(f) for f in importlib.metadata.files("torch")}
    assert installed_files("no-such-distribution-for-tests") == []


def test_embed_refuses_ids_outside_the_table_without_reading_them_first():
    table = nn.Embedding(5, 3)
    ids = torch.tensor([[0, 4]])
    assert torch.equal(checks.embed("M", "ids", table, ids), table(ids))
    assert torch.equal(checks.embed("M", "ids", table.weight, ids), table.weight[ids])
    for bad, shown in (([[0, 5]], "min 0, max 5"), ([[-1, 2]], "min -1, max 2")):
        for t in (table, table.weight):  # a tensor table: a negative id must not wrap around
            with pytest.raises(
                ValueError, match=rf"M: token ids must lie in \[0, 5\), received {shown} in ids"
            ):
                checks.embed("M", "ids", t, torch.tensor(bad))
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 5\), .* in position_ids"):
        checks.embed("M", "position_ids", table.weight, torch.tensor([[7]]))
    with pytest.raises(ValueError, match=r"M: expected integer ids of shape \(B, L\)"):
        checks.embed("M", "ids", table, torch.zeros(1, 2))


def _models():
    torch.manual_seed(0)
    gpt = dict(vocab_size=11, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    ids = torch.tensor([[1, 2, 3, 4]])
    mask = torch.tensor([[False, True, True, True]])
    src = (torch.tensor([[1, 2, 3]]), torch.tensor([[0, 4]]))
    small = dict(d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
    x = torch.randn(2, 3, 8)
    float_mask = torch.zeros(2, 1, 3, 3).masked_fill(torch.rand(2, 1, 3, 3) < 0.3, float("-inf"))
    return {
        "gpt": (tl.DecoderOnlyTransformer(tl.DecoderOnlyConfig(**gpt)), (ids,), {}),
        "gpt-padded": (
            tl.DecoderOnlyTransformer(tl.DecoderOnlyConfig(**gpt)),
            (ids,),
            {"attention_mask": mask},
        ),
        "gpt-rotary-gqa": (
            tl.DecoderOnlyTransformer(
                tl.DecoderOnlyConfig(**gpt, positional="rotary", n_kv_heads=1)
            ),
            (ids,),
            {},
        ),
        "bert": (
            tl.BertEncoder(
                tl.BertConfig(vocab_size=11, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
            ),
            (ids,),
            {"attention_mask": mask.long()},
        ),
        "tagger": (
            tl.EncoderTagger(
                tl.TaggerConfig(
                    vocab_size=11, n_classes=3, n_layers=1, d_model=8, n_heads=2, d_ff=16
                )
            ),
            (ids,),
            {},
        ),
        "encoder-decoder": (
            tl.EncoderDecoderTransformer(tl.EncoderDecoderConfig(12, 10, **small)),
            src,
            {"src_padding": torch.tensor([[1, 1, 0]])},
        ),
        "mha-float-mask": (tl.MultiHeadAttention(8, 2), (x, x, x), {"attn_mask": float_mask}),
        "gqa-rotary-cache": (
            tl.MultiHeadAttention(8, 2, 1, rotary=tl.RotaryEmbedding(4)),
            (x,),
            {
                "cache": tl.KeyValue(torch.randn(2, 1, 4, 4), torch.randn(2, 1, 4, 4)),
                "is_causal": True,
            },
        ),
        "block-cache": (
            tl.TransformerBlock(8, 2, 16, n_kv_heads=1, norm_first=True),
            (x,),
            {
                "cache": tl.KeyValue(torch.randn(2, 1, 4, 4), torch.randn(2, 1, 4, 4)),
                "is_causal": True,
            },
        ),
        "decoder-block": (
            tl.DecoderBlock(8, 2, 16),
            (x, torch.randn(2, 5, 8)),
            {"memory_mask": tl.padding_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))},
        ),
    }


@pytest.mark.parametrize("name", list(_models()))
def test_forward_reads_no_tensor_values(name):
    """No check inside a forward reads a tensor's values (a host sync): torch.export (non-strict,
    on fake tensors) refuses a forward whose Python branches on data; these follow every check."""
    model, args, kwargs = _models()[name]
    program = torch.export.export(model.eval(), args, kwargs, strict=False)
    got = program.module()(*args, **kwargs)
    want = model(*args, **kwargs)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g, w)

"""Checkers of chapters 4 and 5: check_pre_norm_block and check_shift_right.

Oracle: learner-style functions written here from the formulas (a correct one must pass and
print "all checks passed"), one deliberately wrong function per classic mistake (each must be
rejected with an AssertionError naming that mistake), and a stub raising NotImplementedError
(must print "not implemented yet" and return None).
"""

import pytest
import torch

from transformer_lite.book.exercises import check_pre_norm_block, check_shift_right


def _not_implemented(*args, **kwargs):
    raise NotImplementedError


# =========================================================================== pre-norm block

def pre_norm_reference(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm2(x))


def pre_norm_returning_tuple(block, x):
    return pre_norm_reference(block, x), None


def post_norm_order(block, x):
    x = block.norm1(x + block.self_attn(x, x, x)[0])
    return block.norm2(x + block.ff(x))


def same_norm_twice(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm1(x))


def keys_not_normalized(block, x):
    x = x + block.self_attn(block.norm1(x), x, x)[0]
    return x + block.ff(block.norm2(x))


def residual_after_norm(block, x):
    h = block.norm1(x)
    x = h + block.self_attn(h, h, h)[0]
    h = block.norm2(x)
    return h + block.ff(h)


def no_attention_residual(block, x):
    h = block.norm1(x)
    x = block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm2(x))


def no_ff_residual(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return block.ff(block.norm2(x))


def final_norm_added(block, x):  # a mistake no variant describes
    return block.norm2(pre_norm_reference(block, x))


def wrong_shape(block, x):
    return pre_norm_reference(block, x)[:, :1]


@pytest.mark.parametrize("fn", [pre_norm_reference, pre_norm_returning_tuple])
def test_pre_norm_reference_passes(fn, capsys):
    assert check_pre_norm_block(fn) is None
    assert "check_pre_norm_block: all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (post_norm_order, "post-norm order"),
    (same_norm_twice, "one layer norm for both sublayers"),
    (keys_not_normalized, "keys and values read the un-normalized x"),
    (residual_after_norm, "residual taken from the normalized input"),
    (no_attention_residual, "no residual connection around the attention"),
    (no_ff_residual, "no residual connection around the feed-forward"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_pre_norm_wrong_implementation_is_named(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_pre_norm_block(wrong)


def test_pre_norm_unknown_mistake_reports_difference():
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_pre_norm_block(final_norm_added)


def test_pre_norm_wrong_shape_is_reported():
    with pytest.raises(AssertionError, match=r"expected shape \(2, 5, 8\), received \(2, 1, 8\)"):
        check_pre_norm_block(wrong_shape)


def test_pre_norm_checker_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_pre_norm_block(pre_norm_reference)
    assert torch.equal(torch.rand(3), expected)


def test_pre_norm_not_implemented_prints_and_returns_none(capsys):
    assert check_pre_norm_block(_not_implemented) is None
    assert "check_pre_norm_block: not implemented yet" in capsys.readouterr().out


# =========================================================================== teacher-forcing shift

def shift_reference(tgt, bos_id):
    out = tgt.new_full(tgt.shape, bos_id)
    out[:, 1:] = tgt[:, :-1]
    return out


def shift_left(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], dim=1)


def bos_overwrites(tgt, bos_id):
    out = tgt.clone()
    out[:, 0] = bos_id
    return out


def no_shift(tgt, bos_id):
    return tgt.clone()


def keeps_last_column(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)


def float_ids(tgt, bos_id):
    return shift_reference(tgt, bos_id).float()


def ignores_bos_id(tgt, bos_id):
    return shift_reference(tgt, 1)


def test_shift_reference_passes(capsys):
    assert check_shift_right(shift_reference) is None
    assert "check_shift_right: all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (shift_left, "shifted left"),
    (bos_overwrites, "BOS overwrites the first target token"),
    (no_shift, "no shift"),
    (keeps_last_column, "the last target column was kept"),
    (float_ids, "expected integer token ids"),
    (ignores_bos_id, r"entry \(0, 0\) is 1, expected 7"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_shift_wrong_implementation_is_named(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_shift_right(wrong)


def test_shift_not_implemented_prints_and_returns_none(capsys):
    assert check_shift_right(_not_implemented) is None
    assert "check_shift_right: not implemented yet" in capsys.readouterr().out

"""Checkers of chapters 4 and 5: check_pre_norm_block and check_shift_right.

Oracle: learner-style functions written here from the formulas (a correct one must pass and
print "all checks passed"), one deliberately wrong function per classic mistake (each must be
rejected with an AssertionError naming that mistake), and a stub raising NotImplementedError
(must print "not implemented yet" and return None).
"""

import pytest
import torch

from tests.conftest import CheckerCases, assert_leaves_global_random_state, assert_not_implemented
from transformer_lite.chapters.exercises import check_pre_norm_block, check_shift_right

CASES = CheckerCases()


# =========================================================================== pre-norm block


@CASES.passes(check_pre_norm_block)
def pre_norm_reference(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm2(x))


@CASES.passes(check_pre_norm_block)
def pre_norm_returning_tuple(block, x):
    return pre_norm_reference(block, x), None


@CASES.named(check_pre_norm_block, "post-norm order")
def post_norm_order(block, x):
    x = block.norm1(x + block.self_attn(x, x, x)[0])
    return block.norm2(x + block.ff(x))


@CASES.named(check_pre_norm_block, "one layer norm for both sublayers")
def same_norm_twice(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm1(x))


@CASES.named(check_pre_norm_block, "keys and values read the un-normalized x")
def keys_not_normalized(block, x):
    x = x + block.self_attn(block.norm1(x), x, x)[0]
    return x + block.ff(block.norm2(x))


@CASES.named(check_pre_norm_block, "residual taken from the normalized input")
def residual_after_norm(block, x):
    h = block.norm1(x)
    x = h + block.self_attn(h, h, h)[0]
    h = block.norm2(x)
    return h + block.ff(h)


@CASES.named(check_pre_norm_block, "no residual connection around the attention")
def no_attention_residual(block, x):
    h = block.norm1(x)
    x = block.self_attn(h, h, h)[0]
    return x + block.ff(block.norm2(x))


@CASES.named(check_pre_norm_block, "no residual connection around the feed-forward")
def no_ff_residual(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h)[0]
    return block.ff(block.norm2(x))


@CASES.named(check_pre_norm_block, "matches none of the usual mistakes")
def final_norm_added(block, x):  # a mistake no variant describes
    return block.norm2(pre_norm_reference(block, x))


@CASES.named(check_pre_norm_block, match=r"expected shape \(2, 5, 8\), received \(2, 1, 8\)")
def wrong_shape(block, x):
    return pre_norm_reference(block, x)[:, :1]


def test_pre_norm_checker_leaves_the_global_random_state_alone():
    assert_leaves_global_random_state(check_pre_norm_block, pre_norm_reference)


# =========================================================================== teacher-forcing shift


@CASES.passes(check_shift_right)
def shift_reference(tgt, bos_id):
    out = tgt.new_full(tgt.shape, bos_id)
    out[:, 1:] = tgt[:, :-1]
    return out


@CASES.named(check_shift_right, "shifted left")
def shift_left(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], dim=1)


@CASES.named(check_shift_right, "BOS overwrites the first target token")
def bos_overwrites(tgt, bos_id):
    out = tgt.clone()
    out[:, 0] = bos_id
    return out


@CASES.named(check_shift_right, "no shift")
def no_shift(tgt, bos_id):
    return tgt.clone()


@CASES.named(check_shift_right, "the last target column was kept")
def keeps_last_column(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)


@CASES.named(check_shift_right, "expected integer token ids")
def float_ids(tgt, bos_id):
    return shift_reference(tgt, bos_id).float()


@CASES.named(check_shift_right, match=r"entry \(0, 0\) is 1, expected 7")
def ignores_bos_id(tgt, bos_id):
    return shift_reference(tgt, 1)


@pytest.mark.parametrize("check", [check_pre_norm_block, check_shift_right])
def test_stub_prints_not_implemented(check, capsys):
    assert_not_implemented(check, capsys)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

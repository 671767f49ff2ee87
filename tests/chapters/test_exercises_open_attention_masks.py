"""Tests of the checkers of the open-ended exercises of chapters 1 and 2.

``check_score_spread`` (chapter 1): the spread over the keys of the scores behind a row of softmax weights.
``check_causal_positions`` (chapter 2): positions read from one causal attention layer, given a
beginning-of-sequence marker in feature 0.

Each checker must pass a correct solution (written here independently of the package: torch's own
``F.scaled_dot_product_attention`` for the causal layer) and name the classic mistakes.
"""

import pytest
import torch
import torch.nn.functional as F

from transformer_lite.chapters.exercises import check_causal_positions, check_score_spread


def _assert_passes(check, capsys, *fns):
    assert check(*fns) is None
    assert "all checks passed" in capsys.readouterr().out


def _not_implemented(*args, **kwargs):
    raise NotImplementedError


# =========================================================================== chapter 1: score spread


def spread_reference(weights):
    return weights.log().std(dim=-1, correction=0)


def spread_by_centring(weights):  # a second correct route: centre the log-weights by hand
    log_w = weights.log()
    centred = log_w - log_w.mean(dim=-1, keepdim=True)
    return centred.pow(2).mean(dim=-1).sqrt()


@pytest.mark.parametrize("fn", [spread_reference, spread_by_centring], ids=["std", "by-hand"])
def test_score_spread_correct_solutions_pass(fn, capsys):
    _assert_passes(check_score_spread, capsys, fn)


@pytest.mark.parametrize(
    "wrong, expected_message",
    [
        (lambda w: w.std(dim=-1, correction=0), "spread of the weights themselves"),
        (lambda w: w.log().std(dim=-1, correction=1), "sample standard deviation"),
        (lambda w: w.log().var(dim=-1, correction=0), "returned the variance"),
        (lambda w: w.log().std(dim=-2, correction=0), "spread over the queries"),
    ],
    ids=["weights-not-logs", "correction-1", "variance", "over-queries"],
)
def test_score_spread_mistakes_are_named(wrong, expected_message):
    with pytest.raises(AssertionError, match=expected_message):
        check_score_spread(wrong)


def test_score_spread_wrong_shape_and_unknown_mistake():
    with pytest.raises(AssertionError, match=r"expected shape \(3,\)"):
        check_score_spread(lambda w: w.log())
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_score_spread(lambda w: spread_reference(w) + 0.1)


def test_score_spread_not_implemented_prints_and_returns_none(capsys):
    assert check_score_spread(_not_implemented) is None
    assert "not implemented yet" in capsys.readouterr().out


# =========================================================================== chapter 2: positions from the mask


def _uniform_causal_signal(x, is_causal=True):
    marker = x[..., :1]  # (B, L, 1): 1 at the beginning-of-sequence token, 0 elsewhere
    zeros = torch.zeros_like(marker)  # zero queries and keys: every allowed key scores 0
    # (B, L)
    return F.scaled_dot_product_attention(zeros, zeros, marker, is_causal=is_causal)[..., 0]


def positions_reference(x):
    return 1.0 / _uniform_causal_signal(x) - 1.0


def test_causal_positions_correct_solution_passes(capsys):
    _assert_passes(check_causal_positions, capsys, positions_reference)


@pytest.mark.parametrize(
    "wrong, expected_message",
    [
        (_uniform_causal_signal, "returned the attention output"),
        (lambda x: 1.0 / _uniform_causal_signal(x), "off by one"),
        (lambda x: 1.0 / _uniform_causal_signal(x, is_causal=False) - 1.0, "no causal mask"),
    ],
    ids=["signal", "count", "no-mask"],
)
def test_causal_positions_mistakes_are_named(wrong, expected_message):
    with pytest.raises(AssertionError, match=expected_message):
        check_causal_positions(wrong)


def test_causal_positions_wrong_shape_and_unknown_mistake():
    with pytest.raises(AssertionError, match=r"expected shape \(2, 5\)"):
        check_causal_positions(lambda x: x[..., 0:1])
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_causal_positions(lambda x: 2 * positions_reference(x) + 1)


def test_causal_positions_not_implemented_prints_and_returns_none(capsys):
    assert check_causal_positions(_not_implemented) is None
    assert "not implemented yet" in capsys.readouterr().out

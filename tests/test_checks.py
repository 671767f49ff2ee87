"""The shared checks (transformer_lite.checks) and the finder of installed files.

Oracles: the messages the docstrings promise; a module's mode before and after; importlib.metadata.
(The blocks' post-norm and pre-norm formulas are checked against torch's layers in test_block.py
and test_decoder.py.)
"""

import importlib.metadata

import pytest
import torch
from torch import nn

from transformer_lite.checks import (
    check_heads,
    check_last_dim,
    check_nonnegative_int,
    check_positions,
    check_positive_int,
    check_positive_sizes,
    check_sequences,
    check_token_ids,
    eval_mode,
)
from transformer_lite.pretrained.files import installed_files


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_even_after_an_error(training):
    model = nn.Sequential(nn.Dropout(0.5)).train(training)
    with eval_mode(model) as m:
        assert m is model and not model.training and not model[0].training
    assert model.training is training
    with pytest.raises(RuntimeError, match="boom"), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training is training


def test_token_id_checks_name_what_was_expected_and_received():
    check_token_ids("M", "ids", torch.tensor([[0, 4]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"M: expected integer ids of shape \(B, L\), received \(2,\) torch.int64"
    ):
        check_token_ids("M", "ids", torch.tensor([0, 4]), vocab_size=5)
    with pytest.raises(ValueError, match=r"received \(1, 2\) torch.float32"):
        check_token_ids("M", "ids", torch.zeros(1, 2), vocab_size=5)
    with pytest.raises(ValueError, match=r"received \(1, 2\) torch.bool"):
        check_token_ids("M", "ids", torch.zeros(1, 2, dtype=torch.bool), vocab_size=5)
    with pytest.raises(ValueError, match="received list"):
        check_token_ids("M", "ids", [[0]], vocab_size=5)
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 5\), received min 0, max 5 in ids"
    ):
        check_token_ids("M", "ids", torch.tensor([[0, 5]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 5\), received min -1, max 2 in ids"
    ):
        check_token_ids("M", "ids", torch.tensor([[-1, 2]]), vocab_size=5)
    with pytest.raises(
        ValueError, match=r"expected ids with at least 1 position\(s\), received \(3, 0\)"
    ):
        check_token_ids("M", "ids", torch.zeros(3, 0, dtype=torch.long), vocab_size=5, min_len=1)


def test_size_and_shape_checks():
    check_positive_int("f", "n", 1)
    for bad in (0, -1, 1.0, True, "2"):
        with pytest.raises(
            ValueError, match=rf"f: expected n to be a positive int, received {bad!r}"
        ):
            check_positive_int("f", "n", bad)
    check_nonnegative_int("g", "k", 0)
    for bad in (-1, 1.0, False, None):
        with pytest.raises(ValueError, match=rf"g: expected an int k >= 0, received {bad!r}"):
            check_nonnegative_int("g", "k", bad)
    check_positive_sizes("F", d_model=1, d_ff=2)
    with pytest.raises(
        ValueError, match="F: expected positive int d_model and d_ff, received 4, 0"
    ):
        check_positive_sizes("F", d_model=4, d_ff=0)
    for bad in (64.0, True):
        with pytest.raises(
            ValueError,
            match=rf"F: expected positive int d_model, n_heads and d_ff, received {bad!r}, 2, 8",
        ):
            check_positive_sizes("F", d_model=bad, n_heads=2, d_ff=8)
    check_last_dim("N", torch.zeros(2, 3), 3)
    with pytest.raises(
        ValueError, match=r"N: expected input of shape \(\.\.\., 4\), received \(2, 3\)"
    ):
        check_last_dim("N", torch.zeros(2, 3), 4)


def test_head_position_and_sequence_checks():
    check_heads("A", 12, 4, 2)
    with pytest.raises(
        ValueError, match="A: d_model must be divisible by n_heads, received d_model=10, n_heads=4"
    ):
        check_heads("A", 10, 4)
    with pytest.raises(
        ValueError,
        match="A: n_heads must be divisible by n_kv_heads, received n_heads=4, n_kv_heads=3",
    ):
        check_heads("A", 12, 4, 3)
    check_positions("P", 6, 4, 10)  # positions 6..9
    with pytest.raises(
        ValueError,
        match=r"P: positions 7\.\.10 requested, but max_len=10 allows positions 0\.\.9 only",
    ):
        check_positions("P", 7, 4, 10)
    with pytest.raises(ValueError, match=r"P: expected an int offset >= 0, received -1"):
        check_positions("P", -1, 4, 10)
    x, memory = torch.zeros(2, 5, 8), torch.zeros(2, 3, 8)
    check_sequences("S", 8, x=x, memory=memory)  # lengths may differ
    with pytest.raises(
        ValueError, match=r"S: expected memory of shape \(B, len, 8\), received \(2, 3\)"
    ):
        check_sequences("S", 8, x=x, memory=torch.zeros(2, 3))
    with pytest.raises(
        ValueError,
        match=r"S: expected one batch size B, received x \(2, 5, 8\), memory \(1, 3, 8\)",
    ):
        check_sequences("S", 8, x=x, memory=torch.zeros(1, 3, 8))


def test_installed_files_finds_a_distribution_and_nothing_for_a_missing_one():
    files = installed_files("torch")
    assert files and {str(f) for f in files} == {str(f) for f in importlib.metadata.files("torch")}
    assert installed_files("no-such-distribution-for-tests") == []

"""The input checks of the public entry points, written once.

The package checks its inputs where a reader calls it (a model's ``forward``, a
public function) and trusts its own callers inside. Every error is a
``ValueError`` naming what was expected and what was received.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

__all__ = [
    "check_positive_int",
    "check_nonnegative_int",
    "check_positive_sizes",
    "check_last_dim",
    "check_token_ids",
    "eval_mode",
]


def check_positive_int(owner: str, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 1``.

    Args:
        owner: the public function or class the message names.
        name: the argument's name.
        n: the value to check.

    Raises:
        ValueError: ``"{owner}: expected {name} to be a positive int, received {n!r}"``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{owner}: expected {name} to be a positive int, received {n!r}")


def check_nonnegative_int(owner: str, name: str, n) -> None:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) ``>= 0``, e.g. a number of new tokens.

    Raises:
        ValueError: ``"{owner}: expected an int {name} >= 0, received {n!r}"``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{owner}: expected an int {name} >= 0, received {n!r}")


def check_positive_sizes(owner: str, **sizes: int) -> None:
    """Raise ``ValueError`` unless every size is ``>= 1``.

    Raises:
        ValueError: ``"{owner}: expected positive d_model and d_ff, received 0, 4"`` (the names and
            values of ``sizes``, in order).
    """
    if any(n < 1 for n in sizes.values()):
        raise ValueError(
            f"{owner}: expected positive {' and '.join(sizes)}, "
            f"received {', '.join(str(n) for n in sizes.values())}"
        )


def check_last_dim(owner: str, x: Tensor, d: int) -> None:
    """Raise ``ValueError`` unless ``x`` has shape ``(..., d)``.

    Raises:
        ValueError: ``"{owner}: expected input of shape (..., d), received (...)"``.
    """
    if x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(f"{owner}: expected input of shape (..., {d}), received {tuple(x.shape)}")


def check_token_ids(owner: str, name: str, ids, vocab_size: int, min_len: int = 0) -> None:
    """Raise ``ValueError`` unless ``ids`` is a 2-D integer tensor ``(B, L)`` with values in ``[0, vocab_size)``.

    Args:
        owner: the public function or class the message names.
        name: the argument's name (``"input_ids"``, ``"src_ids"``, ...).
        ids: the value to check.
        vocab_size: the number of token ids V.
        min_len: the smallest length L accepted.

    Raises:
        ValueError: if ``ids`` is not a tensor, is not 2-D, is floating or boolean, has fewer than
            ``min_len`` positions, or holds an id outside ``[0, vocab_size)``.
    """
    if (
        not isinstance(ids, Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.dtype == torch.bool
    ):
        received = (
            f"{tuple(ids.shape)} {ids.dtype}" if isinstance(ids, Tensor) else type(ids).__name__
        )
        raise ValueError(f"{owner}: expected integer {name} of shape (B, L), received {received}")
    if ids.shape[1] < min_len:
        raise ValueError(
            f"{owner}: expected {name} with at least {min_len} position(s), received {tuple(ids.shape)}"
        )
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{owner}: token ids must lie in [0, {vocab_size}), received min {int(ids.min())}, "
            f"max {int(ids.max())} in {name}"
        )


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode (dropout off) for the ``with`` block, then restore its mode.

    The previous mode comes back even if the block raises (``try``/``finally``).

    Yields:
        ``model``.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)

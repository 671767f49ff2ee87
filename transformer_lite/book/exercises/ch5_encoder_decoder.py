"""Exercise checkers of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
teacher forcing's shift.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._checking import _call, _check_tensor, _checker, _gen

__all__ = [
    "check_shift_right",
]


# --------------------------------------------------------------------------- chapter 5: teacher forcing


@_checker("check_shift_right")
def check_shift_right(fn: Callable) -> None:
    """Check ``fn(tgt, bos_id) -> decoder_input``: teacher forcing's shift (Vaswani et al., 2017, Sec. 3.1).

    ``tgt (B, T)`` int64; expected ``(B, T)``: ``bos_id`` in column 0, then ``tgt[:, :-1]``.

    Raises:
        AssertionError: naming the likely mistake (shifted left, BOS appended instead of prepended, the last
            column kept so the length grows, BOS overwriting the first token).
    """
    g = _gen(5)
    for B, T, bos in [(3, 6, 1), (1, 1, 1), (4, 9, 7), (2, 2, 0)]:
        case = f"tgt of shape {(B, T)}, bos_id={bos}"
        tgt = torch.randint(3, 13, (B, T), generator=g)
        tgt[0, -1] = 0  # some padding at the end of the first row
        out = _call(fn, tgt.clone(), bos)
        ref = torch.cat([torch.full((B, 1), bos), tgt[:, :-1]], dim=1)
        if (
            isinstance(out, Tensor)
            and tuple(out.shape) == (B, T + 1)
            and torch.equal(out.long(), torch.cat([torch.full((B, 1), bos), tgt], dim=1))
        ):
            raise AssertionError(
                f"wrong decoder input for {case}. Likely mistake: the last target column was kept, "
                f"so the input is one longer than the target; drop it (tgt[:, :-1])"
            )
        _check_tensor(out, "decoder input", (B, T), case)
        if out.is_floating_point():
            raise AssertionError(
                f"decoder input for {case}: expected integer token ids, received dtype {out.dtype}"
            )
        if torch.equal(out.long(), ref):
            continue
        variants = {
            "shifted left: the decoder input starts with BOS and is the target moved one step to the RIGHT": torch.cat(
                [tgt[:, 1:], torch.full((B, 1), bos)], dim=1
            ),
            "BOS overwrites the first target token instead of being prepended": torch.cat(
                [torch.full((B, 1), bos), tgt[:, 1:]], dim=1
            ),
            "no shift: the decoder would see the token it must predict": tgt,
        }
        for mistake, value in variants.items():
            if torch.equal(out.long(), value):
                raise AssertionError(f"wrong decoder input for {case}. Likely mistake: {mistake}")
        bad = (out.long() != ref).nonzero()[0].tolist()
        raise AssertionError(
            f"wrong decoder input for {case}: entry {tuple(bad)} is {int(out[bad[0], bad[1]])}, "
            f"expected {int(ref[bad[0], bad[1]])}"
        )

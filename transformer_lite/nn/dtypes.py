"""The package's dtype rules, written once (the notation page states them).

- :func:`compute_dtype`: attention and the norms compute float16/bfloat16 inputs in float32 and
  return the input's dtype, as PyTorch's fused kernels do: a softmax or a variance summed over
  hundreds of half-precision terms loses most of its digits otherwise.
- :func:`angle_dtype`: RoPE's angles ``m * theta`` are float64 for float64 inputs and float32
  otherwise, half precision included: at position 4096 a float16 angle would be off by up to 2 radians.
"""

from __future__ import annotations

import torch

__all__ = ["compute_dtype", "angle_dtype"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for float16/bfloat16, else ``dtype`` itself: what attention and the norms compute in."""
    return torch.float32 if dtype in _HALF_DTYPES else dtype


def angle_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64, else float32: the dtype of RoPE's angles, cosines and sines."""
    return torch.float64 if dtype == torch.float64 else torch.float32

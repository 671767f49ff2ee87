"""Measuring what a call costs in memory: the peak tensor storage it allocates (chapter 7).

Chapter 7 (``notebooks/07_cost.ipynb``), ``benchmarks/bench_attention.py`` and the tests use
:func:`peak_allocated_bytes` to check the claim of
:func:`~transformer_lite.nn.efficient_attention.memory_efficient_attention`: its extra storage
stays a few tiles while direct attention holds all ``L * S`` scores. It is measurement, not
maths, so it lives with the book's helpers rather than beside the attention it measures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile

__all__ = ["peak_allocated_bytes"]


def peak_allocated_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Peak bytes of tensor storage that PyTorch's CPU allocator holds during ``fn(*args, **kwargs)``.

    Runs the call once under ``torch.profiler.profile(profile_memory=True)``,
    which records every allocation and free made through PyTorch's CPU
    allocator with a timestamp; the peak of their running sum is the largest
    amount of *new* tensor storage alive at any moment of the call (storage
    that existed before the call is not counted; outputs that are still alive
    at the end are). Python's ``tracemalloc`` cannot do this: torch allocates
    outside Python's allocator.

    Not counted: memory that libraries allocate behind PyTorch's back (e.g.
    BLAS work buffers), allocator overhead and fragmentation, Python objects.
    Process-level measurements (maximum resident set size) see those; the
    benchmark in ``benchmarks/`` reports both.

    Args:
        fn: the callable to measure; ``args``/``kwargs`` are passed to it.
            Wrap it in ``torch.no_grad()`` yourself to leave autograd's saved
            tensors out.

    Returns:
        Peak bytes (int, >= 0). The result of ``fn`` is discarded.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(*args, **kwargs)
    # kineto_results holds the raw events; "[memory]" events carry signed byte counts (+ alloc, - free).
    events = prof.profiler.kineto_results.events()
    changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    running = peak = 0
    for _, nbytes in changes:
        running += nbytes
        peak = max(peak, running)
    return peak

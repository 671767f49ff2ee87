"""benchmarks/attention_floors.py measures the same computation in every variant, and summarizes correctly.

Oracles: our ``scaled_dot_product_attention`` in float64 (the variants are
float32, so they must agree to float32 rounding), and a hand-made two-round
timing dictionary whose medians and ratios are computed by hand below. No
timing is asserted.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

from transformer_lite import scaled_dot_product_attention

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attention_floors.py"


@pytest.fixture(scope="module")
def floors():
    spec = importlib.util.spec_from_file_location("attention_floors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention_floors"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["attention_floors"]


def _reference(B: int, H: int, L: int, d_head: int):
    """The inputs make_variants builds (same seed and order), and our attention on them in float64."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, L, d_head, generator=gen) for _ in range(3))
    out, weights = scaled_dot_product_attention(q.double(), k.double(), v.double())
    return out, weights


@pytest.mark.parametrize("shape", [(1, 4, 16, 8), (2, 3, 33, 5)])
def test_every_attention_variant_computes_the_same_attention(floors, shape):
    fns = floors.make_variants(*shape)
    assert set(fns) == set(floors.VARIANTS)
    out64, weights64 = _reference(*shape)
    with torch.inference_mode():
        for name in ("ours", "bare", "bare_inplace", "torch_math", "torch_fused"):
            result = fns[name]()
            out = result[0] if isinstance(result, tuple) else result
            assert out.shape == out64.shape, name
            torch.testing.assert_close(
                out.double(), out64, rtol=1e-5, atol=1e-6, msg=f"output of {name}"
            )
            if isinstance(result, tuple):  # the variants that return the weights, as ours does
                torch.testing.assert_close(
                    result[1].double(), weights64, rtol=1e-5, atol=1e-6, msg=f"weights of {name}"
                )


def test_bare_inplace_weights_overwrite_the_scores_and_equal_bare(floors):
    fns = floors.make_variants(1, 2, 24, 8)
    with torch.inference_mode():
        out_bare, w_bare = fns["bare"]()
        out_inplace, w_inplace = fns["bare_inplace"]()
    assert torch.equal(w_inplace, w_bare)  # same softmax kernel, only the destination differs
    assert torch.equal(out_inplace, out_bare)


def test_copy_variant_copies_a_score_sized_matrix(floors):
    fns = floors.make_variants(1, 3, 10, 4)
    dst = fns["copy_LxL"]()
    assert dst.shape == (1, 3, 10, 10)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        torch.randn(1, 3, 10, 4, generator=gen)  # q, k, v come first from the same generator
    assert torch.equal(dst, torch.randn(1, 3, 10, 10, generator=gen))


def test_summarize_pools_rounds_and_takes_ratios_to_the_fused_kernel(floors):
    def variant(times, faults):
        return {"times": times, "faults": faults}

    rounds = []
    for scale in (1.0, 2.0):  # round 2 is a slower period: every time doubled
        r = {
            n: variant([scale * 0.010, scale * 0.030, scale * 0.020], [0, 0, 0])
            for n in floors.VARIANTS
        }
        r["torch_fused"] = variant([scale * 0.004, scale * 0.005, scale * 0.006], [0, 0, 0])
        r["ours"] = variant([scale * 0.007, scale * 0.008, scale * 0.009], [8192, 8192, 0])
        rounds.append(r)
    s = floors.summarize(rounds)
    # ours pooled: 7, 8, 9, 14, 16, 18 ms -> median (9 + 14) / 2 = 11.5, min 7;
    # torch_fused pooled: 4, 5, 6, 8, 10, 12 ms -> median (6 + 8) / 2 = 7, min 4.
    assert math.isclose(s["ours"]["median_ms"], 11.5)
    assert math.isclose(s["ours"]["min_ms"], 7.0)
    assert math.isclose(s["torch_fused"]["median_ms"], 7.0)
    assert math.isclose(s["ours"]["ratio"], 11.5 / 7.0)
    assert math.isclose(s["ours"]["ratio_min"], 7.0 / 4.0)
    assert math.isclose(s["ours"]["faults_per_call"], 4 * 8192 / 6)
    # per-round ratios of medians: 8 / 5 in both rounds (the slow period cancels out)
    assert s["ours"]["ratio_range"] == pytest.approx([1.6, 1.6])
    assert s["torch_fused"]["ratio"] == 1.0

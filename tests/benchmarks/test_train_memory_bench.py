"""benchmarks/train_memory.py: its three attentions, its saved-bytes count and its report.

Oracles: the package's ``memory_efficient_attention`` for the checkpointed (recomputed) method,
outputs and gradients; the bytes of one (B, H, L, L) float32 matrix, which the direct method's
autograd must keep (its weights); the checked-in JSON, from which the report is regenerated and
must equal the checked-in .md byte for byte. No memory peak or time is asserted here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import transformer_lite as tl

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))


def _script():
    spec = importlib.util.spec_from_file_location("bench_train_memory", BENCH / "train_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _qkv(L, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(1, 2, L, 8, generator=gen, dtype=torch.float64, requires_grad=True)
        for _ in range(3)
    ]


@pytest.mark.parametrize("method", ["direct", "tiled", "recomputed"])
def test_each_method_computes_attention_and_its_gradients(method):
    # L = 37 with blocks of 16: blocks that do not divide L
    bench = _script()
    q, k, v = _qkv(37)
    out = bench.attention(method, 16)(q, k, v)
    grads = torch.autograd.grad(out.sin().sum(), (q, k, v))
    q2, k2, v2 = _qkv(37)
    ref = tl.memory_efficient_attention(q2, k2, v2, block_size=16)
    ref_grads = torch.autograd.grad(ref.sin().sum(), (q2, k2, v2))
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


def test_saved_bytes_sees_the_direct_methods_weights():
    bench = _script()
    q, k, v = (t.detach().float().requires_grad_() for t in _qkv(64))
    saved = bench.saved_bytes(bench.attention("direct", 16), q, k, v)
    assert saved >= 1 * 2 * 64 * 64 * 4  # the (B, H, L, L) weights, float32
    with torch.no_grad():
        assert bench.saved_bytes(bench.attention("direct", 16), q, k, v) == 0


def test_checked_in_report_is_the_scripts_output(tmp_path):
    bench = _script()
    data = json.loads((BENCH / "train_memory.json").read_text())
    out = tmp_path / "train_memory.md"
    bench.write_md(out, data["info"], data["rows"])
    assert out.read_text() == (BENCH / "train_memory.md").read_text()

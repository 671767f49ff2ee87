"""The components need torch alone: ``import transformer_lite.nn`` (and the models, and the top-level
names of both) work in a Python where the packages of the figures, widgets, weight loaders and
progress bars cannot be imported.

Oracle: a fresh interpreter whose import system refuses those packages (numpy stays: torch itself
imports it). The same script without the block finds them imported by ``transformer_lite.pretrained``,
so the block is seen to bite.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCKED = ["matplotlib", "plotly", "IPython", "ipywidgets", "gguf", "tokenizers", "safetensors",
           "tqdm", "onnx", "onnxruntime"]  # fmt: skip

SCRIPT = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(",")) if sys.argv[1] else set()
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed here")
sys.meta_path.insert(0, Refuse())
import torch
{body}
"""


def run(body: str, blocked: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("{body}", body), ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_nn_and_models_import_and_run_with_torch_alone():
    body = """
import transformer_lite.nn, transformer_lite.models
import transformer_lite as tl
x = torch.randn(2, 5, 8)
y = tl.MultiHeadAttention(8, 2)(x, attn_mask=tl.causal_mask(5)).output
assert y.shape == (2, 5, 8)
model = tl.DecoderOnlyTransformer(tl.DecoderOnlyConfig(vocab_size=11, max_len=8, d_model=8, n_heads=2, d_ff=16))
assert model(torch.zeros(1, 4, dtype=torch.long)).logits.shape == (1, 4, 11)
loaded = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
assert not loaded, loaded
print("ok")
"""
    result = run(body, BLOCKED)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_the_block_bites_on_the_loaders():
    body = "from transformer_lite import load_smollm2"
    refused = run(body, BLOCKED)
    assert refused.returncode != 0 and "is not installed here" in refused.stderr
    assert run(body, []).returncode == 0


@pytest.mark.parametrize("name", ["MultiHeadAttention", "load_minilm", "GRULanguageModel"])
def test_every_public_name_resolves_and_unknown_names_raise(name):
    import transformer_lite as tl

    assert name in tl.__all__ and name in dir(tl) and getattr(tl, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'MultiHeadAtention'"):
        tl.MultiHeadAtention  # noqa: B018

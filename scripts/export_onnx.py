"""Export the book's two live models to ONNX, for the pages that compute in the reader's browser.

* ``minilm.onnx``: the encoder built by ``tl.load_minilm()`` (all-MiniLM-L6-v2, Wang et al., 2020),
  input ``input_ids`` int64 ``(1, L)`` (``L`` from 1 to 512, one sentence, no padding), outputs
  ``hidden`` float32 ``(1, L, 384)`` (last layer) and ``attentions`` float32 ``(1, 6, 12, L, L)``
  (layer, head, query, key).
* ``charlm.onnx``: the chapter-8 character model (a ``tl.DecoderOnlyTransformer`` read with
  ``load_checkpoint``), input ``input_ids`` int64 ``(1, max_len)``, outputs ``logits`` float32
  ``(1, max_len, V)`` and ``attentions`` float32 ``(1, n_layers, H, max_len, max_len)``. The length is
  fixed, the window the page feeds: a text of ``L <= max_len`` characters is fed right-padded with
  id 0, and its logits are rows ``0 .. L - 1``. That is exact, not an approximation: the model is
  causal, so row ``t`` never sees the padding after ``t`` (its weights on those keys are exactly
  zero); the tests check it.
* ``manifest.json``: what the page needs besides the graphs (vocabulary, sizes, file sizes, hashes),
  and the key of the inputs the export was made from (``source_key``), so a build re-exports only
  when the weights, the package or this script change.

The graphs are captured from the package's own modules by PyTorch's current exporter
(``torch.onnx.export(..., dynamo=True)``: ``torch.export`` then onnxscript, opset 18), which follows
the modules' input checks because they read shapes only, never a tensor's values. MiniLM's length is
a dynamic dimension ``L`` in ``[1, 512]`` (the positions it has). The graphs hold no checks, so the
page validates its inputs itself (ids in range, ``L`` within the positions). Weights stay float32, in
the one ``.onnx`` file (no external data): ``tests/book/test_live_export.py`` proves each graph, run by
``onnxruntime``, equal to the module within 1e-4 on hidden states, logits and attention weights.

Usage (the book's build runs it through ``book/_ext/live_models.py`` when the output is stale)::

    python scripts/export_onnx.py --out build/live [--checkpoint checkpoints/ch8_transformer.safetensors]

Without a chapter-8 checkpoint only MiniLM is exported and the manifest says ``"charlm": null``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from transformer_lite.pretrained.minilm import load_minilm, minilm_dir
from transformer_lite.training.train import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CHECKPOINT = ROOT / "checkpoints" / "ch8_transformer.safetensors"
OPSET = 18  # the lowest the exporter's onnxscript functions (torchlib) are written for
MINILM_FILES = ("tokenizer.json", "tokenizer_config.json")


class AttentionOutputs(nn.Module):
    """Wrap a model whose result holds its main output first and ``attentions`` (a tuple of
    n_layers ``(B, H, L, S)`` weights), so that the weights leave the graph as one tensor
    ``(B, n_layers, H, L, S)``.

    Args:
        model: a ``tl.BertEncoder`` (returns ``EncoderOutput(output, attentions)``) or a
            ``tl.DecoderOnlyTransformer`` (returns ``ModelOutput(logits, attentions, cache)``).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        result = self.model(input_ids)
        # (B, L, D or V), (B, n_layers, H, L, L)
        return result[0], torch.stack(result.attentions, dim=1)


def _export(
    module: nn.Module, example: Tensor, path: Path, out_name: str, max_len: int | None = None
) -> None:
    """Export ``AttentionOutputs(module)`` on ``example`` ``(1, L)``; with ``max_len``, ``L`` is a
    dynamic dimension in ``[1, max_len]``, otherwise fixed at the example's length."""
    shapes = ({1: torch.export.Dim("L", min=1, max=max_len)},) if max_len else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notices (deprecations inside torch)
        torch.onnx.export(
            AttentionOutputs(module).eval(),
            (example,),
            str(path),
            input_names=["input_ids"],
            output_names=[out_name, "attentions"],
            opset_version=OPSET,
            dynamo=True,
            dynamic_shapes=shapes,
            external_data=False,  # the weights inside the one file the page loads
            optimize=True,
            verbose=False,
        )


def export_minilm(out_dir: Path) -> dict:
    """Write ``minilm.onnx`` and copy the tokenizer files into ``out_dir``; return the manifest entry."""
    encoder, tokenizer = load_minilm()
    # (1, 13)
    example = torch.tensor([tokenizer.encode("The cat sat on the mat because it was tired.")])
    path = out_dir / "minilm.onnx"
    with torch.no_grad():
        _export(encoder, example, path, "hidden", max_len=encoder.config.max_len)
    folder = minilm_folder()
    for name in MINILM_FILES:
        (out_dir / name).write_bytes((folder / name).read_bytes())
    c = encoder.config
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "sha256": _sha256(path),
        "tokenizer": list(MINILM_FILES),
        "max_len": c.max_len,
        "n_layers": c.n_layers,
        "n_heads": c.n_heads,
        "d_model": c.d_model,
        "vocab_size": c.vocab_size,
        "dtype": "float32",
    }


def export_charlm(checkpoint: Path, out_dir: Path) -> dict:
    """Write ``charlm.onnx`` from a chapter-8 checkpoint; return the manifest entry (with the vocabulary)."""
    model, meta = load_checkpoint(checkpoint)
    model.eval()
    vocab = meta.get("vocab")
    if not vocab:
        raise ValueError(
            f"export_charlm: expected the checkpoint metadata to hold 'vocab', received keys {sorted(meta)}"
        )
    c = model.config
    # the fixed length (see the module docstring)
    example = torch.zeros((1, c.max_len), dtype=torch.long)
    path = out_dir / "charlm.onnx"
    with torch.no_grad():
        _export(model, example, path, "logits")
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "sha256": _sha256(path),
        "checkpoint": checkpoint.name,
        "vocab": list(vocab),
        "max_len": c.max_len,
        "fixed_len": c.max_len,
        "pad_id": 0,
        "n_layers": c.n_layers,
        "n_heads": c.n_heads,
        "d_model": c.d_model,
        "vocab_size": c.vocab_size,
        "parameters": model.num_parameters(),
        "dtype": "float32",
    }


def minilm_folder() -> Path:
    """The installed all-MiniLM-L6-v2 folder (``model.safetensors``, ``tokenizer.json``, ...)."""
    return minilm_dir()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_key(checkpoint: Path | None) -> str:
    """A hash of everything the export depends on: the weights, the package's source, this script,
    and the versions of torch and onnx. Equal keys mean an existing export is still valid."""
    import onnx

    h = hashlib.sha256()
    h.update(f"torch {torch.__version__} onnx {onnx.__version__} opset {OPSET}\n".encode())
    files = [
        Path(__file__).resolve(),
        minilm_folder() / "model.safetensors",
        *(minilm_folder() / n for n in MINILM_FILES),
    ]
    files += sorted((ROOT / "transformer_lite").rglob("*.py"))
    if checkpoint is not None:
        files.append(checkpoint)
    for f in files:
        h.update(str(f.name).encode())
        h.update(_sha256(f).encode())
    return h.hexdigest()


def export_all(out_dir: Path, checkpoint: Path | None, force: bool = False) -> dict:
    """Export both models into ``out_dir`` unless ``manifest.json`` there has the current source key.

    Returns:
        The manifest (also written to ``out_dir / "manifest.json"``).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if checkpoint is not None and not checkpoint.is_file():
        checkpoint = None
    key = source_key(checkpoint)
    manifest_path = out_dir / "manifest.json"
    if not force and manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        files_ok = all(
            (out_dir / e["file"]).is_file() for e in (old.get("minilm"), old.get("charlm")) if e
        )
        if old.get("source_key") == key and files_ok:
            return old
    for stale in ("minilm.onnx", "charlm.onnx"):
        (out_dir / stale).unlink(missing_ok=True)
    manifest = {
        "source_key": key,
        "minilm": export_minilm(out_dir),
        "charlm": export_charlm(checkpoint, out_dir) if checkpoint is not None else None,
    }
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "live", help="output folder")
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=DEFAULT_CHECKPOINT,
        help="chapter-8 safetensors checkpoint",
    )
    p.add_argument("--force", action="store_true", help="export even if the output is up to date")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    m = export_all(args.out, args.checkpoint, args.force)
    for name in ("minilm", "charlm"):
        e = m[name]
        print(
            f"{name}: "
            + (f"{e['file']} {e['bytes'] / 1e6:.1f} MB" if e else "no checkpoint, not exported")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

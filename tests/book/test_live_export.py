"""The ONNX graphs the book's live pages run (scripts/export_onnx.py) compute what the package computes.

Oracle: the PyTorch modules themselves (``tl.load_minilm()``'s encoder and the chapter-8
``DecoderOnlyTransformer``), float32, on the same token ids; the graphs are run by ``onnxruntime``
(CPU). Tolerance 1e-4 absolute on hidden states, logits and attention weights (the graphs keep the
float32 weights; the differences are rounding, about 1e-6). The chapter-8 graph has a fixed length and
is fed right-padded text: the test also checks that the padding changes nothing before it (causality).

The chapter-8 model is the repository's checkpoint (or ``$TL_LIVE_CHECKPOINT``); without one, a small
model trained for 3 steps stands in, so the export and the comparison are always exercised.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import transformer_lite as tl

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book

ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


export_onnx = _load("tl_export_onnx", ROOT / "scripts" / "export_onnx.py")
live_models = _load("tl_live_models", ROOT / "book" / "_ext" / "live_models.py")


def _session(path: Path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def char_checkpoint(tmp_path_factory) -> Path:
    ckpt = live_models.checkpoint_path()
    if ckpt.is_file():
        return ckpt
    from transformer_lite.training.train import save_checkpoint

    torch.manual_seed(0)
    vocab = sorted(set("ROMEO\nJULIET To be, or not to be: that is the question."))
    model = tl.DecoderOnlyTransformer(
        tl.DecoderOnlyConfig(
            vocab_size=len(vocab), max_len=32, d_model=32, n_heads=4, n_layers=2, d_ff=64
        )
    )
    path = tmp_path_factory.mktemp("ckpt") / "tiny.safetensors"
    save_checkpoint(path, model, extra={"vocab": vocab})
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory, char_checkpoint) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("live")
    return out, export_onnx.export_all(out, char_checkpoint, force=True)


@pytest.fixture(scope="module")
def minilm():
    return tl.load_minilm()


SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "hi",
    "Héllo wörld, naïve café: 日本語 😀 \u200b and a (parenthesis)!",
    "word " * 300,
]


@pytest.mark.parametrize(
    "sentence", SENTENCES, ids=["cat", "two-letters", "odd-unicode", "302-tokens"]
)
def test_minilm_graph_equals_the_encoder(exported, minilm, sentence):
    out, manifest = exported
    encoder, tokenizer = minilm
    session = _session(out / manifest["minilm"]["file"])
    ids = torch.tensor([tokenizer.encode(sentence)])  # (1, L)
    with torch.no_grad():
        hidden, attentions = encoder(ids)
    o_hidden, o_att = session.run(["hidden", "attentions"], {"input_ids": ids.numpy()})
    A = torch.stack(attentions, dim=1).numpy()  # (1, n_layers, H, L, L)
    assert o_hidden.shape == tuple(hidden.shape) and o_att.shape == A.shape
    assert o_hidden.dtype == np.float32 and o_att.dtype == np.float32
    np.testing.assert_allclose(o_hidden, hidden.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(o_att, A, rtol=0, atol=TOL)


def test_minilm_graph_takes_every_length_up_to_512(exported, minilm):
    out, manifest = exported
    encoder, _ = minilm
    session = _session(out / manifest["minilm"]["file"])
    ids = torch.randint(1000, 2000, (1, 512), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hidden, attentions = encoder(ids)
    o_hidden, o_att = session.run(["hidden", "attentions"], {"input_ids": ids.numpy()})
    np.testing.assert_allclose(o_hidden, hidden.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(o_att[:, -1], attentions[-1].numpy(), rtol=0, atol=TOL)
    assert manifest["minilm"]["max_len"] == 512


def test_char_graph_equals_the_model_on_padded_input(exported, char_checkpoint):
    out, manifest = exported
    entry = manifest["charlm"]
    model, meta = export_onnx.load_checkpoint(char_checkpoint)
    model.eval()
    vocab = meta["vocab"]
    assert entry["vocab"] == vocab and entry["fixed_len"] == model.config.max_len
    session = _session(out / entry["file"])
    g = torch.Generator().manual_seed(0)
    for L in (1, 7, model.config.max_len):
        ids = torch.randint(0, len(vocab), (1, L), generator=g)
        padded = torch.zeros((1, entry["fixed_len"]), dtype=torch.long)
        padded[:, :L] = ids
        with torch.no_grad():
            # (1, L, V), n_layers x (1, H, L, L)
            logits, attentions, _ = model(ids)
        o_logits, o_att = session.run(["logits", "attentions"], {"input_ids": padded.numpy()})
        np.testing.assert_allclose(o_logits[:, :L], logits.numpy(), rtol=0, atol=TOL)
        A = torch.stack(attentions, dim=1).numpy()
        np.testing.assert_allclose(o_att[..., :L, :L], A, rtol=0, atol=TOL)
        assert np.all(o_att[..., :L, L:] == 0), "a real position attended to the padding after it"


def test_char_graph_greedy_generation_equals_generate(exported, char_checkpoint):
    """The loop the page runs (window, pad, arg-max of the last real row) gives generate(temperature=0)."""
    out, manifest = exported
    entry = manifest["charlm"]
    model, meta = export_onnx.load_checkpoint(char_checkpoint)
    session = _session(out / entry["file"])
    vocab = meta["vocab"]
    prompt = [vocab.index(c) for c in "ROMEO\n" if c in vocab] or [0]
    n_new = min(20, model.config.max_len - len(prompt) + 1)
    generated = model.generate(torch.tensor([prompt]), n_new, temperature=0.0).tokens
    expected = generated[0, len(prompt) :].tolist()
    ids = list(prompt)
    for _ in range(n_new):
        window = ids[-entry["fixed_len"] :]
        padded = np.zeros((1, entry["fixed_len"]), dtype=np.int64)
        padded[0, : len(window)] = window
        (logits,) = session.run(["logits"], {"input_ids": padded})
        ids.append(int(np.argmax(logits[0, len(window) - 1])))
    assert ids[len(prompt) :] == expected


def test_export_is_skipped_when_up_to_date_and_redone_when_stale(exported, char_checkpoint):
    out, manifest = exported
    again = export_onnx.export_all(out, char_checkpoint)  # same inputs: nothing re-exported
    assert again == manifest
    stale = dict(manifest, source_key="0" * 64)
    (out / "manifest.json").write_text(json.dumps(stale))
    assert export_onnx.source_key(char_checkpoint) == manifest["source_key"]
    assert json.loads((out / "manifest.json").read_text())["source_key"] != export_onnx.source_key(
        char_checkpoint
    )
    (out / "manifest.json").write_text(json.dumps(manifest))  # restore for other tests


def test_export_without_checkpoint_gives_minilm_only(tmp_path, monkeypatch):
    monkeypatch.setattr(
        export_onnx, "export_minilm", lambda out_dir: {"file": "minilm.onnx", "bytes": 0}
    )
    manifest = export_onnx.export_all(tmp_path, tmp_path / "missing.safetensors", force=True)
    assert manifest["charlm"] is None and manifest["minilm"]["file"] == "minilm.onnx"


def test_causal_mask_still_refuses_a_tensor_outside_tracing():
    with pytest.raises(ValueError, match="positive int"):
        tl.causal_mask(torch.tensor(3))

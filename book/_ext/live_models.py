"""Sphinx extension: live models that compute in the reader's browser, served from the built site.

A page asks for a live model with raw HTML in a markdown cell::

    <div class="tl-live" data-model="minilm"></div>    (your sentence through MiniLM, chapter 1)
    <div class="tl-live" data-model="charlm"></div>    (the chapter-8 character model generating)

At build time this extension

* exports the models to ONNX with ``scripts/export_onnx.py`` into ``build/live/`` when that folder is
  missing or stale (the export records a hash of the weights, the package source and the script);
  the chapter-8 checkpoint is ``checkpoints/ch8_transformer.safetensors``, or the file named by the
  environment variable ``TL_LIVE_CHECKPOINT``;
* adds ``_static/live/tl_live.js`` and ``tl_live.css`` to the pages holding such a ``<div>`` (and only
  those), with the download sizes;
* copies into ``_static/live/``: the two scripts, ``vendor/`` (onnxruntime-web's wasm build and the
  tokenizer library ``@huggingface/tokenizers``, from ``node_modules/``, installed by ``npm ci`` from
  ``package-lock.json``; with their licences) and ``models/`` (the ONNX graphs, MiniLM's tokenizer files,
  ``manifest.json``).

Nothing in ``vendor/`` or ``models/`` is loaded before the reader switches live mode on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

from sphinx.util import logging

LOG = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "live"
EXPORT_DIR = ROOT / "build" / "live"
NODE = ROOT / "node_modules"
VENDOR = {  # served name -> installed file
    "ort.wasm.min.js": NODE / "onnxruntime-web" / "dist" / "ort.wasm.min.js",
    "ort-wasm-simd-threaded.mjs": NODE / "onnxruntime-web" / "dist" / "ort-wasm-simd-threaded.mjs",
    "ort-wasm-simd-threaded.wasm": NODE
    / "onnxruntime-web"
    / "dist"
    / "ort-wasm-simd-threaded.wasm",
    "README-onnxruntime-web.md": NODE / "onnxruntime-web" / "README.md",
    # the npm package ships no LICENSE file: its MIT text (the onnxruntime repository's LICENSE),
    # with Microsoft's copyright line, is kept beside this extension
    "LICENSE-onnxruntime-web.txt": HERE / "LICENSE-onnxruntime-web.txt",
    "tokenizers.min.mjs": NODE / "@huggingface" / "tokenizers" / "dist" / "tokenizers.min.mjs",
    "LICENSE-huggingface-tokenizers.txt": NODE / "@huggingface" / "tokenizers" / "LICENSE",
}
MARKER = 'class="tl-live"'


def checkpoint_path() -> Path:
    """The chapter-8 checkpoint the build exports: ``$TL_LIVE_CHECKPOINT`` or the repository's own."""
    env = os.environ.get("TL_LIVE_CHECKPOINT", "").strip()
    return Path(env) if env else ROOT / "checkpoints" / "ch8_transformer.safetensors"


def _exporter():
    spec = importlib.util.spec_from_file_location(
        "tl_export_onnx", ROOT / "scripts" / "export_onnx.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _export(app) -> None:
    missing = [str(p.relative_to(ROOT)) for p in VENDOR.values() if not p.is_file()]
    if missing:
        LOG.warning(
            f"live_models: {missing[0]} is missing: run `npm ci` in {ROOT} (make book does)"
        )
    ckpt = checkpoint_path()
    if not ckpt.is_file():
        LOG.info(
            f"live_models: no chapter-8 checkpoint at {ckpt}; the generation widget will say so"
        )
    manifest_file = EXPORT_DIR / "manifest.json"

    def written() -> (
        int | None
    ):  # when export_all last wrote the manifest (it does after an export)
        return manifest_file.stat().st_mtime_ns if manifest_file.is_file() else None

    before = written()
    manifest = _exporter().export_all(EXPORT_DIR, ckpt if ckpt.is_file() else None)
    fresh = before is None or written() != before
    LOG.info(
        "live_models: MiniLM and the chapter-8 model "
        + (
            f"exported to ONNX in {EXPORT_DIR} (about 15 s and 90 MB)"
            if fresh
            else f"in {EXPORT_DIR} are up to date (not exported again)"
        )
    )
    app.tl_live_manifest = manifest
    runtime = sum(p.stat().st_size for p in VENDOR.values() if p.is_file())
    app.tl_live_sizes = {
        "runtime": runtime,
        "minilm": manifest["minilm"]["bytes"] + (EXPORT_DIR / "tokenizer.json").stat().st_size,
        "charlm": manifest["charlm"]["bytes"] if manifest.get("charlm") else 0,
    }


def _add_assets(app, pagename, templatename, context, doctree) -> None:
    if MARKER in context.get("body", ""):
        sizes = json.dumps(getattr(app, "tl_live_sizes", {}))
        app.add_js_file(None, body=f"window.tlLiveSizes = {sizes};", priority=300)
        app.add_js_file("live/tl_live.js", priority=301)
        app.add_css_file("live/tl_live.css")


def _copy(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    live = Path(app.outdir) / "_static" / "live"
    (live / "vendor").mkdir(parents=True, exist_ok=True)
    (live / "models").mkdir(parents=True, exist_ok=True)
    for name in ("tl_live.js", "tl_live.css", "NOTICE.txt"):
        shutil.copyfile(HERE / name, live / name)
    for name, src in VENDOR.items():
        if src.is_file():
            shutil.copyfile(src, live / "vendor" / name)
    manifest = dict(getattr(app, "tl_live_manifest", {}))
    manifest.pop("source_key", None)
    for entry in (manifest.get("minilm"), manifest.get("charlm")):
        if entry:
            shutil.copyfile(EXPORT_DIR / entry["file"], live / "models" / entry["file"])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(EXPORT_DIR / name, live / "models" / name)
    (live / "models" / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False) + "\n")


def setup(app):
    app.connect("builder-inited", _export)
    app.connect("html-page-context", _add_assets)
    app.connect("build-finished", _copy)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

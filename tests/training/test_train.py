"""Tests for transformer_lite.training.train: schedule, clipping, loss, the loop, checkpoints, the command line.

Oracles: hand-computed learning rates; ``-log softmax`` picked by hand for the loss; two
runs with one seed must agree exactly; a checkpoint reloaded from safetensors
must give identical logits; the GRU parameter formula against a real module;
``python -m transformer_lite.training.train --help`` in a subprocess.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.conftest import skip_or_fail
from transformer_lite.models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from transformer_lite.models.recurrent_lm import GRUConfig, GRULanguageModel
from transformer_lite.training.train import (
    TrainConfig,
    evaluate,
    gru_width_matching,
    learning_rate,
    lm_loss,
    load_checkpoint,
    main,
    save_checkpoint,
    train,
)

ROOT = Path(__file__).resolve().parents[2]


def test_learning_rate_schedule_by_hand():
    cfg = TrainConfig(steps=11, lr=1.0, min_lr=0.1, warmup_steps=4)
    lrs = [learning_rate(s, cfg) for s in range(11)]
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])  # linear warm-up, peak at the end of it
    # cosine over steps 4..10 (p = 0, 1/6, ..., 1): min_lr + 0.9 * (1 + cos(pi p)) / 2
    assert lrs[4:] == pytest.approx(
        [0.1 + 0.45 * (1 + math.cos(math.pi * k / 6)) for k in range(7)]
    )
    assert lrs[-1] == pytest.approx(0.1) and all(a >= b for a, b in zip(lrs[3:], lrs[4:]))
    no_warmup = TrainConfig(steps=3, lr=2.0, min_lr=0.0, warmup_steps=0)
    assert [learning_rate(s, no_warmup) for s in range(3)] == pytest.approx([2.0, 1.0, 0.0])


def test_lm_loss_by_hand():
    logits = torch.randn(2, 3, 5, dtype=torch.float64)
    targets = torch.tensor([[0, 4, 2], [1, 1, 3]])
    logp = torch.log_softmax(logits, dim=-1)
    expected = -sum(logp[b, t, targets[b, t]] for b in range(2) for t in range(3)) / 6
    torch.testing.assert_close(lm_loss(logits, targets), expected)
    with pytest.raises(ValueError, match=r"logits \(B, L, V\) and targets \(B, L\)"):
        lm_loss(logits, targets[:, :2])


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return DecoderOnlyTransformer(
        DecoderOnlyConfig(
            vocab_size=7, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.1
        )
    )


def periodic_ids(n=600):
    return torch.tensor([0, 1, 2, 3, 4, 5, 6, 2, 4] * (n // 9))  # learnable: a repeating pattern


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_train_is_seeded_and_learns():
    cfg = TrainConfig(
        steps=40,
        batch_size=8,
        context=16,
        lr=1e-2,
        min_lr=1e-3,
        warmup_steps=5,
        eval_every=20,
        eval_batches=2,
        seed=3,
    )
    ids = periodic_ids()
    runs = []
    for _ in range(2):
        model = tiny_model()
        before = evaluate(model, ids, cfg)
        runs.append((train(model, ids, ids, cfg, progress=False), model))
    (h1, m1), (h2, m2) = runs
    assert h1.step_loss == h2.step_loss and h1.val_loss == h2.val_loss, "one seed must give one run"
    assert (
        h1.eval_steps == [20, 40] and len(h1.step_loss) == len(h1.lrs) == len(h1.grad_norms) == 40
    )
    assert h1.lrs == [learning_rate(s, cfg) for s in range(40)]
    assert h1.val_loss[-1] < 0.5 * before, f"validation loss {before:.3f} -> {h1.val_loss[-1]:.3f}"
    assert m1.training
    torch.testing.assert_close(m1.lm_head.weight, m2.lm_head.weight, atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["transformer", "gru"])
def test_checkpoint_round_trip(tmp_path, kind):
    model = (
        tiny_model(1)
        if kind == "transformer"
        else GRULanguageModel(GRUConfig(7, 10, n_layers=2, dropout=0.1))
    )
    tied = model.lm_head.weight is model.token_embedding.weight
    assert tied == (kind == "transformer")  # the defaults: tied transformer, untied GRU
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = save_checkpoint(
        tmp_path / "sub" / "model.safetensors", model, extra={"vocab": list("abcdefg")}
    )
    assert path.read_bytes()[8:9] == b"{", (
        "a safetensors file starts with a length and a JSON header"
    )
    loaded, meta = load_checkpoint(path)
    assert meta["model"] == kind and meta["vocab"] == list("abcdefg") and not loaded.training
    assert type(loaded) is type(model)
    assert (loaded.lm_head.weight is loaded.token_embedding.weight) == tied, (
        "the tie (or its absence) survives"
    )
    ids = torch.randint(0, 7, (2, 9))
    torch.testing.assert_close(loaded(ids).logits, model.eval()(ids).logits, atol=0, rtol=0)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(ValueError, match="DecoderOnlyTransformer or GRULanguageModel"):
        save_checkpoint(tmp_path / "x.safetensors", torch.nn.Linear(2, 2))
    save_file({"w": torch.zeros(2)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="metadata model 'transformer' or 'gru', received None"):
        load_checkpoint(tmp_path / "plain.safetensors")


def test_train_config_errors():
    with pytest.raises(ValueError, match="expected steps to be a positive int"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="min_lr <= lr"):
        TrainConfig(lr=1e-3, min_lr=1e-2)


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_gru_width_matching(n_layers, tie):
    for width in (8, 33):
        config = GRUConfig(78, width, n_layers=n_layers, tie_embeddings=tie)
        n = GRULanguageModel(config).num_parameters()
        assert gru_width_matching(n, 78, n_layers, tie_embeddings=tie) == width
    width = gru_width_matching(423_168, 78, 2)  # the chapter's transformer
    counts = [
        GRULanguageModel(GRUConfig(78, w, n_layers=2)).num_parameters()
        for w in (width - 1, width, width + 1)
    ]
    assert abs(counts[1] - 423_168) == min(abs(c - 423_168) for c in counts)


def test_cli_help_exits_zero():
    result = subprocess.run(
        [sys.executable, "-m", "transformer_lite.training.train", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for option in (
        "--model",
        "--steps",
        "--lr",
        "--batch-size",
        "--context",
        "--out-dir",
        "--d-model",
    ):
        assert option in result.stdout


def test_cli_tiny_run_writes_checkpoint_history_and_sample(tmp_path, capsys):
    from transformer_lite.training.data import play_paths

    try:
        play_paths()
    except FileNotFoundError as e:
        skip_or_fail(str(e))
    argv = [
        "--model",
        "gru",
        "--steps",
        "3",
        "--batch-size",
        "2",
        "--context",
        "16",
        "--d-model",
        "16",
        "--n-heads",
        "2",
        "--n-layers",
        "1",
        "--eval-every",
        "2",
        "--eval-batches",
        "1",
        "--sample-length",
        "30",
        "--out-dir",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(argv) == 0
    history = json.loads((tmp_path / "history.json").read_text())
    assert history["eval_steps"] == [2, 3] and len(history["step_loss"]) == 3
    # the one-character prompt and 30 new ones
    assert len((tmp_path / "sample.txt").read_text()) == 31
    model, meta = load_checkpoint(tmp_path / "model.safetensors")
    assert (
        meta["model"] == "gru" and len(meta["vocab"]) == 78 and meta["train_config"]["steps"] == 3
    )
    assert "validation loss" in capsys.readouterr().out

"""transformer_lite.training.stored: work done once, stored, and checked by repeating its beginning.

Oracle: the work itself. ``train_or_load`` must hand back exactly what ``train`` gives on the same
fresh model (history, weights bit for bit, torch's random state afterwards), read from the file
without training again; ``run_or_load`` what the computation gives. A file written by other code
(another initialisation, other results) must be refused with both numbers named; other settings mean
"do the work" (or an error under TL_REQUIRE_STORED); TL_RETRAIN rewrites.
"""

import json
from dataclasses import replace

import pytest
import torch

import transformer_lite as tl
from transformer_lite.training import stored
from transformer_lite.training.stored import run_or_load, train_or_load
from transformer_lite.training.train import TrainConfig, train

CONFIG = tl.DecoderOnlyConfig(
    vocab_size=7, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.1
)
TRAIN = TrainConfig(
    steps=6, batch_size=2, context=8, warmup_steps=2, eval_every=3, eval_batches=1, seed=3
)


@pytest.fixture(autouse=True)
def no_switches(monkeypatch):
    for name in ("TL_RETRAIN", "TL_REQUIRE_STORED"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ids():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 7, (200,), generator=g), torch.randint(0, 7, (100,), generator=g)


def fresh(seed=0):
    torch.manual_seed(seed)
    return tl.DecoderOnlyTransformer(CONFIG)


def test_stop_after_is_the_start_of_the_full_run(ids):
    full = train(fresh(), *ids, TRAIN, progress=False)
    start = train(fresh(), *ids, TRAIN, progress=False, stop_after=4)
    assert start.step_loss == full.step_loss[:4]
    assert start.lrs == full.lrs[:4]  # the schedule of all 6 steps
    assert start.eval_steps == [3]


def test_a_load_equals_training_and_does_not_train_again(ids, tmp_path, monkeypatch):
    path = tmp_path / "run.safetensors"
    trained = fresh()
    history = train_or_load(trained, *ids, TRAIN, path, repeat_steps=2, progress=False)
    rng_after = torch.get_rng_state()
    assert path.exists()
    direct = train(fresh(), *ids, TRAIN, progress=False)  # what train() gives
    assert replace(history, seconds=0.0) == replace(direct, seconds=0.0)

    calls = []
    real_train = stored.train
    monkeypatch.setattr(
        stored, "train", lambda *a, **k: calls.append(k.get("stop_after")) or real_train(*a, **k)
    )
    torch.manual_seed(123)  # another random state before the call
    loaded = fresh()
    again = train_or_load(loaded, *ids, TRAIN, path, repeat_steps=2, progress=False)
    assert calls == [2]  # only the check
    assert again == history
    assert loaded.training
    for (name, a), (_, b) in zip(trained.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(torch.get_rng_state(), rng_after)  # as training left it


def test_a_file_from_another_initialisation_is_refused(ids, tmp_path):
    path = tmp_path / "run.safetensors"
    train_or_load(fresh(0), *ids, TRAIN, path, progress=False)
    with pytest.raises(RuntimeError, match=r"batch loss of step 0: .* now, .* stored"):
        train_or_load(fresh(1), *ids, TRAIN, path, progress=False)


def test_other_settings_train_without_rewriting_unless_required(ids, tmp_path, monkeypatch):
    path = tmp_path / "run.safetensors"
    train_or_load(fresh(), *ids, TRAIN, path, progress=False)
    written = path.read_bytes()
    longer = replace(TRAIN, steps=7)
    history = train_or_load(fresh(), *ids, longer, path, progress=False)
    assert len(history.step_loss) == 7
    assert path.read_bytes() == written
    monkeypatch.setenv("TL_REQUIRE_STORED", "1")
    with pytest.raises(RuntimeError, match="other settings"):
        train_or_load(fresh(), *ids, longer, path, progress=False)
    with pytest.raises(RuntimeError, match="does not exist"):
        train_or_load(fresh(), *ids, TRAIN, tmp_path / "none.safetensors", progress=False)


def test_retrain_rewrites(ids, tmp_path, monkeypatch):
    path = tmp_path / "run.safetensors"
    train_or_load(fresh(0), *ids, TRAIN, path, progress=False)
    monkeypatch.setenv("TL_RETRAIN", "1")
    train_or_load(fresh(1), *ids, TRAIN, path, progress=False)  # no check: trains
    monkeypatch.delenv("TL_RETRAIN")
    train_or_load(fresh(1), *ids, TRAIN, path, progress=False)  # the new file checks out


def test_run_or_load_computes_checks_and_reads(tmp_path):
    path = tmp_path / "runs.json"
    seen = []

    def compute(a, b):
        seen.append((a, b))
        return {"sum": a + b, "parts": [a / 3, b]}

    keys = [(1, 2), (3, 4), (5, 6)]
    first = run_or_load(path, keys, compute, settings={"n": 1}, repeat=1, progress=False)
    assert seen == keys
    assert first[3, 4] == {"sum": 7, "parts": [1.0, 4]}
    assert json.loads(path.read_text())["settings"] == {"n": 1}
    seen.clear()
    assert run_or_load(path, keys, compute, settings={"n": 1}, repeat=1, progress=False) == first
    assert seen == [(1, 2)]  # only the check

    # other settings: computed again, the file kept
    seen.clear()
    run_or_load(path, keys, compute, settings={"n": 2}, progress=False)
    assert seen == keys and json.loads(path.read_text())["settings"] == {"n": 1}


def test_run_or_load_refuses_results_that_do_not_repeat(tmp_path):
    path = tmp_path / "runs.json"
    run_or_load(path, [(1,), (2,)], lambda a: a * 0.5, settings={}, progress=False)
    with pytest.raises(RuntimeError, match=r"run \(1,\): \[0\.6\] now, \[0\.5\] stored"):
        run_or_load(path, [(1,), (2,)], lambda a: a * 0.6, settings={}, progress=False)
    # within the tolerance: accepted, and the stored numbers returned
    out = run_or_load(path, [(1,), (2,)], lambda a: a * 0.6, settings={}, atol=0.11, progress=False)
    assert out == {(1,): 0.5, (2,): 1.0}

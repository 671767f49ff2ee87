"""Chapter 8's fair race: the transformer and the GRU, each at its own best learning rate.

Every run is the chapter's command-line run (``python -m transformer_lite.training.train``, 1,000
steps, the same batches and evaluation windows for every run of one seed) with only ``--lr`` and
``--seed`` changed; ``--min-lr`` follows as lr / 10, as in the shipped 1e-2 runs. Every learning
rate of ``LRS`` is run with seed 0; then each model's two best rates of those runs again with seeds
1 and 2 (another initialisation, other batches and other validation windows; the two models of one
seed share all three).
Runs go to ``runs/ch8_lr_sweep/<model>_lr<lr>_seed<seed>/`` (skipped when already there), ``--jobs``
at a time, each on one thread (the shipped runs' setting). The 1e-2 seed-0 runs are not trained
again: they are the chapter's shipped ``ch8_transformer`` and ``ch8_gru``.

Writes:

* ``checkpoints/ch8_lr_sweep.json``: for every run its model, learning rate, seed, command, and
  the training and validation losses at every evaluation, and the seconds it took (from the run's
  ``history.json``);
* ``checkpoints/ch8_<model>_lr<lr>.safetensors`` (and ``_history.json``): the seed-0 run at each
  learning rate other than 1e-2.

``tests/training/test_checkpoints.py`` re-measures every shipped checkpoint. Usage (about 2.5 min per run
on one core of an idle machine, several times that on a busy one; 16 runs to train, whose
checkpoints and summary replace the shipped ones in ``checkpoints/``: ``--checkpoints DIR`` writes them
elsewhere)::

    python scripts/lr_sweep.py --jobs 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "checkpoints"
MODELS = ("transformer", "gru")
LRS = ("3e-3", "5e-3", "1e-2", "2e-2", "3e-2")  # every peak learning rate, with seed 0
CONFIRM_SEEDS = (1, 2)  # the two best rates of each model at seed 0, again with these seeds
SHIPPED = {"transformer": "ch8_transformer", "gru": "ch8_gru"}  # the 1e-2, seed-0 runs
STEPS = 1000


def command(model: str, lr: str, seed: int, out: Path, steps: int = STEPS) -> list[str]:
    return [
        sys.executable, "-m", "transformer_lite.training.train", "--model", model,
        "--lr", lr, "--seed", str(seed), "--steps", str(steps), "--threads", "1",
        "--no-progress", "--out-dir", str(out),
    ]  # fmt: skip


def run(model: str, lr: str, seed: int, runs: Path) -> Path:
    out = runs / f"{model}_lr{lr}_seed{seed}"
    if not (out / "history.json").exists():
        log = out.with_suffix(".log")
        out.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as f:
            subprocess.run(command(model, lr, seed, out), cwd=ROOT, stdout=f, stderr=f, check=True)
    return out


def history_of(model: str, lr: str, seed: int, runs: Path) -> Path:
    if (lr, seed) == ("1e-2", 0):  # the shipped run: not trained again
        return CHECKPOINTS / f"{SHIPPED[model]}_history.json"
    return runs / f"{model}_lr{lr}_seed{seed}" / "history.json"


def final_val_loss(model: str, lr: str, seed: int, runs: Path) -> float:
    return json.loads(history_of(model, lr, seed, runs).read_text())["val_loss"][-1]


def run_all(keys: list[tuple[str, str, int]], runs: Path, jobs: int, desc: str) -> None:
    todo = [key for key in keys if (key[1], key[2]) != ("1e-2", 0)]
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run, *key, runs) for key in todo]
        for future in tqdm(futures, desc=desc):
            future.result()


def runs_parser(doc: str, runs: str, checkpoints_help: str) -> argparse.ArgumentParser:
    """The options of the chapter-8 run scripts: ``--runs`` (one folder per run, under ``runs/``)
    and ``--checkpoints`` (where their summaries go); ``doc`` is the script's docstring."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=Path, default=ROOT / "runs" / runs, help="one folder per run"
    )
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS, help=checkpoints_help)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = runs_parser(__doc__, "ch8_lr_sweep", "where the summary and seed-0 files go")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one thread each)")
    args = parser.parse_args(argv)
    args.checkpoints.mkdir(parents=True, exist_ok=True)

    # 1. every rate with seed 0; 2. each model's two best rates of step 1 with seeds 1 and 2
    grid = [(m, lr, 0) for m in MODELS for lr in LRS]
    run_all(grid, args.runs, args.jobs, "seed 0")
    confirm = []
    for m in MODELS:
        best_two = sorted(LRS, key=lambda lr: final_val_loss(m, lr, 0, args.runs))[:2]
        confirm += [(m, lr, s) for s in CONFIRM_SEEDS for lr in sorted(best_two, key=float)]
    run_all(confirm, args.runs, args.jobs, "seeds 1, 2")
    grid += confirm

    summary = []
    for model, lr, seed in grid:
        history_file = history_of(model, lr, seed, args.runs)
        history = json.loads(history_file.read_text())
        shown = command(model, lr, seed, Path("runs/ch8_lr_sweep") / f"{model}_lr{lr}_seed{seed}")
        summary.append({
            "model": model, "lr": float(lr), "seed": seed,
            "command": " ".join(["python"] + shown[1:]),
            "eval_steps": history["eval_steps"],
            "train_loss": history["train_loss"], "val_loss": history["val_loss"],
            "seconds": history["seconds"],
        })  # fmt: skip
        if seed == 0 and lr != "1e-2":  # shipped beside the chapter's 1e-2 runs
            stem = args.checkpoints / f"ch8_{model}_lr{lr}"
            out = history_file.parent
            shutil.copyfile(out / "model.safetensors", stem.with_suffix(".safetensors"))
            shutil.copyfile(history_file, stem.with_name(stem.name + "_history.json"))
    (args.checkpoints / "ch8_lr_sweep.json").write_text(json.dumps(summary, indent=1) + "\n")
    for row in summary:
        loss = row["val_loss"][-1]
        print(f"{row['model']:12s} lr {row['lr']:.0e} seed {row['seed']}: {loss:.4f}")


if __name__ == "__main__":
    main()

"""Chapter 8's two budgets over three seeds: does the GRU's lead shrink from 500 to 1,000 steps?

The chapter compares the transformer and the GRU after 500 steps (trained in the notebook) and after
1,000 steps (the shipped command-line runs), each once, with seed 0. This script puts both budgets
on three seeds (0, 1, 2), every run the chapter's command-line run at the chapter's peak learning
rate 1e-2 (``--min-lr`` lr / 10, 50 warm-up steps, one thread), with only ``--steps`` and ``--seed``
changed. A seed sets the initialisation, the batches and the validation windows; the two models of
one seed and one budget share all three, so their difference is a paired comparison.

* 500 steps: the six runs (two models, three seeds) are trained here, through the command line,
  into ``runs/ch8_budget_seeds/<model>_steps500_seed<seed>/`` (skipped when already there), one at a
  time. The seed-0 runs are the notebook's 500-step runs again (the same settings), trained on one
  thread so that the file does not depend on the machine that executes the notebook.
* 1,000 steps: not trained again. Seed 0 is the shipped ``checkpoints/ch8_<model>_history.json``,
  seeds 1 and 2 are the runs at 1e-2 of the learning-rate sweep (``scripts/lr_sweep.py``), copied
  from ``checkpoints/ch8_lr_sweep.json``.

Writes ``checkpoints/ch8_budget_seeds.json``: for every run its model, steps, learning rate, seed,
command, where it comes from, the training and validation losses at every evaluation, and the
seconds it took. Usage (about 75 s per 500-step run on one core of an idle machine; six runs)::

    python scripts/ch8_budget_seeds.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lr_sweep import CHECKPOINTS, MODELS, ROOT, SHIPPED, command, runs_parser
from tqdm import tqdm

LR = "1e-2"  # the chapter's peak learning rate
SEEDS = (0, 1, 2)
SHORT, LONG = 500, 1000  # the notebook's budget and the command line's


def short_run(model: str, seed: int, runs: Path) -> Path:
    # as lr_sweep.run, with the short budget: one folder per run, skipped when already trained
    out = runs / f"{model}_steps{SHORT}_seed{seed}"
    if not (out / "history.json").exists():
        log = out.with_suffix(".log")
        out.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as f:
            subprocess.run(
                command(model, LR, seed, out, steps=SHORT), cwd=ROOT, stdout=f, stderr=f, check=True
            )
    return out / "history.json"


def row(model, steps, seed, source, shown, history) -> dict:
    return {
        "model": model, "steps": steps, "lr": float(LR), "seed": seed,
        "command": shown, "source": source,
        "eval_steps": history["eval_steps"],
        "train_loss": history["train_loss"], "val_loss": history["val_loss"],
        "seconds": history["seconds"],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = runs_parser(__doc__, "ch8_budget_seeds", "where the summary goes")
    args = parser.parse_args(argv)
    args.checkpoints.mkdir(parents=True, exist_ok=True)

    summary = []
    keys = [(m, s) for s in SEEDS for m in MODELS]
    for model, seed in tqdm(keys, desc=f"{SHORT} steps"):
        history = json.loads(short_run(model, seed, args.runs).read_text())
        out = Path("runs/ch8_budget_seeds") / f"{model}_steps{SHORT}_seed{seed}"
        shown = " ".join(["python"] + command(model, LR, seed, out, steps=SHORT)[1:])
        summary.append(
            row(model, SHORT, seed, "trained by scripts/ch8_budget_seeds.py", shown, history)
        )

    sweep = json.loads((CHECKPOINTS / "ch8_lr_sweep.json").read_text())
    for model, seed in keys:
        if seed == 0:
            file = f"checkpoints/{SHIPPED[model]}_history.json"
            history = json.loads((ROOT / file).read_text())
            shown = (  # the command the chapter shows for it
                f"python -m transformer_lite.training.train --model {model} --steps {LONG} "
                f"--threads 1 --out-dir runs/{model}"
            )
            source = f"the chapter's shipped run, {file}"
        else:
            (history,) = [
                r for r in sweep
                if (r["model"], r["lr"], r["seed"]) == (model, float(LR), seed)
            ]  # fmt: skip
            shown, source = history["command"], "checkpoints/ch8_lr_sweep.json"
        assert history["eval_steps"][-1] == LONG
        summary.append(row(model, LONG, seed, source, shown, history))

    (args.checkpoints / "ch8_budget_seeds.json").write_text(json.dumps(summary, indent=1) + "\n")
    for steps in (SHORT, LONG):
        for seed in SEEDS:
            loss = {
                r["model"]: r["val_loss"][-1]
                for r in summary
                if (r["steps"], r["seed"]) == (steps, seed)
            }
            print(
                f"{steps:5d} steps, seed {seed}: transformer {loss['transformer']:.4f}, "
                f"GRU {loss['gru']:.4f}, gap {loss['transformer'] - loss['gru']:.4f}"
            )


if __name__ == "__main__":
    main()

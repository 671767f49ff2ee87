"""The wall times chapter 7 plots: attention and an RNN against L, and generation with and without a cache.

Chapter 7 used to time these while it ran and to assert bands on the times; on a shared machine
a band on a time fails now and then. The chapter now reads this script's checked-in run and
asserts nothing about times it measures itself. Measured in each of ``--rounds`` (3) fresh
processes, one thread, no gradients, ``torch.manual_seed(0)``:

1. **Against L** (128 to 2048): ``transformer_lite.scaled_dot_product_attention`` and
   ``transformer_lite.memory_efficient_attention`` (blocks of 128) on q = k = v of shape
   (1, 4, L, 64), and the forward pass of ``transformer_lite.RNN(256, 256)`` on (1, L, 256):
   the fastest of ``--repeats`` (5) calls after a warm-up call, the three callables interleaved
   in rotating order (``_common.interleaved_calls``).
2. **Generation**: the chapter's untrained ``DecoderOnlyTransformer`` (vocabulary 64, d_model
   128, 4 heads, 4 layers, d_ff 512, max_len 256) generates 255 tokens greedily from a one-token
   prompt, with and without the key/value cache, five times each; forward hooks time every
   forward call, and the median over the five generations is kept per step.

Run: ``python benchmarks/cost_times.py`` (about two minutes on an idle core). Writes
``benchmarks/cost_times.{md,json}``; ``--from-json`` rewrites the ``.md`` from the JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# this checkout's package and benchmarks/_common.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common
from benchmarks._common import fmt_ms, interleaved_calls, load, machine_line

HERE = Path(__file__).resolve().parent
LENGTHS = (128, 256, 512, 1024, 2048)
B, H, D_HEAD, D_MODEL, BLOCK = 1, 4, 64, 256, 128
N_NEW, GENERATIONS = 255, 5


def against_length(repeats: int) -> dict:
    """``{case: [fastest seconds per L]}`` for the three callables."""
    import torch

    from transformer_lite import RNN, memory_efficient_attention, scaled_dot_product_attention

    rnn = RNN(D_MODEL, D_MODEL)
    out = {"direct attention": [], "tiled attention": [], "RNN forward": []}
    for L in LENGTHS:
        q = torch.randn(B, H, L, D_HEAD)
        x = torch.randn(B, L, D_MODEL)
        res = interleaved_calls(
            {
                "direct attention": lambda: scaled_dot_product_attention(q, q, q),
                "tiled attention": lambda: memory_efficient_attention(q, q, q, block_size=BLOCK),
                "RNN forward": lambda: rnn(x),
            },
            repeats,
        )
        for name, r in res.items():
            out[name].append(min(r["times"]))
    return out


def generation() -> dict:
    """``{"no cache": [median seconds per step], "cache": [...]}``."""
    import torch

    from transformer_lite import DecoderOnlyConfig, DecoderOnlyTransformer

    torch.manual_seed(0)
    config = DecoderOnlyConfig(
        vocab_size=64, max_len=256, d_model=128, n_heads=4, n_layers=4, d_ff=512
    )
    model = DecoderOnlyTransformer(config).eval()
    prompt = torch.randint(0, 64, (1, 256))[:, :1]
    marks: list[float] = []
    model.register_forward_pre_hook(lambda module, args: marks.append(time.perf_counter()))
    model.register_forward_hook(lambda module, args, out: marks.append(time.perf_counter()))
    steps = {}
    for use_cache, name in ((False, "no cache"), (True, "cache")):
        marks.clear()
        with torch.no_grad():
            for _ in range(GENERATIONS):
                model.generate(prompt, N_NEW, temperature=0.0, use_cache=use_cache)
        per_call = torch.tensor(marks, dtype=torch.float64).view(GENERATIONS, N_NEW, 2)
        steps[name] = per_call.diff(dim=-1)[..., 0].median(dim=0).values.tolist()
    return steps


def child(repeats: int) -> dict:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    with torch.no_grad():
        return {"lengths": against_length(repeats), "generation": generation()}


def write_md(path: Path, info: dict, rounds: list) -> None:
    lines = [
        "# Chapter 7's wall times",
        "",
        f"Produced by `python benchmarks/cost_times.py` on {info['date']} (wall time "
        f"{info['wall_s']:.0f} s, load average {info['load'][0]:.2f} before, {info['load'][1]:.2f} "
        f"after); {len(rounds)} fresh processes, one thread; method in the script's docstring.",
        "",
        machine_line(info["machine"]),
        "",
        f"## Fastest of {info['repeats']} calls (ms), round by round",
        "",
        "| case | L | " + " | ".join(f"round {r}" for r in range(len(rounds))) + " |",
        "|---|---:|" + "---:|" * len(rounds),
    ]
    for name in rounds[0]["lengths"]:
        for i, L in enumerate(LENGTHS):
            lines.append(
                f"| {name} | {L} | "
                + " | ".join(fmt_ms(r["lengths"][name][i]) for r in rounds)
                + " |"
            )
    lines += [
        "",
        f"## Generation of {N_NEW} tokens: median time of a forward call (ms) over {GENERATIONS} "
        "generations, first and last 25 steps",
        "",
        "| round | no cache, first 25 | no cache, last 25 | cache, first 25 | cache, last 25 |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r, rnd in enumerate(rounds):
        g = rnd["generation"]
        cells = [
            fmt_ms(statistics.median(g[name][part]))
            for name in ("no cache", "cache")
            for part in (slice(0, 25), slice(-25, None))
        ]
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    _common.add_run_options(p, HERE / "cost_times")
    args = p.parse_args(argv)
    _common.run(args, lambda: child(args.repeats), lambda: run_all(args), write_md, "rounds")


def run_all(args: argparse.Namespace) -> tuple[dict, list]:
    """``args.rounds`` fresh processes, each measuring everything once."""
    start, load_before = time.time(), load()
    rounds = []
    for rnd in range(args.rounds):
        rounds.append(_common.child_json(__file__, ["--child", "--repeats", str(args.repeats)]))
        print(f"round {rnd} done", flush=True)
    info = _common.run_info(
        start,
        load=[load_before, load()],
        repeats=args.repeats,
        lengths=list(LENGTHS),
        config={"batch": B, "heads": H, "d_head": D_HEAD, "d_model": D_MODEL, "block": BLOCK},
        generation={"new_tokens": N_NEW, "generations": GENERATIONS},
    )
    return info, rounds


if __name__ == "__main__":
    main()

"""Where the time of our readable attention goes: against un-fused and fused floors (issue 4).

Issue 4 asks for ``transformer_lite.scaled_dot_product_attention`` within 1.5x
of ``torch.nn.functional.scaled_dot_product_attention`` at L = 1024 on the CPU
(self-attention, S = L, no mask, float32, B = 1, H = 4, d_head = 64, one
thread, inference mode). This script puts that ratio next to the two floors an
un-fused implementation can be compared with, and next to the cost of the
memory it allocates. Variants, all on the same inputs:

- ``ours``: ``transformer_lite.scaled_dot_product_attention`` (returns the weights);
- ``bare``: the readable floor, three lines (scaled ``Q K^T``, ``torch.softmax``,
  weights ``@ V``), no checks, no masks, returning the weights as ours does;
- ``bare_inplace``: ``bare`` with ``torch.softmax(scores, dim=-1, out=scores)``,
  so one L x S matrix is allocated instead of two. Not differentiable (``out=``
  has no backward, no ``vmap`` batching rule, no forward-mode AD): it is
  measured only to price the second matrix, not proposed for the package;
- ``torch_math``: ``F.scaled_dot_product_attention`` restricted to
  ``SDPBackend.MATH``, PyTorch's own un-fused path;
- ``torch_fused``: ``F.scaled_dot_product_attention`` with PyTorch's choice of
  kernel (on the CPU, float32: the flash-attention kernel, which works on tiles
  and never holds the L x L matrix);
- ``copy_LxL``: ``dst.copy_(src)`` between two preallocated B x H x L x L
  float32 tensors, i.e. one read and one write of a score matrix. Not
  attention: the price of two of the four passes over the L x L matrix that any
  un-fused method makes (write scores, read them and write weights, read weights).

Each variant runs in the same process, interleaved with rotating order (as in
``bench_attention.py``; the starting order is shuffled with the round number
as seed, because which variant runs before which changes the state of the heap
and the caches each one meets), after one warm-up call each, under
``torch.inference_mode()``, with ``torch.set_num_threads(1)``. Minor page
faults per timed call come from ``resource.getrusage``.

Two allocator conditions, each in fresh processes (the environment variable is
read when the process starts):

- ``default``: glibc's malloc as configured. A freed block of 16 MiB or more
  lying at the top of the heap may be given back to the operating system
  (heap trimming, or ``munmap`` for blocks above the mmap threshold), and the
  next call touches fresh pages again: one page fault per 4 KiB, each page
  zeroed by the kernel. Whether this happens on a given call depends on what
  else the process has allocated, so it varies between processes and orders.
- ``keep``: ``GLIBC_TUNABLES=glibc.malloc.trim_threshold=2**30:glibc.malloc.mmap_threshold=2**30``,
  so freed memory stays in the process and is reused without page faults.

Every (L, condition) is measured in ``--rounds`` fresh processes; the table
pools the runs of all rounds (median) and shows the range of the per-round
ratios.

    python benchmarks/attention_floors.py                 # L = 512, 1024, 2048, 5 rounds: about 2 minutes
    python benchmarks/attention_floors.py --rounds 2 --lengths 1024

Writes ``benchmarks/attention_floors.md`` and, next to it, ``.json`` with the pooled summaries and
every round's medians, minima, page faults and order (``--out`` to change).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# this checkout's package, not an installed one, and benchmarks/_common.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import cpu_model, fmt_num, interleaved_calls, load
from transformer_lite import scaled_dot_product_attention

HERE = Path(__file__).resolve().parent
VARIANTS = ("ours", "bare", "bare_inplace", "torch_math", "torch_fused", "copy_LxL")
KEEP_FREED_MEMORY = "glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=1073741824"
CONDITIONS = {"default": None, "keep": KEEP_FREED_MEMORY}


def make_variants(B: int, H: int, L: int, d_head: int) -> dict:
    """No-argument callables for every variant, on one set of inputs ``(B, H, L, d_head)``."""
    gen = torch.Generator().manual_seed(0)
    # 3 x (B, H, L, d_head)
    q, k, v = (torch.randn(B, H, L, d_head, generator=gen) for _ in range(3))
    # two score-sized buffers
    src, dst = (
        torch.randn(B, H, L, L, generator=gen),
        torch.empty(B, H, L, L),
    )

    def bare():
        scores = (q / math.sqrt(d_head)) @ k.transpose(-2, -1)  # (B, H, L, L)
        weights = torch.softmax(scores, dim=-1)  # (B, H, L, L)
        return weights @ v, weights  # (B, H, L, d_head), (B, H, L, L)

    def bare_inplace():
        scores = (q / math.sqrt(d_head)) @ k.transpose(-2, -1)  # (B, H, L, L)
        # overwrites the scores: no second L x L matrix
        weights = torch.softmax(scores, dim=-1, out=scores)
        return weights @ v, weights

    def torch_math():
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v)

    return {
        "ours": lambda: scaled_dot_product_attention(q, k, v),
        "bare": bare,
        "bare_inplace": bare_inplace,
        "torch_math": torch_math,
        "torch_fused": lambda: F.scaled_dot_product_attention(q, k, v),
        "copy_LxL": lambda: dst.copy_(src),
    }


def child(L: int, repeats: int, seed: int, args: argparse.Namespace) -> None:
    """Run in a fresh process: print ``{variant: {"times": [s, ...], "faults": [n, ...]}}`` as JSON."""
    torch.set_num_threads(args.threads)
    fns = make_variants(args.batch, args.heads, L, args.d_head)
    names = list(fns)
    # which variant follows which changes the heap state it meets: vary it
    random.Random(seed).shuffle(names)
    # each result is freed after its timed call, as a caller that drops it would
    out = interleaved_calls({n: fns[n] for n in names}, repeats, free_in_timing=False)
    out["order"] = names
    print(json.dumps(out))


def run_child(L: int, condition: str, repeats: int, seed: int, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    env.pop("GLIBC_TUNABLES", None)
    if CONDITIONS[condition]:
        env["GLIBC_TUNABLES"] = CONDITIONS[condition]
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(L),
        str(repeats),
        str(seed),
        "--batch",
        str(args.batch),
        "--heads",
        str(args.heads),
        "--d-head",
        str(args.d_head),
        "--threads",
        str(args.threads),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(rounds: list) -> dict:
    """Pool the rounds of one (L, condition): medians, minima, faults per call, per-round ratio ranges."""
    summary = {}
    for n in VARIANTS:
        times = [t for r in rounds for t in r[n]["times"]]
        faults = [f for r in rounds for f in r[n]["faults"]]
        per_round = [
            statistics.median(r[n]["times"]) / statistics.median(r["torch_fused"]["times"])
            for r in rounds
        ]
        summary[n] = {
            "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3,
            "faults_per_call": statistics.mean(faults),
            "ratio_range": [min(per_round), max(per_round)],
        }
    fused = summary["torch_fused"]
    for n in VARIANTS:
        summary[n]["ratio"] = summary[n]["median_ms"] / fused["median_ms"]
        summary[n]["ratio_min"] = summary[n]["min_ms"] / fused["min_ms"]
    return summary


def write_report(results: list, info: dict, args: argparse.Namespace, out: Path) -> None:
    B, H, d = args.batch, args.heads, args.d_head
    lines = [
        "# Readable attention against its floors",
        "",
        f"Produced by `{info['command']}` on {info['date']} (wall time {info['wall_s']:.0f} s); "
        f"method in the docstring of [attention_floors.py](attention_floors.py).",
        "",
        f"- CPU: {info['cpu']}, {os.cpu_count()} logical CPUs, torch using {args.threads} thread(s); "
        f"torch {torch.__version__}, Python {platform.python_version()}, glibc {platform.libc_ver()[1]}",
        f"- Workload: self-attention, S = L, no mask, float32, B = {B}, H = {H}, d_head = {d}; "
        f"{args.rounds} fresh processes per (L, allocator), each with one warm-up and the stated runs per variant.",
        "- `default`: glibc malloc as configured; `keep`: "
        f"`GLIBC_TUNABLES={KEEP_FREED_MEMORY}` (freed memory stays in the process).",
        "- ms: median over the runs of all rounds; ratio: that median / torch_fused's median, then in brackets "
        "the lowest and highest per-round ratio; faults: minor page faults per call (4 KiB pages); "
        "`copy_LxL` is not attention (see the docstring).",
        "",
        "| L | allocator | load before / after | runs | variant | ms | ratio to fused (round range) "
        "| ratio of fastest runs | faults / call |",
        "|---:|---|---|---:|---|---:|---|---:|---:|",
    ]
    for res in results:
        for n in VARIANTS:
            s = res["summary"][n]
            lo, hi = s["ratio_range"]
            lines.append(
                f"| {res['L']} | {res['condition']} | {res['load'][0]:.2f} / {res['load'][1]:.2f} | "
                f"{res['runs']} | {n} | {fmt_num(s['median_ms'])} | {s['ratio']:.2f} ({lo:.2f}-{hi:.2f}) | "
                f"{s['ratio_min']:.2f} | {s['faults_per_call']:.0f} |"
            )
    lines.append("")
    sizes = [(L, B * H * L * L * 4) for L in args.lengths]
    lines.append(
        "One B x H x L x L float32 matrix: "
        + ", ".join(f"L = {L}: {n / 2**20:.0f} MiB = {n // 4096} pages of 4 KiB" for L, n in sizes)
        + "."
    )
    lines.append("")
    out.write_text("\n".join(lines))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument(
        "--rounds", type=int, default=5, help="fresh processes per (L, allocator condition)"
    )
    p.add_argument(
        "--repeats",
        type=int,
        help="timed runs per variant and round (default 15 up to L = 1024, else 7)",
    )
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-head", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=HERE / "attention_floors.md")
    p.add_argument(
        "--child", nargs=3, type=int, metavar=("L", "REPEATS", "SEED"), help=argparse.SUPPRESS
    )
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        child(*args.child, args)
        return
    start = time.time()
    cpu = cpu_model()
    results = []
    for L in args.lengths:
        repeats = args.repeats or (15 if L <= 1024 else 7)
        for condition in CONDITIONS:
            load_before = load()
            rounds = [run_child(L, condition, repeats, seed, args) for seed in range(args.rounds)]
            per_round = [
                {
                    "order": r["order"],
                    **{
                        n: {
                            "median_ms": statistics.median(r[n]["times"]) * 1e3,
                            "min_ms": min(r[n]["times"]) * 1e3,
                            "faults_per_call": statistics.mean(r[n]["faults"]),
                        }
                        for n in VARIANTS
                    },
                }
                for r in rounds
            ]
            results.append(
                {
                    "L": L,
                    "condition": condition,
                    "runs": repeats * args.rounds,
                    "load": [load_before, load()],
                    "summary": summarize(rounds),
                    "rounds": per_round,
                }
            )
            s = results[-1]["summary"]
            print(
                f"L={L} {condition:7s} load {load_before:.2f}: "
                + ", ".join(
                    f"{n} {s[n]['median_ms']:.1f} ms ({s[n]['ratio']:.2f}x)" for n in VARIANTS
                ),
                flush=True,
            )
    info = {
        "command": "python " + " ".join([os.path.relpath(__file__, HERE.parent)] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "wall_s": time.time() - start,
        "cpu": cpu,
    }
    args.out.with_suffix(".json").write_text(
        json.dumps({"info": info, "results": results}, indent=1)
    )
    write_report(results, info, args, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()

"""Benchmark: our readable attention against PyTorch's, and the memory of tiled attention, on the CPU.

Measures, for every sequence length L (self-attention, S = L, no mask, float32,
B = 1, a few heads of d_head = 64):

1. time (median of repeated runs) of our ``scaled_dot_product_attention``
   against ``torch.nn.functional.scaled_dot_product_attention``, and of our
   ``memory_efficient_attention`` against our direct one;
2. time of our ``MultiHeadAttention`` against ``torch.nn.MultiheadAttention``
   with copied weights (torch with ``need_weights=False``, its fused path, and
   with ``need_weights=True, average_attn_weights=False``, which like ours
   returns per-head weights);
3. peak memory of one call of each attention function, two ways: the peak of
   PyTorch's CPU allocations read from ``torch.profiler``
   (``transformer_lite.chapters.measure.peak_allocated_bytes``), and the
   growth of the maximum resident set size of a fresh subprocess per
   configuration (``VmHWM`` of /proc/self/status); next to the bytes of one L x L
   float32 score matrix per head.

Writes a Markdown table with the machine description (default
``benchmarks/results.md``; ``benchmarks/results_quick.md`` with ``--quick``)
and the raw numbers as JSON next to it. See benchmarks/README.md.

    python benchmarks/bench_attention.py            # L = 128 .. 8192, a few minutes on 2 cores
    python benchmarks/bench_attention.py --quick    # L = 128 .. 1024, well under a minute
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

# Measure the package of this checkout, even if another copy is installed in the environment
# (and find benchmarks/_common.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (
    fmt_mib,
    fmt_ms,
    fmt_ratio,
    interleaved_calls,
    load,
    machine,
    quiet_stderr,
)
from transformer_lite import (
    MultiHeadAttention,
    memory_efficient_attention,
    scaled_dot_product_attention,
)
from transformer_lite.chapters.measure import peak_allocated_bytes

HERE = Path(__file__).resolve().parent
IMPLS = ("ours_direct", "ours_tiled", "torch_sdpa")
TARGET_TIME_RATIO, TARGET_TIME_L = 1.5, 1024
TARGET_MEMORY_RATIO, TARGET_MEMORY_L = 0.1, 8192


# --------------------------------------------------------------------------- inputs and callables


def make_qkv(
    batch: int, heads: int, L: int, d_head: int, seed: int = 0
) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    # 3 x (B, H, L, d_head)
    return tuple(torch.randn(batch, heads, L, d_head, generator=gen) for _ in range(3))


def attention_fn(impl: str, q, k, v, block_size: int):
    """A no-argument callable running one attention implementation on fixed inputs."""
    if impl == "ours_direct":
        return lambda: scaled_dot_product_attention(q, k, v)
    if impl == "ours_tiled":
        return lambda: memory_efficient_attention(q, k, v, block_size=block_size)
    if impl == "torch_sdpa":
        return lambda: F.scaled_dot_product_attention(q, k, v)
    raise ValueError(f"unknown implementation {impl!r}, expected one of {IMPLS}")


# --------------------------------------------------------------------------- measurements


def run_times(fns: dict, repeats: int) -> dict:
    """Wall times (seconds) of each callable, interleaved (``_common.interleaved_calls``).

    Returns ``{name: [seconds, ...]}``.
    """
    return {name: r["times"] for name, r in interleaved_calls(fns, repeats).items()}


def summarize(times: dict) -> tuple[dict, dict]:
    """``(medians, minima)`` of :func:`run_times` output."""
    return (
        {n: statistics.median(ts) for n, ts in times.items()},
        {n: min(ts) for n, ts in times.items()},
    )


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB: ``VmHWM`` of /proc/self/status.

    Not ``resource.getrusage(...).ru_maxrss``: Linux carries the parent's peak
    RSS into a child across fork + exec, so a child started by a big parent
    reports the parent's peak (we saw it read 1.5 GB in a child that never
    held more than 0.3 GB). ``VmHWM`` belongs to the new address space.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM line in /proc/self/status (Linux only)")


def reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_child(impl: str, L: int, args: argparse.Namespace) -> None:
    """Run in a fresh process: print the growth of the peak RSS (bytes) over one call of ``impl``."""
    q, k, v = make_qkv(args.batch, args.heads, L, args.d_head)
    with torch.no_grad():
        small = make_qkv(1, 1, 64, args.d_head, seed=1)
        attention_fn(impl, *small, args.block_size)()  # load the code paths on a tiny input
        reset_peak_rss()  # the peak so far (imports, inputs, warm-up) no longer counts
        before = peak_rss_kib()  # = current RSS
        out = attention_fn(impl, q, k, v, args.block_size)()
        after = peak_rss_kib()
    del out
    print(json.dumps({"rss_growth_bytes": (after - before) * 1024}))


def rss_growth(impl: str, L: int, args: argparse.Namespace) -> int:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rss-child", impl, str(L)]
    for name in ("batch", "heads", "d_head", "block_size") + (("threads",) if args.threads else ()):
        cmd += ["--" + name.replace("_", "-"), str(getattr(args, name))]  # this run's settings
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["rss_growth_bytes"]


# --------------------------------------------------------------------------- report


def _ratio(num: float, den: float) -> str:
    return fmt_ratio(num / den if den > 0 else None, digits=4)


def write_report(rows: list, info: dict, args: argparse.Namespace, out: Path) -> list:
    lines = [
        "# Attention benchmark results",
        "",
        f"Produced by `{info['command']}` on {info['date']} (wall time {info['wall_s']:.0f} s).",
        "Rerun instructions and the measuring method: [README.md](README.md).",
        "",
        "## Machine",
        "",
        f"- CPU: {info['machine']['cpu_model']} ({info['machine']['cpu_flags']}), "
        f"{info['machine']['logical_cpus']} logical CPUs, torch using {info['machine']['torch_threads']} threads; "
        f"{info['machine']['memory_gib']} GiB RAM",
        f"- torch {info['machine']['torch']}, Python {info['machine']['python']}, {info['machine']['os']}",
        f"- load average (1 min) before / after: {info['load_before']:.2f} / {info['load_after']:.2f} "
        "(other processes share this machine; ratios are measured interleaved, see README)",
        "",
        f"Workload: self-attention, S = L, no mask, float32, B = {args.batch}, H = {args.heads}, "
        f"d_head = {args.d_head} (d_model = {args.heads * args.d_head} for the modules), "
        f"tiled block size {args.block_size}. Times are medians of the stated number of runs after one warm-up, "
        "under `torch.inference_mode()`. Ratio = ours / torch (below 1 means ours is faster); the ratio of the "
        "fastest runs (minimum over runs of each) is less sensitive to other processes.",
        "",
        "## Time: attention functions (ms)",
        "",
        "| L | runs | ours `scaled_dot_product_attention` | `F.scaled_dot_product_attention` | ratio ours/torch "
        "| ratio of fastest runs | ours `memory_efficient_attention` | ratio tiled/direct |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t, t_min = r["time"], r["time_min"]
        lines.append(
            f"| {r['L']} | {r['repeats']} | {fmt_ms(t['ours_direct'])} | {fmt_ms(t['torch_sdpa'])} | "
            f"{t['ours_direct'] / t['torch_sdpa']:.2f} | {t_min['ours_direct'] / t_min['torch_sdpa']:.2f} | "
            f"{fmt_ms(t['ours_tiled'])} | "
            f"{t['ours_tiled'] / t['ours_direct']:.2f} |"
        )
    lines += [
        "",
        "## Time: multi-head attention modules (ms)",
        "",
        "| L | ours `MultiHeadAttention` | `nn.MultiheadAttention`, need_weights=False | ratio "
        "| `nn.MultiheadAttention`, per-head weights | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t = r["mha"]
        lines.append(
            f"| {r['L']} | {fmt_ms(t['ours'])} | {fmt_ms(t['torch_fast'])} | "
            f"{t['ours'] / t['torch_fast']:.2f} | {fmt_ms(t['torch_weights'])} | "
            f"{t['ours'] / t['torch_weights']:.2f} |"
        )
    lines += [
        "",
        "## Peak memory of one call (MiB)",
        "",
        "`alloc`: peak of PyTorch's CPU allocations during the call (torch.profiler). `RSS`: growth of the maximum "
        "resident set size of a fresh process over the call (`-` if not measured). Scores: the bytes of the "
        "B x H x L x L float32 score matrix, the quantity the direct method must hold at least once.",
        "",
        "| L | scores | direct alloc | tiled alloc | tiled/direct alloc | torch alloc | direct RSS | tiled RSS "
        "| tiled/direct RSS | torch RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, s = r["alloc"], r.get("rss")
        rss = (
            (
                f"{fmt_mib(s['ours_direct'])} | {fmt_mib(s['ours_tiled'])} | "
                f"{_ratio(s['ours_tiled'], s['ours_direct'])} | {fmt_mib(s['torch_sdpa'])}"
            )
            if s
            else "- | - | - | -"
        )
        lines.append(
            f"| {r['L']} | {fmt_mib(r['score_bytes'])} | {fmt_mib(a['ours_direct'])} | "
            f"{fmt_mib(a['ours_tiled'])} | {_ratio(a['ours_tiled'], a['ours_direct'])} | "
            f"{fmt_mib(a['torch_sdpa'])} | {rss} |"
        )

    verdicts = []
    by_L = {r["L"]: r for r in rows}
    if TARGET_TIME_L in by_L:
        t = by_L[TARGET_TIME_L]["time"]
        t_min = by_L[TARGET_TIME_L]["time_min"]
        ratio = t["ours_direct"] / t["torch_sdpa"]
        ratio_min = t_min["ours_direct"] / t_min["torch_sdpa"]
        met = ratio <= TARGET_TIME_RATIO and ratio_min <= TARGET_TIME_RATIO
        verdicts.append(
            f"- Readable attention within {TARGET_TIME_RATIO}x of torch's time at L = {TARGET_TIME_L}: "
            f"ratio of medians {ratio:.2f}, of fastest runs {ratio_min:.2f}, "
            f"**{'met' if met else 'not met'}**."
        )
    if TARGET_MEMORY_L in by_L:
        r = by_L[TARGET_MEMORY_L]
        ratio = r["alloc"]["ours_tiled"] / r["alloc"]["ours_direct"]
        text = (
            f"- Memory-efficient peak under {TARGET_MEMORY_RATIO} of the direct one's at L = {TARGET_MEMORY_L}: "
            f"allocation ratio {ratio:.4f}"
        )
        if r.get("rss") and r["rss"]["ours_direct"] > 0:
            rss_ratio = r["rss"]["ours_tiled"] / r["rss"]["ours_direct"]
            text += f", RSS ratio {rss_ratio:.4f}"
            ratio = max(ratio, rss_ratio)
        verdicts.append(text + f", **{'met' if ratio < TARGET_MEMORY_RATIO else 'not met'}**.")
    lines += (
        ["", "## Targets of issue 4", ""]
        + (verdicts or ["- (not reached by this run's lengths)"])
        + [""]
    )
    out.write_text("\n".join(lines))
    return verdicts


# --------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="L = 128 .. 1024, 5 runs, no RSS subprocesses (a smoke test)",
    )
    p.add_argument(
        "--lengths", type=int, nargs="+", help="sequence lengths (default 128 .. 8192, powers of 2)"
    )
    p.add_argument(
        "--repeats",
        type=int,
        help="timed runs per measurement (default: 25 up to L = 512, 11 at "
        "1024, 5 at 2048, 3 above; --quick: 5)",
    )
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-head", type=int, default=64)
    p.add_argument(
        "--block-size", type=int, default=256, help="block size of memory_efficient_attention"
    )
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--no-rss", action="store_true", help="skip the subprocess RSS measurement")
    p.add_argument("--out", type=Path, help="Markdown output (JSON written next to it)")
    p.add_argument("--rss-child", nargs=2, metavar=("IMPL", "L"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.lengths is None:
        args.lengths = [128, 256, 512, 1024] if args.quick else [2**i for i in range(7, 14)]
    if args.out is None:
        args.out = HERE / ("results_quick.md" if args.quick else "results.md")
    args.no_rss = args.no_rss or args.quick
    return args


def repeats_for(L: int, args: argparse.Namespace) -> int:
    """Runs per measurement: many where a run is short (noise dominates), few where it takes seconds."""
    if args.repeats is not None:
        return args.repeats
    if args.quick:
        return 5
    return 25 if L <= 512 else 11 if L <= 1024 else 5 if L <= 2048 else 3


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]), args)
        return
    start, load_before = time.time(), load()
    torch.manual_seed(0)
    d_model = args.heads * args.d_head
    torch_mha = nn.MultiheadAttention(d_model, args.heads, batch_first=True).eval()
    ours_mha = MultiHeadAttention.from_torch(torch_mha).eval()

    steps = ["time", "mha", "alloc"] + ([] if args.no_rss else ["rss"])
    rows = []
    bar = tqdm(total=len(args.lengths) * len(steps), desc="benchmark", unit="step")
    for L in args.lengths:
        q, k, v = make_qkv(args.batch, args.heads, L, args.d_head)
        x = torch.randn(args.batch, L, d_model, generator=torch.Generator().manual_seed(1))
        n = repeats_for(L, args)
        row = {"L": L, "repeats": n, "score_bytes": args.batch * args.heads * L * L * 4}

        bar.set_postfix_str(f"L={L} attention time")
        row["time_all"] = run_times(
            {impl: attention_fn(impl, q, k, v, args.block_size) for impl in IMPLS}, n
        )
        row["time"], row["time_min"] = summarize(row["time_all"])
        bar.update()

        bar.set_postfix_str(f"L={L} module time")
        # partial binds this length's x now; the `del x` below then frees it (a lambda would look x
        # up when called, and after the del there is none)
        row["mha_all"] = run_times(
            {
                "ours": partial(ours_mha, x, x, x),
                "torch_fast": partial(torch_mha, x, x, x, need_weights=False),
                "torch_weights": partial(
                    torch_mha, x, x, x, need_weights=True, average_attn_weights=False
                ),
            },
            n,
        )
        row["mha"], row["mha_min"] = summarize(row["mha_all"])
        bar.update()

        bar.set_postfix_str(f"L={L} allocations")
        with torch.no_grad(), quiet_stderr():  # the profiler's start/stop lines
            row["alloc"] = {
                impl: peak_allocated_bytes(attention_fn(impl, q, k, v, args.block_size))
                for impl in IMPLS
            }
        bar.update()
        del q, k, v, x

        if not args.no_rss:
            bar.set_postfix_str(f"L={L} RSS subprocesses")
            row["rss"] = {impl: rss_growth(impl, L, args) for impl in IMPLS}
            bar.update()
        rows.append(row)
    bar.close()

    info = {
        "command": "python " + " ".join([os.path.relpath(__file__, HERE.parent)] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "wall_s": time.time() - start,
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(
        json.dumps(
            {
                "info": info,
                "config": {
                    "batch": args.batch,
                    "heads": args.heads,
                    "d_head": args.d_head,
                    "block_size": args.block_size,
                    "dtype": "float32",
                },
                "rows": rows,
            },
            indent=1,
        )
    )
    verdicts = write_report(rows, info, args, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()

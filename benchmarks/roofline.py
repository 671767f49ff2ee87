"""The two ceilings of a roofline on this CPU, and the time of the attention kernels chapter 7 places under them.

A roofline (Williams, Waterman and Patterson, 2009) bounds the speed of a kernel that does F
floating-point operations and moves M bytes to and from main memory by
``min(peak compute, bandwidth * F / M)``. This script measures the two ceilings of this machine,
one thread (the chapter's setting), float32:

- **compute**: ``torch.mm`` of two n x n matrices (n = ``--matmul-n``, 2048), ``2 n^3`` operations
  per call: the GFLOP/s of the fastest call;
- **memory bandwidth**: ``dst.copy_(src)`` between two preallocated float32 tensors of
  ``--copy-mib`` MiB each (256, far above the caches): one read and one write of every byte,
  counted as ``2 x`` the tensor's bytes (the write-allocate read a cache may add is not counted,
  as in STREAM's copy): the GB/s of the fastest call;

and the wall time of the kernels whose operations and bytes chapter 7 counts, q = k = v random
of shape (1, 4, L, 64):

- ``direct``: ``transformer_lite.scaled_dot_product_attention`` at L = ``--length`` (4096), and its
  three stages alone on preallocated inputs: ``scores`` (``q @ k^T``), ``softmax`` (over the last
  axis of an L x L score matrix), ``weighted sum`` (``weights @ v``);
- ``tiled``: ``transformer_lite.memory_efficient_attention`` at the same L, blocks of ``--block``
  (256);
- ``decode step``: the attention of one cached decode step: one query per head against
  ``--cache`` (32768) cached keys and values, ``scaled_dot_product_attention`` (a 64 MiB cache,
  above the 32 MiB L3 cache).

Each of ``--rounds`` (3) fresh processes, started with freed memory kept in the process
(``_common.KEEP_FREED_MEMORY``: the kernels' page faults are not what is measured here), runs
every callable once to warm up, then ``--repeats`` (5) interleaved calls in rotating order under
``torch.inference_mode()``. The report uses the fastest call of all rounds (other processes on the
shared machine can only slow a call down) and gives the median next to it.

Run: ``python benchmarks/roofline.py`` (about two minutes on an idle core; about 1.5 GiB of
memory). Writes ``benchmarks/roofline.{md,json}``; ``--from-json`` rewrites the ``.md`` from the
JSON without measuring.
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
from benchmarks._common import (
    MIB,
    fmt_ms,
    interleaved_calls,
    load,
    machine_line,
)

HERE = Path(__file__).resolve().parent
B, H, D_HEAD = 1, 4, 64


def callables(args: argparse.Namespace) -> dict:
    """No-argument callables of every measured case, on inputs made once."""
    import torch

    from transformer_lite import memory_efficient_attention, scaled_dot_product_attention

    gen = torch.Generator().manual_seed(0)
    n = args.matmul_n
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    src = torch.randn(args.copy_mib * MIB // 4, generator=gen)
    dst = torch.empty_like(src)
    L = args.length
    q = torch.randn(B, H, L, D_HEAD, generator=gen)
    kt = q.transpose(-2, -1).contiguous()  # (B, H, d, L)
    scores = torch.empty(B, H, L, L)
    weights = torch.softmax(torch.randn(B, H, L, L, generator=gen), dim=-1)
    softmax_out = torch.empty_like(weights)
    product = torch.empty(B, H, L, D_HEAD)
    q1 = torch.randn(B, H, 1, D_HEAD, generator=gen)
    cache_k, cache_v = (torch.randn(B, H, args.cache, D_HEAD, generator=gen) for _ in range(2))
    return {
        "matmul": lambda: torch.mm(a, b),
        "copy": lambda: dst.copy_(src),
        "direct": lambda: scaled_dot_product_attention(q, q, q),
        "direct: scores": lambda: torch.matmul(q, kt, out=scores),
        "direct: softmax": lambda: torch.softmax(scores, dim=-1, out=softmax_out),
        "direct: weighted sum": lambda: torch.matmul(weights, q, out=product),
        "tiled": lambda: memory_efficient_attention(q, q, q, block_size=args.block),
        "decode step": lambda: scaled_dot_product_attention(q1, cache_k, cache_v),
    }


def child(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    res = interleaved_calls(callables(args), args.repeats)
    return {name: r["times"] for name, r in res.items()}


def summarize(info: dict, rounds: list) -> dict:
    """Fastest and median seconds per case over all rounds, and the two ceilings."""
    cfg = info["config"]
    names = list(rounds[0])
    every = {n: [t for r in rounds for t in r[n]] for n in names}
    fastest = {n: min(ts) for n, ts in every.items()}
    median = {n: statistics.median(ts) for n, ts in every.items()}
    n = cfg["matmul_n"]
    copy_bytes = 2 * cfg["copy_mib"] * MIB
    peak = 2 * n**3 / fastest["matmul"]
    bandwidth = copy_bytes / fastest["copy"]
    return {
        "fastest_s": fastest,
        "median_s": median,
        "peak_flops_per_s": peak,
        "peak_flops_per_s_median": 2 * n**3 / median["matmul"],
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_bytes_per_s_median": copy_bytes / median["copy"],
        "ridge_flops_per_byte": peak / bandwidth,
    }


def write_md(path: Path, info: dict, rounds: list) -> None:
    s = summarize(info, rounds)
    cfg = info["config"]
    lines = [
        "# Roofline ceilings of this CPU, and the attention kernels' times",
        "",
        f"Produced by `{info['command'].strip()}` on {info['date']} (wall time {info['wall_s']:.0f} s, "
        f"load average {info['load'][0]:.2f} before, {info['load'][1]:.2f} after); "
        f"{len(rounds)} fresh processes (freed memory kept), {cfg['repeats']} interleaved calls "
        "per case in each; method in the script's docstring.",
        "",
        machine_line(info["machine"]),
        "",
        "## Ceilings (one thread, float32)",
        "",
        "| ceiling | measured by | fastest call | median call |",
        "|---|---|---:|---:|",
        f"| compute | `torch.mm`, {cfg['matmul_n']} x {cfg['matmul_n']} | "
        f"{s['peak_flops_per_s'] / 1e9:.1f} GFLOP/s | {s['peak_flops_per_s_median'] / 1e9:.1f} "
        "GFLOP/s |",
        f"| memory bandwidth | `copy_`, {cfg['copy_mib']} MiB read + {cfg['copy_mib']} MiB "
        f"written | {s['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s | "
        f"{s['bandwidth_bytes_per_s_median'] / 1e9:.1f} GB/s |",
        "",
        f"Ridge point (compute / bandwidth, fastest calls): {s['ridge_flops_per_byte']:.1f} FLOP "
        "per byte. A kernel that does fewer operations per byte of main-memory traffic than this "
        "cannot reach the compute ceiling: it is memory-bound.",
        "",
        "## Kernels (ms per call)",
        "",
        f"B = {B}, H = {H}, d_head = {D_HEAD}; L = {cfg['length']}, tiled blocks of "
        f"{cfg['block']}; decode step: one query against {cfg['cache']} cached keys and values.",
        "",
        "| case | fastest | median |",
        "|---|---:|---:|",
    ]
    for name in rounds[0]:
        if name in ("matmul", "copy"):
            continue
        lines.append(f"| {name} | {fmt_ms(s['fastest_s'][name])} | {fmt_ms(s['median_s'][name])} |")
    lines += [
        "",
        "The operations and bytes of each kernel, and so its place on the roofline, are counted in "
        "chapter 7 (`notebooks/07_cost.ipynb`), which reads this file.",
    ]
    path.write_text("\n".join(lines) + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--matmul-n", type=int, default=2048)
    p.add_argument("--copy-mib", type=int, default=256)
    p.add_argument("--length", type=int, default=4096)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--cache", type=int, default=32768)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    _common.add_run_options(p, HERE / "roofline")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    _common.run(args, lambda: child(args), lambda: run_all(args), write_md, "rounds")


def run_all(args: argparse.Namespace) -> tuple[dict, list]:
    """``args.rounds`` fresh processes (``keep`` allocator), each measuring every kernel once."""
    start, load_before = time.time(), load()
    passed = [a for a in sys.argv[1:] if a != "--child"]
    rounds = []
    for rnd in range(args.rounds):
        rounds.append(_common.child_json(__file__, ["--child", *passed], "keep"))
        print(
            f"round {rnd}: " + ", ".join(f"{n} {fmt_ms(min(t))} ms" for n, t in rounds[-1].items()),
            flush=True,
        )
    info = _common.run_info(
        start,
        args.threads,
        command=" ".join(["python benchmarks/roofline.py", *passed]),
        load=[load_before, load()],
        allocator="keep",
        config={
            k: getattr(args, k)
            for k in ("matmul_n", "copy_mib", "length", "block", "cache", "threads", "repeats")
        }
        | {"batch": B, "heads": H, "d_head": D_HEAD, "dtype": "float32"},
    )
    info["summary"] = summarize(info, rounds)
    return info, rounds


if __name__ == "__main__":
    main()

"""Is tiled attention faster than direct attention, and is the size of its tiles the reason?

Chapter 7 read, from one checked-in run of ``bench_attention.py`` (3 calls at L = 8192), that our
tiled attention took 0.24 of the direct one's time at L = 8192, and explained the advantage by the
cache: the tiles stay in it, the direct method's L x L matrices do not. This script measures both
sentences, with repeats:

1. **The ratio.** Tiled (blocks of 256, as in ``bench_attention.py``) against direct attention at
   L = 1024 to 8192: the median of ``--repeats`` calls in each of ``--rounds`` fresh processes.
2. **The block size.** At L = 4096, the tiled attention with blocks of 64 to 4096 (one tile of
   B x H x block x block float32 numbers: 64 KiB to 256 MiB; at 4096 the one tile is the whole
   matrix). The arithmetic is the same for every block size; what changes is the size of the
   tiles (and so whether they fit in the caches) and the number of Python iterations (L / block
   squared). If the cache is the reason, the time should rise once a tile outgrows the caches.

Every case runs with glibc's default allocator and with freed memory kept in the process
(``keep``, as in ``direct_doubling.py``), because large fresh matrices also cost page faults,
which are counted per call (``resource.getrusage(RUSAGE_SELF).ru_minflt``). In each process the
cases are interleaved and their order rotates from one repeat to the next, so a burst of load is
shared between them. One thread, ``torch.inference_mode()``, q = k = v of shape (1, 4, L, 64).

Run: ``python benchmarks/tiled_vs_direct.py`` (about six minutes on an idle core; needs about
3 GiB of free memory). Writes ``benchmarks/tiled_vs_direct.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the same setting as direct_doubling.py: freed blocks below 4 GiB stay in the process
KEEP = "glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_threshold=4294967296"
RATIO_LENGTHS = (1024, 2048, 4096, 8192)
RATIO_BLOCK = 256
SWEEP_L = 4096
SWEEP_BLOCKS = (64, 128, 256, 512, 1024, 2048, 4096)


def cases(part: str) -> list[tuple[str, int, int | None]]:
    """(name, L, block or None for direct) of one part of the measurement."""
    if part == "ratio":
        out = []
        for L in RATIO_LENGTHS:
            out += [(f"direct L={L}", L, None), (f"tiled L={L}", L, RATIO_BLOCK)]
        return out
    return [(f"direct L={SWEEP_L}", SWEEP_L, None)] + [
        (f"block {b}", SWEEP_L, b) for b in SWEEP_BLOCKS
    ]


def child(part: str, L: int, repeats: int) -> dict:
    import torch

    import transformer_lite as tl

    torch.set_num_threads(1)
    torch.manual_seed(0)
    q = torch.randn(1, 4, L, 64)
    mine = [c for c in cases(part) if c[1] == L]

    def call(block):
        if block is None:
            return tl.scaled_dot_product_attention(q, q, q)
        return tl.memory_efficient_attention(q, q, q, block_size=block)

    times = {name: [] for name, _, _ in mine}
    faults = {name: [] for name, _, _ in mine}
    with torch.inference_mode():
        for _, _, block in mine:
            call(block)  # warm-up
        for r in range(repeats):
            shift = r % len(mine)
            for name, _, block in mine[shift:] + mine[:shift]:
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                call(block)
                times[name].append(time.perf_counter() - t0)
                faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return {"times": times, "faults": faults}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=HERE / "tiled_vs_direct")
    args = parser.parse_args()
    if args.child:
        part, L = args.child
        print(json.dumps(child(part, int(L), args.repeats)))
        return
    start = time.time()
    runs = []
    jobs = [("ratio", L) for L in RATIO_LENGTHS] + [("sweep", SWEEP_L)]
    for rnd in range(args.rounds):
        for allocator in ("default", "keep"):
            for part, L in jobs:
                env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
                if allocator == "keep":
                    env["GLIBC_TUNABLES"] = KEEP
                load = os.getloadavg()[0]
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        part,
                        str(L),
                        "--repeats",
                        str(args.repeats),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                res = json.loads(out.stdout.strip().splitlines()[-1])
                for name, times in res["times"].items():
                    runs.append(
                        {
                            "part": part,
                            "case": name,
                            "L": L,
                            "allocator": allocator,
                            "round": rnd,
                            "times": times,
                            "faults": res["faults"][name],
                            "load_before": load,
                            "load_after": os.getloadavg()[0],
                        }
                    )
                    print(
                        rnd, allocator, name, f"{1e3 * statistics.median(times):.0f} ms", flush=True
                    )
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": time.time() - start,
        "python": platform.python_version(),
        "machine": platform.platform(),
        "repeats": args.repeats,
        "rounds": args.rounds,
        "ratio_block": RATIO_BLOCK,
        "sweep_L": SWEEP_L,
        "sweep_blocks": list(SWEEP_BLOCKS),
        "batch": 1,
        "heads": 4,
        "d_head": 64,
    }
    args.out.with_suffix(".json").write_text(json.dumps({"info": info, "runs": runs}, indent=1))
    write_md(args.out.with_suffix(".md"), info, runs)


def write_md(path: Path, info: dict, runs: list) -> None:
    med = {(r["round"], r["allocator"], r["case"]): statistics.median(r["times"]) for r in runs}
    flt = {(r["round"], r["allocator"], r["case"]): statistics.median(r["faults"]) for r in runs}
    rounds = sorted({r["round"] for r in runs})
    loads = [r["load_before"] for r in runs] + [r["load_after"] for r in runs]
    lines = [
        "# Tiled against direct attention, and the tiled attention's block size",
        "",
        f"Produced by `python benchmarks/tiled_vs_direct.py` on {info['date']} (wall time "
        f"{info['wall_s']:.0f} s, load average {min(loads):.2f} to {max(loads):.2f}); "
        f"{info['rounds']} rounds of fresh processes, {info['repeats']} calls per case in each, "
        "cases interleaved; method in the script's docstring.",
        "",
        f"## 1. Tiled (blocks of {info['ratio_block']}) / direct time, per round",
        "",
        "| allocator | L | "
        + " | ".join(f"round {r}" for r in rounds)
        + " | median of rounds | direct ms (median) | tiled ms (median) |",
        "|---|---:|" + "---:|" * (len(rounds) + 3),
    ]
    for allocator in ("default", "keep"):
        for L in RATIO_LENGTHS:
            ratios = [
                med[r, allocator, f"tiled L={L}"] / med[r, allocator, f"direct L={L}"]
                for r in rounds
            ]
            d = statistics.median(med[r, allocator, f"direct L={L}"] for r in rounds)
            t = statistics.median(med[r, allocator, f"tiled L={L}"] for r in rounds)
            lines.append(
                f"| {allocator} | {L} | "
                + " | ".join(f"{x:.2f}" for x in ratios)
                + f" | {statistics.median(ratios):.2f} | {1e3 * d:.0f} | {1e3 * t:.0f} |"
            )
    lines += [
        "",
        f"## 2. L = {info['sweep_L']}: median ms per call (round by round), and page faults "
        "per call (round 0)",
        "",
        "| case | tile KiB | "
        + " | ".join(f"default r{r}" for r in rounds)
        + " | "
        + " | ".join(f"keep r{r}" for r in rounds)
        + " | faults default | faults keep |",
        "|---|---:|" + "---:|" * (2 * len(rounds) + 2),
    ]
    for name in [f"direct L={info['sweep_L']}"] + [f"block {b}" for b in info["sweep_blocks"]]:
        tile = (
            "-" if name.startswith("direct") else f"{4 * int(name.split()[1]) ** 2 * 4 // 1024:,}"
        )
        cells = [f"{1e3 * med[r, a, name]:.0f}" for a in ("default", "keep") for r in rounds]
        lines.append(
            f"| {name} | {tile} | "
            + " | ".join(cells)
            + f" | {flt[0, 'default', name]:,.0f} | {flt[0, 'keep', name]:,.0f} |"
        )
    lines += [
        "",
        "Tile KiB: one (B, H, block, block) float32 tile. The machine's caches (lscpu): L1d 48 KiB",
        "and L2 2 MiB per core, L3 32 MiB shared.",
    ]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

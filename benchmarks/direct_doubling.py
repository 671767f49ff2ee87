"""Why does our direct attention take about 9.5x longer at L = 8192 than at L = 4096?

Chapter 7 reads ``results.json``: from L = 4096 to 8192 the direct attention's median time grew
9.5x, the tiled one's and torch's fused kernel's about 4x. Every byte the direct method moves,
and every page the operating system must supply, grows as L^2, i.e. 4x per doubling; this script
measures what else changes. For each L and each allocator setting (glibc's default, and
``keep``: freed memory stays in the process, as in ``attention_floors.py``), a fresh process:

- builds ``q = k = v`` of shape (1, 4, L, 64), float32, one thread, ``torch.inference_mode()``;
- times ``transformer_lite.scaled_dot_product_attention`` (one warm-up, then ``--repeats`` calls),
  and counts minor page faults per call (``resource.getrusage(RUSAGE_SELF).ru_minflt``);
- profiles one more call with ``torch.profiler`` and reports each operator's self CPU time, so
  that the growth can be located operator by operator.

Run: ``python benchmarks/direct_doubling.py`` (about three minutes on an idle core; needs about 3
GiB of free memory). Writes ``benchmarks/direct_doubling.{md,json}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# this checkout's package and benchmarks/_common.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common
from benchmarks._common import interleaved_calls, load, machine_line

HERE = Path(__file__).resolve().parent
# A run whose data was not kept, recorded here so that the report can set it beside the JSON's runs
EARLIER_RUN = (
    "An earlier run of this script on 2026-12-02 (not kept; its `keep` setting used a 1 GiB mmap\n"
    "threshold, which the 1 GiB matrices at L = 8192 reach, so they faulted there too) ran while\n"
    "other jobs of ours used the second core: calls at L = 8192 with the default allocator took\n"
    "8.0, 5.0, 5.0, 2.0 and 2.1 s in one process, with the same number of faults (524,290 to\n"
    "528,386 per call)"
)
# Freed memory kept in the process: _common.KEEP_FREED_MEMORY, blocks below 4 GiB. (attention_floors.py
# uses 1 GiB, which the 1 GiB matrices at L = 8192 reach, so they would still be mmapped and fault on
# every call.) The faults counted say whether it worked.


def child(L: int, repeats: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from transformer_lite import scaled_dot_product_attention

    torch.set_num_threads(1)
    torch.manual_seed(0)
    q = torch.randn(1, 4, L, 64)
    res = interleaved_calls({"direct": lambda: scaled_dot_product_attention(q, q, q)}, repeats)
    times, faults = res["direct"]["times"], res["direct"]["faults"]
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        scaled_dot_product_attention(q, q, q)
    ops = {}
    for e in prof.key_averages():
        if e.self_cpu_time_total > 0:
            ops[e.key] = e.self_cpu_time_total / 1e6  # seconds
    return {"L": L, "times": times, "faults": faults, "ops": ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    _common.add_run_options(parser, HERE / "direct_doubling")
    args = parser.parse_args()
    _common.run(
        args, lambda: child(args.child, args.repeats), lambda: run_all(args), write_md, "runs"
    )


def run_all(args: argparse.Namespace) -> tuple[dict, list]:
    """Every length under both allocators, ``args.rounds`` times, each in a fresh process."""
    start = time.time()
    runs = []
    for rnd in range(args.rounds):
        for allocator in ("default", "keep"):
            for L in args.lengths:
                load_before = load()
                argv = ["--child", str(L), "--repeats", str(args.repeats)]
                run = _common.child_json(__file__, argv, allocator)
                run.update(
                    allocator=allocator, round=rnd, load_before=load_before, load_after=load()
                )
                runs.append(run)
                print(allocator, L, [f"{t:.3f}" for t in run["times"]], run["faults"], flush=True)
    return _common.run_info(start, repeats=args.repeats, rounds=args.rounds), runs


def write_md(path: Path, info: dict, runs: list) -> None:
    import statistics

    lines = [
        "# Direct attention from L = 4096 to 8192",
        "",
        f"Produced by `python benchmarks/direct_doubling.py` on {info['date']} "
        f"(wall time {info['wall_s']:.0f} s); method in the script's docstring.",
        "",
        *([machine_line(info["machine"]), ""] if isinstance(info.get("machine"), dict) else []),
        "| round | allocator | L | load before / after | median ms | min ms | faults / call "
        "(median) | bytes of one score matrix / fault |",
        "|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in runs:
        fault = statistics.median(r["faults"])
        score_bytes = 4 * r["L"] ** 2 * 4
        per = f"{score_bytes / fault:,.0f}" if fault else "-"
        lines.append(
            f"| {r['round']} | {r['allocator']} | {r['L']} | {r['load_before']:.2f} / "
            f"{r['load_after']:.2f} | {1e3 * statistics.median(r['times']):.0f} | "
            f"{1e3 * min(r['times']):.0f} | {fault:,.0f} | {per} |"
        )
    lines += [
        "",
        "One call holds two fresh L x L float32 matrices (scores, weights); with glibc's default",
        "settings each is mmapped and faulted in page by page (4 KiB) on every call, so a call",
        "takes 2 faults per 4 KiB of one score matrix (2,048 bytes / fault) at both lengths.",
        "",
        "Self CPU time per operator in the profiled call (ms), round 0:",
        "",
    ]
    for allocator in ("default", "keep"):
        rs = {r["L"]: r for r in runs if r["allocator"] == allocator and r["round"] == 0}
        Ls = sorted(rs)
        names = sorted(
            set().union(*(rs[L]["ops"] for L in Ls)), key=lambda n: -rs[Ls[-1]]["ops"].get(n, 0)
        )
        lines += [
            f"{allocator}:",
            "",
            "| operator | " + " | ".join(f"L = {L}" for L in Ls) + " | ratio |",
            "|---|" + "---:|" * (len(Ls) + 1),
        ]
        for n in names:
            vals = [rs[L]["ops"].get(n, 0.0) for L in Ls]
            if max(vals) < 1e-3:
                continue
            ratio = f"{vals[-1] / vals[0]:.2f}" if vals[0] > 0 else "-"
            lines.append(
                f"| `{n}` | " + " | ".join(f"{1e3 * v:.0f}" for v in vals) + f" | {ratio} |"
            )
        lines.append("")
    last = [
        t
        for r in runs
        if r["L"] == max(x["L"] for x in runs) and r["allocator"] == "default"
        for t in r["times"]
    ]
    lines.append(
        EARLIER_RUN + f"; the runs above, with nothing else of ours running, stay between "
        f"{min(last):.2f} and\n{max(last):.2f} s."
    )
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

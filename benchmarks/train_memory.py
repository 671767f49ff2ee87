"""Peak memory of one training step (forward and backward) of attention against L: direct, tiled, recomputed.

Chapter 7 measures, for L up to 2048, that tiled attention with the online softmax does not keep
training memory linear: autograd keeps every tile of exp(S - m) for the backward pass. This
script continues the measurement to ``--lengths`` (512 to 4096), two independent ways, in a fresh
process per (method, L, measure), one thread, float32, q, k, v random of shape (1, 4, L, 64)
with ``requires_grad``, a fixed upstream gradient of ones:

- ``alloc``: ``transformer_lite.chapters.measure.peak_allocated_bytes`` of one forward and backward
  pass (torch's profiler records every allocation and free of PyTorch's CPU allocator; the peak of
  their running sum). Exact for tensors, and the same number on every run: the gradients of q, k,
  v are counted, the inputs are not; BLAS work buffers and allocator overhead are not seen.
- ``saved``: the bytes of the distinct storages autograd keeps after the forward pass alone
  (``torch.autograd.graph.saved_tensors_hooks``), what the backward pass will read.
- ``rss``: the growth of the process's peak resident set size (``VmHWM``, reset by writing 5 to
  ``/proc/self/clear_refs`` after a warm-up on a tiny input) over one forward and backward pass:
  what the operating system saw, BLAS buffers and allocator overhead included, in touched pages.

The methods: ``direct`` is ``transformer_lite.scaled_dot_product_attention`` (its output);
``tiled`` is ``transformer_lite.memory_efficient_attention`` with blocks of ``--block`` (128, as in
the chapter); ``recomputed`` runs the same function on one block of queries at a time under
``torch.utils.checkpoint`` (the chapter's ``recomputed_attention``), so the backward pass reruns
a block's forward instead of keeping its tiles, the effect FlashAttention's backward pass gets by
recomputing tiles from saved row statistics.

Run: ``python benchmarks/train_memory.py`` (about four minutes on one core, under 1 GiB per
process). At L = 8192 the direct method's step peaked at 3.1 GiB of RSS, and the profiled tiled
step was killed by the kernel's out-of-memory killer when the machine's 23.5 GiB ran out (a
python3 process with 23 GB resident; we did not establish what held it), so the default stops
at 4096. Writes ``benchmarks/train_memory.{md,json}``; ``--from-json``
rewrites the ``.md`` from the JSON without measuring.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# this checkout's package and benchmarks/_common.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common
from benchmarks._common import MIB, fmt_mib, load, machine_line, quiet_stderr

HERE = Path(__file__).resolve().parent
B, H, D_HEAD = 1, 4, 64
METHODS = ("direct", "tiled", "recomputed")
MEASURES = ("alloc", "saved", "rss")


def attention(method: str, block: int):
    """The callable ``(q, k, v) -> output`` of one method."""
    from torch import cat
    from torch.utils.checkpoint import checkpoint

    from transformer_lite import memory_efficient_attention, scaled_dot_product_attention

    def direct(q, k, v):
        return scaled_dot_product_attention(q, k, v)[0]

    def tiled(q, k, v):
        return memory_efficient_attention(q, k, v, block_size=block)

    def recomputed(q, k, v):
        blocks = [
            checkpoint(tiled, q[..., i : i + block, :], k, v, use_reentrant=False)
            for i in range(0, q.shape[-2], block)
        ]
        return cat(blocks, dim=-2)

    return {"direct": direct, "tiled": tiled, "recomputed": recomputed}[method]


def training_step(fn, q, k, v) -> None:
    out = fn(q, k, v)
    out.backward(out.new_ones(out.shape))


def saved_bytes(fn, q, k, v) -> int:
    """Bytes of the distinct storages autograd keeps after the forward pass."""
    import torch

    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(q, k, v)
    return sum(storages.values())


def peak_rss_kib() -> int:
    """``VmHWM`` of /proc/self/status (not ``ru_maxrss``, which a child inherits from its parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM line in /proc/self/status (Linux only)")


def child(method: str, L: int, measure: str, block: int) -> int:
    """In a fresh process: one measurement in bytes."""
    import torch

    from transformer_lite.chapters.measure import peak_allocated_bytes

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    fn = attention(method, block)
    q, k, v = (torch.randn(B, H, L, D_HEAD, generator=gen, requires_grad=True) for _ in range(3))
    small = [torch.randn(1, 1, 2 * block, D_HEAD, requires_grad=True) for _ in range(3)]
    training_step(fn, *small)  # load the code paths on a tiny input
    if measure == "alloc":
        with quiet_stderr():
            return peak_allocated_bytes(training_step, fn, q, k, v)
    if measure == "saved":
        return saved_bytes(fn, q, k, v)
    Path("/proc/self/clear_refs").write_text("5")  # the peak so far no longer counts
    before = peak_rss_kib()  # = the current RSS
    training_step(fn, q, k, v)
    return 1024 * (peak_rss_kib() - before)


def write_md(path: Path, info: dict, rows: list) -> None:
    cfg = info["config"]
    lengths = sorted({r["L"] for r in rows})
    value = {(r["method"], r["L"], r["measure"]): r["bytes"] for r in rows}
    lines = [
        "# Peak memory of a training step of attention (forward and backward)",
        "",
        f"Produced by `{info['command'].strip()}` on {info['date']} (wall time {info['wall_s']:.0f} s, "
        f"load average {info['load'][0]:.2f} before, {info['load'][1]:.2f} after); a fresh process "
        "per method, length and measure; method in the script's docstring.",
        "",
        machine_line(info["machine"]),
        "",
        f"B = {B}, H = {H}, d_head = {D_HEAD}, float32; tiled and recomputed in blocks of "
        f"{cfg['block']}. MiB; `score matrix` is one B x H x L x L float32 matrix.",
        "",
        "| L | score matrix | " + " | ".join(f"{m}: {x}" for x in MEASURES for m in METHODS) + " |",
        "|---:|---:|" + "---:|" * (len(MEASURES) * len(METHODS)),
    ]
    for L in lengths:
        cells = [fmt_mib(value[m, L, x]) for x in MEASURES for m in METHODS]
        lines.append(f"| {L} | {fmt_mib(B * H * L * L * 4)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`alloc`: peak tensor storage of PyTorch's CPU allocator during one forward and backward "
        "pass (profiler; exact, gradients included, inputs not). `saved`: what autograd keeps "
        "after the forward pass. `rss`: growth of the peak resident set size over the same pass "
        "(pages touched, BLAS buffers and allocator overhead included).",
    ]
    path.write_text("\n".join(lines) + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--out", type=Path, default=HERE / "train_memory")
    p.add_argument("--from-json", action="store_true", help="rewrite the .md from the .json")
    p.add_argument("--child", nargs=3, metavar=("METHOD", "L", "MEASURE"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    _common.run(
        args,
        lambda: child(args.child[0], int(args.child[1]), args.child[2], args.block),
        lambda: run_all(args),
        write_md,
        "rows",
    )


def run_all(args: argparse.Namespace) -> tuple[dict, list]:
    """Every length, method and measure, each in a fresh process."""
    start, load_before = time.time(), load()
    rows = []
    for L in args.lengths:
        for method in METHODS:
            for measure in MEASURES:
                argv = ["--block", str(args.block), "--child", method, str(L), measure]
                nbytes = _common.child_json(__file__, argv)
                rows.append({"method": method, "L": L, "measure": measure, "bytes": nbytes})
                print(f"L = {L}, {method}, {measure}: {nbytes / MIB:.1f} MiB", flush=True)
    passed = [a for a in sys.argv[1:]]
    info = _common.run_info(
        start,
        command=" ".join(["python benchmarks/train_memory.py", *passed]),
        load=[load_before, load()],
        allocator="default",
        config={"lengths": args.lengths, "block": args.block}
        | {"batch": B, "heads": H, "d_head": D_HEAD, "dtype": "float32"},
    )
    return info, rows


if __name__ == "__main__":
    main()

"""Helpers shared by the benchmark scripts: the machine, interleaved timing, quiet profiling, formats.

Import from a script run as ``python benchmarks/<script>.py`` after putting the repository root on
``sys.path`` (each script does, so that it measures this checkout's package)::

    from benchmarks._common import fmt_ms, machine
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
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

MIB = 2**20
# glibc's malloc keeps freed blocks below 4 GiB in the process (heap, not mmap; never trimmed),
# so a repeated call reuses its memory without page faults; the faults counted say whether it did
KEEP_FREED_MEMORY = "glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_threshold=4294967296"


# --------------------------------------------------------------------------- the machine


def cpu_model() -> str:
    """The first ``model name`` of /proc/cpuinfo (``platform.processor()`` where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _caches() -> dict[str, str]:
    """Cache sizes by level, as sysfs gives them for CPU 0 (e.g. ``{"L1d": "32K", "L3": "32768K"}``)."""
    out = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[f"L{level}{suffix}"] = size
    return out


def machine() -> dict:
    """What a result depends on: CPU, its vector flags and caches, memory, threads, versions."""
    import torch

    flags = _cpu_flags()
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": " ".join(
            f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags
        )
        or "none of avx2/avx512",
        "caches_per_core_or_shared": _caches(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": _memory_gib(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "os": platform.platform(),
        **aten_capability(),
    }


def aten_capability() -> dict:
    """The vector kernels PyTorch's CPU operators ran with, and the variable that may have chosen them.

    ``aten_cpu_capability`` is what ATen actually used (``torch.backends.cpu.get_cpu_capability()``:
    ``AVX512``, ``AVX2``, ``DEFAULT`` for the scalar kernels, ...); ``aten_cpu_capability_env`` is
    ``ATEN_CPU_CAPABILITY`` as set, or ``None`` when unset (ATen then picks the best the CPU has).
    The two are kept apart because ``default`` is both what an unset variable used to be recorded
    as and the name of the scalar level that the second test run asks for.
    """
    import torch

    return {
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
    }


def machine_line(m: dict) -> str:
    """One Markdown line describing :func:`machine`'s dict."""
    caches = ", ".join(f"{k} {v}" for k, v in m.get("caches_per_core_or_shared", {}).items())
    return (
        f"- CPU: {m['cpu_model']} ({m['cpu_flags']}), {m['logical_cpus']} logical CPUs, torch using "
        f"{m['torch_threads']} thread(s); caches (sysfs, cpu0): {caches or 'unknown'}; "
        f"{m['memory_gib']} GiB RAM; torch {m['torch']}, Python {m['python']}, {m['os']}"
    )


def load() -> float:
    """The 1-minute load average: how busy the shared machine was."""
    return os.getloadavg()[0]


def child_env(allocator: str) -> dict:
    """Environment of a fresh one-thread child process, with glibc's ``default`` allocator or ``keep``."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("GLIBC_TUNABLES", None)
    if allocator == "keep":
        env["GLIBC_TUNABLES"] = KEEP_FREED_MEMORY
    return env


# --------------------------------------------------------------------------- timing


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved_calls(
    fns: dict[str, Callable[[], object]], repeats: int, free_in_timing: bool = True
) -> dict[str, dict[str, list]]:
    """Wall times and page faults of each callable: one warm-up each, then ``repeats`` interleaved calls.

    The order of the callables rotates from one repeat to the next, so a slow period of the machine
    is shared between them. With ``free_in_timing`` the result is dropped inside the timed span (as
    a caller that discards it); otherwise after it. Runs under ``torch.inference_mode()``.
    Returns ``{name: {"times": [s, ...], "faults": [n, ...]}}``.
    """
    import torch

    names = list(fns)
    out = {n: {"times": [], "faults": []} for n in names}
    with torch.inference_mode():
        for n in names:
            fns[n]()  # warm-up: first-call costs (kernel selection, allocator growth)
        for r in range(repeats):
            for n in names[r % len(names) :] + names[: r % len(names)]:
                f0 = minor_faults()
                t0 = time.perf_counter()
                if free_in_timing:
                    fns[n]()  # its result is dropped here, inside the timed span
                    result = None
                else:
                    result = fns[n]()
                t1 = time.perf_counter()
                out[n]["faults"].append(minor_faults() - f0)
                out[n]["times"].append(t1 - t0)
                del result
    return out


@contextmanager
def quiet_stderr():
    """Hide what C++ code writes to the process's stderr (torch's profiler prints ``USDT ...
    profiler_start`` / ``profiler_stop`` for every profiled call), Python's too."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


# --------------------------------------------------------------------------- formats


def fmt_num(x: float) -> str:
    """Three significant digits below 100, whole numbers from 100 up."""
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds, by :func:`fmt_num`."""
    return fmt_num(seconds * 1e3)


def fmt_mib(nbytes: float) -> str:
    """Bytes as MiB, by :func:`fmt_num`."""
    return fmt_num(nbytes / MIB)


def fmt_ratio(value: float | None, span: tuple[float, float] | None = None, digits=None) -> str:
    """A ratio with ``digits`` decimals (default: 2, or 0 from 10 up), then ``(low-high)`` if given.

    ``None`` (nothing to compare) is ``-``.
    """
    if value is None:
        return "-"
    if digits is None:
        digits = 0 if value >= 10 else 2
    text = f"{value:.{digits}f}"
    if span is not None:
        text += f" ({span[0]:.{digits}f}-{span[1]:.{digits}f})"
    return text


def median_ms(times: list[float]) -> float:
    """The median of wall times in seconds, in milliseconds."""
    return 1e3 * statistics.median(times)


# --------------------------------------------------------------------------- command line and results


def add_run_options(parser: argparse.ArgumentParser, out: Path) -> None:
    """``--repeats`` (calls per process), ``--rounds`` (fresh processes per case), ``--out`` (the
    stem of the ``.json`` and ``.md`` results) and ``--from-json``."""
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument(
        "--from-json",
        action="store_true",
        help="do not measure: rewrite the .md from the .json of --out",
    )


def redraw_md(out: Path, write_md: Callable, results: str) -> None:
    """``--from-json``: write ``out.md`` again from what a run stored in ``out.json`` (its ``info``
    and its ``results`` entry), measuring nothing."""
    data = json.loads(out.with_suffix(".json").read_text())
    write_md(out.with_suffix(".md"), data["info"], data[results])


def run_info(start: float, threads: int = 1, **fields) -> dict:
    """The ``info`` a run stores: the date, the wall time since ``start``, the machine (torch using
    the children's ``threads``), then ``fields``."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": time.time() - start,
        "machine": machine() | {"torch_threads": threads},
        **fields,
    }


def child_json(script: str, argv: list[str], allocator: str = "default"):
    """Run ``python script *argv`` in a fresh one-thread process (:func:`child_env`) and return the
    JSON value it printed on its last line of stdout (stderr is captured: profiler lines)."""
    done = subprocess.run(
        [sys.executable, script, *argv],
        env=child_env(allocator),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(
    args: argparse.Namespace,
    child: Callable[[], object],
    measure: Callable[[], tuple[dict, list]],
    write_md: Callable,
    results: str,
) -> None:
    """A benchmark's three ways to run. ``--child``: print ``child()`` as JSON, for the parent's
    :func:`child_json`. ``--from-json``: :func:`redraw_md`. Otherwise ``info, values = measure()``,
    stored in ``args.out``'s ``.json`` (under ``info`` and ``results``) and reported in its ``.md``."""
    if args.child:
        print(json.dumps(child()))
    elif args.from_json:
        redraw_md(args.out, write_md, results)
    else:
        info, values = measure()
        args.out.with_suffix(".json").write_text(
            json.dumps({"info": info, results: values}, indent=1)
        )
        write_md(args.out.with_suffix(".md"), info, values)
        print(f"wrote {args.out.with_suffix('.md')} and .json")

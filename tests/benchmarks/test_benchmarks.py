"""The benchmark scripts' shared helpers and reports (benchmarks/_common.py and the .md writers).

Oracles: hand-computed formats, a counting callable for the interleaved timing, a C-level write
to file descriptor 2 for the quiet profiler, and the checked-in JSON files: each report is
regenerated from its JSON and must equal the checked-in .md byte for byte (the scripts write the
whole report, nothing is added by hand). A hand-made roofline run checks the ceilings' arithmetic.
No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))

from benchmarks import _common  # noqa: E402


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_formats():
    assert _common.fmt_num(3.14159) == "3.14"
    assert _common.fmt_num(99.94) == "99.9"
    assert _common.fmt_num(123.6) == "124"
    assert _common.fmt_ms(0.0123) == "12.3"
    assert _common.fmt_ms(1.5) == "1500"
    assert _common.fmt_mib(3 * 2**20) == "3"
    assert _common.fmt_ratio(None) == "-"
    assert _common.fmt_ratio(0.8765) == "0.88"
    assert _common.fmt_ratio(12.4, (10.2, 14.9)) == "12 (10-15)"
    assert _common.fmt_ratio(1.234, (1.0, 1.5)) == "1.23 (1.00-1.50)"
    assert _common.fmt_ratio(0.00998, digits=4) == "0.0100"


def test_interleaved_calls_warm_up_rotation_and_counts():
    order = []
    fns = {n: (lambda n=n: order.append(n)) for n in "abc"}
    out = _common.interleaved_calls(fns, repeats=3)
    assert order == list("abc") + list("abc") + list("bca") + list("cab")
    assert set(out) == set("abc")
    for r in out.values():
        assert len(r["times"]) == len(r["faults"]) == 3
        assert all(t >= 0 for t in r["times"]) and all(f >= 0 for f in r["faults"])


def test_interleaved_calls_frees_the_result_after_timing():
    alive = []

    class Probe:
        def __del__(self):
            alive.append("freed")

    out = _common.interleaved_calls({"p": Probe}, repeats=2, free_in_timing=False)
    assert len(out["p"]["times"]) == 2 and alive.count("freed") == 3


def test_quiet_stderr_hides_c_level_writes(capfd):
    with _common.quiet_stderr():
        os.write(2, b"USDT: profiler_start\n")
    os.write(2, b"visible\n")
    assert capfd.readouterr().err == "visible\n"


def test_child_env_sets_the_allocator():
    assert _common.child_env("keep")["GLIBC_TUNABLES"] == _common.KEEP_FREED_MEMORY
    assert "GLIBC_TUNABLES" not in _common.child_env("default")
    assert _common.child_env("default")["OMP_NUM_THREADS"] == "1"


def test_machine_records_what_results_depend_on():
    m = _common.machine()
    assert {"cpu_model", "cpu_flags", "logical_cpus", "torch", "caches_per_core_or_shared"} <= set(
        m
    )
    assert _common.machine_line(m).startswith("- CPU: ")


@pytest.mark.parametrize(
    "name, writer",
    [
        ("tiled_vs_direct", lambda mod, d, out: mod.write_md(out, d["info"], d["runs"])),
        ("direct_doubling", lambda mod, d, out: mod.write_md(out, d["info"], d["runs"])),
        ("roofline", lambda mod, d, out: mod.write_md(out, d["info"], d["rounds"])),
        ("cost_times", lambda mod, d, out: mod.write_md(out, d["info"], d["rounds"])),
        (
            "decode",
            lambda mod, d, out: mod.write_report(d["results"], d["info"], out, d.get("before")),
        ),
    ],
)
def test_checked_in_report_is_the_scripts_output(tmp_path, name, writer):
    data = json.loads((BENCH / f"{name}.json").read_text())
    out = tmp_path / f"{name}.md"
    writer(_script(name), data, out)
    assert out.read_text() == (BENCH / f"{name}.md").read_text()


def test_roofline_ceilings_from_a_hand_made_run():
    roofline = _script("roofline")
    info = {"config": {"matmul_n": 1000, "copy_mib": 1}}
    rounds = [
        {"matmul": [0.04, 0.02], "copy": [0.001, 0.002], "direct": [0.5]},
        {"matmul": [0.03], "copy": [0.0005], "direct": [0.4, 0.6]},
    ]
    s = roofline.summarize(info, rounds)
    assert s["peak_flops_per_s"] == pytest.approx(2e9 / 0.02)  # 2 n^3 / fastest
    assert s["bandwidth_bytes_per_s"] == pytest.approx(2 * 2**20 / 0.0005)
    assert s["ridge_flops_per_byte"] == pytest.approx(1e11 / (2 * 2**20 / 0.0005))
    assert s["fastest_s"]["direct"] == 0.4 and s["median_s"]["direct"] == 0.5
    assert s["peak_flops_per_s_median"] == pytest.approx(2e9 / 0.03)


def test_benchmarks_import_public_names_directly():
    for path in BENCH.glob("*.py"):
        text = path.read_text()
        assert "walk_packages" not in text and "getattr(tl," not in text, path.name

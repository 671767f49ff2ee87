"""Chapter 8's figure helpers: interactive.attention_cost_figure, viz.fit_loglog_slope and viz.plot_loglog_fit.

Oracles: a hand-made results dictionary (the format benchmarks/bench_attention.py writes) whose bytes and
seconds convert to known MiB and ms; power laws with known exponents for the slope fit; the checked-in
benchmarks/results.json for the real figure's structure.
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from transformer_lite.chapters import interactive, viz

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results.json"


def _results():
    rows = []
    for L in (128, 256):
        rows.append(
            dict(
                L=L,
                score_bytes=4 * L * L * 4,
                alloc=dict(
                    ours_direct=3 * 2**20 * (L // 128) ** 2,
                    ours_tiled=2**20 * L // 128,
                    torch_sdpa=2**19,
                ),
                time=dict(
                    ours_direct=0.002 * (L // 128) ** 2,
                    ours_tiled=0.003 * (L // 128) ** 2,
                    torch_sdpa=0.001,
                ),
            )
        )
    return dict(info=dict(date="2000-01-01"), config=dict(batch=1, heads=4, d_head=64), rows=rows)


def test_cost_figure_states_hold_mib_and_ms():
    fig = interactive.attention_cost_figure(_results())
    mem, tim = fig.data
    assert mem.type == "bar" and tim.type == "bar"
    assert list(mem.y) == [0.25, 3.0, 1.0, 0.5]  # 4*128*128*4 bytes = 0.25 MiB, ...
    assert list(tim.y) == [2.0, 3.0, 1.0]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["128", "256"]
    update, traces = steps[1].args
    assert list(traces) == [0, 1]
    assert update["y"] == [[1.0, 12.0, 2.0, 0.5], [8.0, 12.0, 1.0]]
    assert update["text"][1] == ["8", "12", "1"]
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"
    lo, hi = fig.layout.yaxis.range  # fixed over all states: every bar stays in view
    assert lo < np.log10(0.25) and hi > np.log10(12.0)
    assert "2000-01-01" in fig.layout.title.text


def test_cost_figure_on_the_checked_in_benchmark():
    results = json.loads(RESULTS.read_text())
    fig = interactive.attention_cost_figure(results)
    steps = fig.layout.sliders[0].steps
    assert [int(s.label) for s in steps] == [r["L"] for r in results["rows"]]
    last = results["rows"][-1]
    assert steps[-1].args[0]["y"][0][0] == pytest.approx(last["score_bytes"] / 2**20, rel=1e-2)


def test_cost_figure_errors():
    with pytest.raises(ValueError, match="non-empty 'rows'"):
        interactive.attention_cost_figure({"rows": []})
    bad = _results()
    del bad["rows"][0]["alloc"]["ours_tiled"]
    with pytest.raises(ValueError, match="misses the key 'ours_tiled'"):
        interactive.attention_cost_figure(bad)


@pytest.mark.parametrize("p", [1.0, 2.0, 0.5])
def test_fit_loglog_slope_recovers_exponents(p):
    x = np.array([64, 128, 256, 512, 1024], dtype=float)
    assert viz.fit_loglog_slope(x, 3.0 * x**p) == pytest.approx(p, abs=1e-12)
    y = 3.0 * x**p
    y[0] = 1e6  # an outlier at small x is ignored with min_x
    assert viz.fit_loglog_slope(x, y, min_x=128) == pytest.approx(p, abs=1e-12)


def test_fit_loglog_slope_errors():
    with pytest.raises(ValueError, match="equal length"):
        viz.fit_loglog_slope([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least two points"):
        viz.fit_loglog_slope([1, 2, 4], [1, 2, 4], min_x=3)
    with pytest.raises(ValueError, match="all positive"):
        viz.fit_loglog_slope([1, 2, 4], [1, 0, 4])


def test_plot_loglog_fit_labels_slopes():
    x = [128, 256, 512]
    ax = viz.plot_loglog_fit(
        x, {"quadratic": [1, 4, 16], "linear": [5, 10, 20]}, title="t", ylabel="ms"
    )
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "quadratic: slope 2.00",
        "linear: slope 1.00",
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["128", "256", "512"]
    # the fitted line passes the points
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [1, 4, 16])
    plt.close("all")


def test_plot_roofline_draws_the_two_ceilings_the_ridge_and_the_points():
    from transformer_lite.chapters.viz.ch7_cost import plot_roofline

    peak, bandwidth = 100e9, 20e9  # ridge at 5 FLOP/byte
    ax = plot_roofline(
        peak,
        bandwidth,
        {"memory-bound": (0.5, 8e9), "compute-bound": (50.0, 60e9)},
        minor={"stage": (30.0, 40e9)},
        title="t",
    )
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP per byte" in ax.get_xlabel() and ax.get_ylabel() == "GFLOP/s"
    roof, ridge, *points = ax.get_lines()
    x, y = roof.get_xdata(), roof.get_ydata()
    # min(peak, bandwidth * I), in GFLOP/s: bandwidth's slope left of the ridge, flat right of it
    np.testing.assert_allclose(y, np.minimum(100.0, 20.0 * x))
    assert x.min() < 0.5 and x.max() > 50
    np.testing.assert_allclose(ridge.get_xdata(), [5.0, 5.0])
    assert [(p.get_xdata()[0], p.get_ydata()[0]) for p in points] == [
        (0.5, 8.0),
        (50.0, 60.0),
        (30.0, 40.0),
    ]
    assert points[2].get_markerfacecolor() == "none"
    assert any("ridge point" in t.get_text() and "5.0" in t.get_text() for t in ax.texts)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "roofline",
        "memory-bound",
        "compute-bound",
        "stage",
    ]
    plt.close("all")

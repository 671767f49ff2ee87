"""viz.plot_accuracy_vs_length (chapter 3, train short, test long).

Oracle: the numbers given, worked out here (each line is the mean of its seeds, each dot a seed,
the dashed line the ceiling), and the tick labels written by hand.
"""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from transformer_lite.chapters import viz  # noqa: E402

ACC = {
    "learned": [{16: 1.0, 32: 0.3, 64: 0.25}, {16: 0.9, 32: 0.5, 64: 0.27}],
    "ALiBi": [{16: 0.95, 32: 0.94, 64: 0.93}, {16: 0.97, 32: 0.9, 64: 0.91}],
}
CEILING = {16: 0.53, 32: 0.44, 64: 0.39}


def test_lines_are_seed_means_and_dots_the_seeds():
    ax = viz.plot_accuracy_vs_length(ACC, train_length=16, chance=0.25, ceiling=CEILING, title="t")
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    for scheme, runs in ACC.items():
        line = lines[f"{scheme} (mean of 2)"]
        expected = [np.mean([r[n] for r in runs]) for n in (16, 32, 64)]
        np.testing.assert_allclose(line.get_ydata(), expected)
    ceiling = lines["best order-blind guess\n(bag of tokens)"]
    np.testing.assert_allclose(ceiling.get_ydata(), [0.53, 0.44, 0.39])
    assert lines["chance (0.25)"].get_ydata()[0] == 0.25
    dots = sorted(y for c in ax.collections for y in c.get_offsets()[:, 1])
    assert dots == sorted(a for runs in ACC.values() for r in runs for a in r.values())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16 = L", "32 = 2L", "64 = 4L"]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == "t"


def test_bad_input():
    with pytest.raises(ValueError, match="at least one scheme"):
        viz.plot_accuracy_vs_length({}, 16, 0.25, CEILING)
    with pytest.raises(ValueError, match="same lengths for every seed of 'x'"):
        viz.plot_accuracy_vs_length({"x": [{16: 1.0}, {32: 1.0}]}, 16, 0.25, CEILING)

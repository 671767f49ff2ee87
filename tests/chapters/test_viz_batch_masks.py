"""``viz.ch2_causal_masks.plot_batch_masks``: the masks of a left-padded batch, one panel per row and stage.

Oracle: the masks passed in. Each panel's image is its row's mask, cell for cell (a transposed
or swapped panel fails), in its place (figure row = the batch's row, figure column = the stage);
the labels are the ones given, in order; one two-colour bar for the whole figure; each error path
names what it expected and what it received. (Legibility on a phone:
test_viz_masks_on_a_phone.py.)
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_lite import causal_mask
from transformer_lite.chapters.viz.ch2_causal_masks import plot_batch_masks


def _texts(labels):
    return [t.get_text() for t in labels]


def batch(lengths, L):
    """Left-padding masks (B, L) and the prefill (B, L, L) and decode (B, 1, L + 1) masks."""
    real = torch.tensor([[j >= L - n for j in range(L)] for n in lengths])
    grown = torch.cat((real, torch.ones(len(lengths), 1, dtype=torch.bool)), dim=1)
    return causal_mask(L) & real[:, None, :], causal_mask(1, L + 1) & grown[:, None, :]


def labels(B, n, prefix):
    return [[f"{prefix}{b}.{i}" for i in range(n)] for b in range(B)]


def figure(lengths=(1, 3), L=3):
    prefill, decode = batch(lengths, L)
    B = len(lengths)
    fig = plot_batch_masks(
        [prefill, decode],
        [labels(B, L, "q"), labels(B, 1, "d")],
        [labels(B, L, "k"), labels(B, L + 1, "K")],
        ["prefill", "decode step 1"],
        [f"row {b}" for b in range(B)],
        title="what to notice",
    )
    return fig, prefill, decode


def test_each_panel_shows_its_rows_mask_with_its_labels():
    fig, prefill, decode = figure()
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4  # 2 rows x 2 stages, in figure-row order: row b, then its stages
    for ax, (b, s, m) in zip(
        panels, [(0, 0, prefill[0]), (0, 1, decode[0]), (1, 0, prefill[1]), (1, 1, decode[1])]
    ):
        np.testing.assert_array_equal(ax.images[0].get_array(), m.numpy().astype(float))
        prefix = "qd"[s]
        assert _texts(ax.get_yticklabels()) == [f"{prefix}{b}.{i}" for i in range(m.shape[0])]
        assert _texts(ax.get_xticklabels())[0] == f"{'kK'[s]}{b}.0"
        assert ax.get_xlabel()
    # the stages name the columns; the rows of the batch name the figure rows
    assert [ax.get_title() for ax in panels[:2]] == ["prefill", "decode step 1"]
    assert panels[0].get_ylabel().startswith("row 0") and panels[2].get_ylabel().startswith("row 1")
    # figure row b sits above row b + 1; the stages side by side, each panel on its row's floor
    box = [ax.get_position() for ax in panels]
    assert box[0].y0 == box[1].y0 > box[2].y0 == box[3].y0
    assert box[0].x0 == box[2].x0 < box[1].x0 == box[3].x0
    bars = [ax for ax in fig.axes if not ax.images]
    assert len(bars) == 1
    assert _texts(bars[0].get_xticklabels()) == ["False:\nblocked", "True:\nmay attend"]
    assert fig._suptitle.get_text() == "what to notice"
    plt.close(fig)


def test_the_padded_row_blocks_its_padding_columns():
    """The figure's point, on the oracle side: a padded row's padding keys are never allowed."""
    _, prefill, decode = figure(lengths=(1, 3), L=3)
    assert not prefill[0][:, :2].any() and not decode[0][:, :2].any()
    assert decode[1].all()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(masks=[torch.ones(2, 3, 3)]), r"expected masks\[0\] a 3-D bool tensor"),
        (dict(masks=[torch.ones(3, 3, dtype=torch.bool)]), r"expected masks\[0\] a 3-D bool"),
        (dict(stage_names=[]), "one stage name per mask, received 0 names for 1 masks"),
        (dict(row_titles=["only one"]), r"B = 2 rows, received \[2\] and 1 titles"),
        (
            dict(query_labels=[[["a"], ["a", "b", "c"]]]),
            r"row 0 of shape \(3, 3\) needs 3 query and 3 key labels, received 1 and 3",
        ),
    ],
    ids=["float", "2-D", "stage-names", "row-titles", "labels"],
)
def test_rejects_what_does_not_match(change, message):
    prefill, _ = batch((1, 3), 3)
    kwargs = (
        dict(
            masks=[prefill],
            query_labels=[labels(2, 3, "q")],
            key_labels=[labels(2, 3, "k")],
            stage_names=["prefill"],
            row_titles=["row 0", "row 1"],
        )
        | change
    )
    with pytest.raises(ValueError, match=f"plot_batch_masks: .*{message}"):
        plot_batch_masks(**kwargs)

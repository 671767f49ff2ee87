"""Tests for transformer_lite.nn.blocks.DecoderBlock.

Oracle: ``torch.nn.TransformerDecoderLayer(batch_first=True)`` in float64 and
eval mode, its weights copied with ``DecoderBlock.from_torch``, for post-norm
and pre-norm, ReLU and GELU (as a string, a function and a module), with no
mask, a causal target mask, a target padding mask, a memory padding mask and
all of them. torch's boolean masks mean True = blocked, so ours are inverted
before handing them over. The self- and cross-attention weights the block
returns are compared with torch's ``self_attn`` / ``multihead_attn`` called on
the sublayer inputs. Plus the formulas written out, gradcheck, gradients
against torch, causality, and every error path.
"""

import pytest
import torch

from tests.conftest import ACTIVATIONS, F64, close, perturbed, rand, torch_decoder_layer
from transformer_lite import DecoderBlock, causal_mask, padding_mask

D, H, D_FF = 8, 2, 16
L, S = 5, 4


def torch_layer(norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64):
    return torch_decoder_layer(D, H, D_FF, norm_first, activation, seed=seed, eps=eps, dtype=dtype)


MASKS = ["none", "causal", "causal+tgt_padding", "memory_padding", "all"]
TGT_VALID = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])  # (B, L)
MEM_VALID = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])  # (B, S)


def masks_for(kind):
    """(our attn_mask, our memory_mask, torch kwargs) for B=3, L=5, S=4."""
    attn, memory, kwargs = None, None, {}
    if "causal" in kind or kind == "all":
        attn = causal_mask(L)
        kwargs["tgt_mask"] = ~causal_mask(L)  # torch: True = blocked
    if "tgt_padding" in kind or kind == "all":
        pad = padding_mask(TGT_VALID)  # (B, 1, 1, L)
        attn = pad if attn is None else (attn & pad)
        kwargs["tgt_key_padding_mask"] = ~TGT_VALID.bool()
    if "memory_padding" in kind or kind == "all":
        memory = padding_mask(MEM_VALID)  # (B, 1, 1, S)
        kwargs["memory_key_padding_mask"] = ~MEM_VALID.bool()
    return attn, memory, kwargs


def torch_weights(layer, x, mem, kwargs):
    """torch's per-head self- and cross-attention weights on the inputs each sublayer sees."""
    sa_kw = dict(
        attn_mask=kwargs.get("tgt_mask"),
        key_padding_mask=kwargs.get("tgt_key_padding_mask"),
        need_weights=True,
        average_attn_weights=False,
    )
    ca_kw = dict(
        key_padding_mask=kwargs.get("memory_key_padding_mask"),
        need_weights=True,
        average_attn_weights=False,
    )
    if layer.norm_first:
        h = layer.norm1(x)
        sa, sw = layer.self_attn(h, h, h, **sa_kw)
        x = x + sa
        _, cw = layer.multihead_attn(layer.norm2(x), mem, mem, **ca_kw)
    else:
        sa, sw = layer.self_attn(x, x, x, **sa_kw)
        x = layer.norm1(x + sa)
        _, cw = layer.multihead_attn(x, mem, mem, **ca_kw)
    return sw, cw


def check_against_torch(norm_first, act_name, mask_kind):
    layer = torch_layer(norm_first, ACTIVATIONS[act_name])
    ours = DecoderBlock.from_torch(layer).eval()
    assert ours.norm_first == norm_first and ours.ff.activation == act_name.split("-")[0]
    x, mem = rand(3, L, D, seed=1) * 2, rand(3, S, D, seed=2)
    attn, memory, kwargs = masks_for(mask_kind)

    y, self_w, cross_w = ours(x, mem, attn_mask=attn, memory_mask=memory)
    close(y, layer(x, mem, **kwargs))
    t_sw, t_cw = torch_weights(layer, x, mem, kwargs)
    close(self_w, t_sw)
    close(cross_w, t_cw)
    assert self_w.shape == (3, H, L, L) and cross_w.shape == (3, H, L, S)
    if memory is not None:  # padded source positions receive exactly zero cross-attention
        assert (
            cross_w.permute(0, 2, 1, 3)[~MEM_VALID.bool()[:, None, None, :].expand(3, L, H, S)] == 0
        ).all()


@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_block_matches_torch_decoder_layer(norm_first, mask_kind):
    check_against_torch(norm_first, "gelu-str", mask_kind)


@pytest.mark.parametrize("act_name", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_block_matches_torch_for_each_activation_spelling(norm_first, act_name):
    check_against_torch(norm_first, act_name, "all")


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_is_causal_flag_equals_explicit_mask_and_torch(norm_first):
    layer = torch_layer(norm_first, "gelu", seed=3)
    ours = DecoderBlock.from_torch(layer).eval()
    x, mem = rand(2, L, D, seed=3), rand(2, S, D, seed=4)
    y_flag, sw_flag, cw_flag = ours(x, mem, is_causal=True)
    y_mask, sw_mask, cw_mask = ours(x, mem, attn_mask=causal_mask(L))
    close(y_flag, y_mask)
    close(sw_flag, sw_mask)
    close(cw_flag, cw_mask)
    close(y_flag, layer(x, mem, tgt_mask=~causal_mask(L), tgt_is_causal=True))
    assert (sw_flag[..., ~causal_mask(L)] == 0).all()


def test_norm_orders_written_out():
    """Post-norm: x = n1(x + sa(x)); x = n2(x + ca(x, m)); x = n3(x + ff(x)). Pre-norm: x = x + sa(n1 x); ..."""
    x, mem = rand(2, 4, D, seed=5), rand(2, 3, D, seed=6)
    for norm_first in (False, True):
        blk = perturbed(lambda: DecoderBlock(D, H, D_FF, norm_first=norm_first), seed=5)

        def sa(t):
            return blk.self_attn(t, t, t, is_causal=True)[0]

        def ca(t):
            return blk.cross_attn(t, mem, mem)[0]

        if norm_first:
            h = x + sa(blk.norm1(x))
            h = h + ca(blk.norm2(h))
            expected = h + blk.ff(blk.norm3(h))
        else:
            h = blk.norm1(x + sa(x))
            h = blk.norm2(h + ca(h))
            expected = blk.norm3(h + blk.ff(h))
        close(
            blk(x, mem, is_causal=True)[0],
            expected,
            msg=f"norm_first={norm_first}: are the sublayers or the norms in the wrong order?",
        )


# gradcheck: tests/nn/test_blocks.py::test_gradcheck (both blocks).


def test_gradients_match_torch():
    layer = torch_layer(True, "gelu", seed=9)
    ours = DecoderBlock.from_torch(layer).eval()
    x1, m1 = rand(2, L, D, seed=9).requires_grad_(), rand(2, S, D, seed=10).requires_grad_()
    x2, m2 = x1.detach().clone().requires_grad_(), m1.detach().clone().requires_grad_()
    (ours(x1, m1, is_causal=True)[0] ** 2).sum().backward()
    (layer(x2, m2, tgt_mask=~causal_mask(L)) ** 2).sum().backward()
    close(x1.grad, x2.grad)
    close(m1.grad, m2.grad)
    close(ours.cross_attn.k_proj.weight.grad, layer.multihead_attn.in_proj_weight.grad[D : 2 * D])
    close(ours.norm3.weight.grad, layer.norm3.weight.grad)


def test_causal_future_targets_and_padded_memory_do_not_matter():
    torch.manual_seed(11)
    blk = DecoderBlock(D, H, D_FF).to(F64).eval()
    x, mem = rand(3, L, D, seed=11), rand(3, S, D, seed=12)
    mem_mask = padding_mask(MEM_VALID)
    y = blk(x, mem, memory_mask=mem_mask, is_causal=True)[0]
    x2 = x.clone()
    x2[:, 3:] = rand(3, 2, D, seed=13)  # change the targets at positions 3 and 4
    mem2 = mem.clone()
    mem2[~MEM_VALID.bool()] = 100.0  # change only the padded memory positions
    y2 = blk(x2, mem2, memory_mask=mem_mask, is_causal=True)[0]
    close(y2[:, :3], y[:, :3])  # positions 0..2 see neither change
    assert (y2[:, 3:] - y[:, 3:]).abs().max() > 1e-3
    # without the causal mask the future does leak in (so the check above can fail)
    leak = (
        blk(x2, mem, memory_mask=mem_mask)[0][:, :3] - blk(x, mem, memory_mask=mem_mask)[0][:, :3]
    )
    assert leak.abs().max() > 1e-3


def test_dropout_train_differs_from_eval():
    torch.manual_seed(12)
    blk = DecoderBlock(D, H, D_FF, dropout=0.3).to(F64)
    x, mem = rand(2, L, D, seed=14), rand(2, S, D, seed=15)
    assert not torch.allclose(blk.train()(x, mem)[0], blk.eval()(x, mem)[0])
    blk0 = DecoderBlock(D, H, D_FF, dropout=0.0).to(F64)
    assert torch.equal(blk0.train()(x, mem)[0], blk0.eval()(x, mem)[0])


# --------------------------------------------------------------------------- errors


# from_torch errors: tests/nn/test_blocks.py (one helper reads both torch layers).


def test_forward_rejects_bad_shapes():
    blk = DecoderBlock(D, H, D_FF)
    x, mem = torch.zeros(2, L, D), torch.zeros(2, S, D)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, len, 8\), received \(5, 8\)"):
        blk(torch.zeros(L, D), mem)
    with pytest.raises(
        ValueError, match=r"expected memory of shape \(B, len, 8\), received \(2, 4, 6\)"
    ):
        blk(x, torch.zeros(2, S, 6))
    with pytest.raises(
        ValueError, match=r"one batch size B, received x \(2, 5, 8\), memory \(3, 4, 8\)"
    ):
        blk(x, torch.zeros(3, S, D))
    with pytest.raises(ValueError, match=r"attn_mask: expected a shape that broadcasts"):
        blk(x, mem, memory_mask=torch.ones(L, L, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"divisible by n_heads, received d_model=8, n_heads=3"):
        DecoderBlock(8, 3, 16)
    with pytest.raises(ValueError, match="activation 'relu' or 'gelu'"):
        DecoderBlock(8, 2, 16, activation="tanh")

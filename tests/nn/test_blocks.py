"""Tests for transformer_lite.nn.blocks.TransformerBlock.

Oracle: ``torch.nn.TransformerEncoderLayer(batch_first=True)`` in float64 and
eval mode, its weights copied with ``TransformerBlock.from_torch``, for
post-norm and pre-norm, ReLU and GELU (given as a string, as ``F.gelu`` and as
``nn.GELU()``), with no mask, a causal mask and a padding mask. torch's
boolean masks mean True = blocked, so ours are inverted before handing them
over. The attention weights the block returns are compared with torch's
``self_attn`` called on the sublayer's input (the block input for post-norm,
``norm1(x)`` for pre-norm). Plus gradcheck and a hand-written formula check
of the two norm orders.
"""

import pytest
import torch

from tests.conftest import (
    ACTIVATIONS,
    F64,
    close,
    gradcheck_module,
    perturbed,
    rand,
    torch_encoder_layer,
)
from transformer_lite import DecoderBlock, TransformerBlock, causal_mask, padding_mask

D, H, D_FF = 8, 2, 16


def torch_layer(norm_first, activation, seed=0, eps=1e-5):
    return torch_encoder_layer(D, H, D_FF, norm_first, activation, seed=seed, eps=eps)


MASKS = ["none", "causal", "padding", "causal+padding"]
VALID = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])


def masks_for(kind):
    """(our attn_mask, torch kwargs) for a batch of 3 sequences of length 5."""
    ours, kwargs = None, {}
    if "causal" in kind:
        ours = causal_mask(5)
        kwargs["src_mask"] = ~causal_mask(5)  # torch: True = blocked
    if "padding" in kind:
        pad = padding_mask(VALID)  # (B, 1, 1, S)
        ours = pad if ours is None else (pad & ours)
        kwargs["src_key_padding_mask"] = ~VALID.bool()
    return ours, kwargs


@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("act_name", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_block_matches_torch_encoder_layer(norm_first, act_name, mask_kind):
    layer = torch_layer(norm_first, ACTIVATIONS[act_name])
    ours = TransformerBlock.from_torch(layer).eval()
    assert ours.norm_first == norm_first
    assert ours.ff.activation == act_name.split("-")[0]
    x = rand(3, 5, D, seed=1) * 2
    our_mask, kwargs = masks_for(mask_kind)

    y, weights, _ = ours(x, attn_mask=our_mask)
    close(y, layer(x, **kwargs))

    # The weights the block returns are those of its self-attention sublayer on that sublayer's input.
    sub_in = layer.norm1(x) if norm_first else x
    torch_attn_mask = kwargs.get("src_mask")
    _, t_weights = layer.self_attn(
        sub_in,
        sub_in,
        sub_in,
        attn_mask=torch_attn_mask,
        key_padding_mask=kwargs.get("src_key_padding_mask"),
        need_weights=True,
        average_attn_weights=False,
    )
    close(weights, t_weights)
    assert weights.shape == (3, H, 5, 5)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_block_is_causal_flag_equals_explicit_causal_mask_and_torch(norm_first):
    layer = torch_layer(norm_first, "gelu", seed=2)
    ours = TransformerBlock.from_torch(layer).eval()
    x = rand(2, 5, D, seed=2)
    y_flag, w_flag, _ = ours(x, is_causal=True)
    y_mask, w_mask, _ = ours(x, attn_mask=causal_mask(5))
    close(y_flag, y_mask)
    close(w_flag, w_mask)
    close(y_flag, layer(x, src_mask=~causal_mask(5), is_causal=True))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_block_matches_torch_fast_path_under_no_grad(norm_first):
    # Under no_grad in eval mode torch may take its fused "fast path": the same function, computed differently.
    layer = torch_layer(norm_first, "relu", seed=3)
    ours = TransformerBlock.from_torch(layer).eval()
    x = rand(3, 5, D, seed=3)
    with torch.no_grad():
        y, _, _ = ours(x, attn_mask=padding_mask(VALID))
        y_t = layer(x, src_key_padding_mask=~VALID.bool())
    real = VALID.bool()
    close(y[real], y_t[real], atol=1e-10)


def test_block_norm_orders_written_out():
    """Post-norm: x = norm1(x + attn(x)); x = norm2(x + ff(x)). Pre-norm: x = x + attn(norm1(x)); x = x + ff(norm2(x))."""
    x = rand(2, 4, D, seed=4)
    for norm_first in (False, True):
        blk = perturbed(lambda: TransformerBlock(D, H, D_FF, norm_first=norm_first), seed=4)

        def attn(t):
            return blk.self_attn(t, t, t)[0]

        if norm_first:
            h = x + attn(blk.norm1(x))
            expected = h + blk.ff(blk.norm2(h))
        else:
            h = blk.norm1(x + attn(x))
            expected = blk.norm2(h + blk.ff(h))
        close(
            blk(x)[0],
            expected,
            msg=f"norm_first={norm_first}: are the sublayer/norm orders swapped?",
        )


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_gradcheck(kind, norm_first):
    """Both blocks, in their inputs and every parameter, with a mask (the decoder's on the memory)."""
    torch.manual_seed(5 if kind == "encoder" else 7)
    if kind == "encoder":
        blk = TransformerBlock(4, 2, 6, activation="gelu", norm_first=norm_first).to(F64).eval()
        mask = torch.tensor([[True, True, False], [True, True, True], [False, True, True]])
        assert gradcheck_module(blk, (rand(2, 3, 4, seed=5),), {"attn_mask": mask})
    else:
        blk = DecoderBlock(4, 2, 6, activation="gelu", norm_first=norm_first).to(F64).eval()
        inputs = (rand(2, 3, 4, seed=7), rand(2, 2, 4, seed=8))
        kwargs = {"memory_mask": padding_mask(torch.tensor([[1, 1], [1, 0]])), "is_causal": True}
        assert gradcheck_module(blk, inputs, kwargs, fast_mode=True)


def test_block_gradients_match_torch():
    layer = torch_layer(True, "gelu", seed=6)
    ours = TransformerBlock.from_torch(layer).eval()
    x1 = rand(2, 5, D, seed=6).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    (ours(x1, is_causal=True)[0] ** 2).sum().backward()
    (layer(x2, src_mask=~causal_mask(5)) ** 2).sum().backward()
    close(x1.grad, x2.grad)
    close(ours.ff.linear1.weight.grad, layer.linear1.weight.grad)
    close(ours.norm1.weight.grad, layer.norm1.weight.grad)


def test_block_dropout_train_differs_from_eval():
    torch.manual_seed(7)
    blk = TransformerBlock(D, H, D_FF, dropout=0.3).to(F64)
    x = rand(2, 5, D, seed=7)
    y_eval, _, _ = blk.eval()(x)
    y_train, _, _ = blk.train()(x)
    assert not torch.allclose(y_train, y_eval)
    blk0 = TransformerBlock(D, H, D_FF, dropout=0.0).to(F64)
    assert torch.equal(blk0.train()(x)[0], blk0.eval()(x)[0])


def test_block_rejects_bad_input_shape():
    blk = TransformerBlock(D, H, D_FF)
    with pytest.raises(
        ValueError, match=r"TransformerBlock: expected x of shape \(B, len, 8\), received \(5, 8\)"
    ):
        blk(torch.zeros(5, D))
    with pytest.raises(ValueError, match=r"TransformerBlock: expected x of shape .* \(2, 5, 6\)"):
        blk(torch.zeros(2, 5, 6))
    with pytest.raises(ValueError, match=r"divisible by n_heads, received d_model=8, n_heads=3"):
        TransformerBlock(8, 3, 16)


def test_block_checks_its_options_itself():
    """activation and norm are refused by the block (named after it), before any submodule is built."""
    with pytest.raises(
        ValueError,
        match="TransformerBlock: expected activation 'relu', 'gelu' or 'swiglu', received 'tanh'",
    ):
        TransformerBlock(D, H, D_FF, activation="tanh")
    with pytest.raises(
        ValueError, match="TransformerBlock: expected norm 'layernorm' or 'rmsnorm', received 'bn'"
    ):
        TransformerBlock(D, H, D_FF, norm="bn")

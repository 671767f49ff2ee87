"""Reading PyTorch's own modules: the bodies of every ``from_torch`` of :mod:`transformer_lite.nn` and of the encoder-decoder stacks and model.

Each of our modules that has a twin in ``torch.nn`` can be built from it with the same weights,
so that a chapter can check ours against torch's, number for number:

=============================  =====================================================
ours                           torch's
=============================  =====================================================
``MultiHeadAttention``         ``nn.MultiheadAttention``
``LayerNorm``, ``RMSNorm``     ``nn.LayerNorm``, ``nn.RMSNorm`` (over one dimension)
``RNN``, ``GRU``               ``nn.RNN``, ``nn.GRU`` (one layer, one direction)
``TransformerBlock``           ``nn.TransformerEncoderLayer``
``DecoderBlock``               ``nn.TransformerDecoderLayer``
``TransformerEncoder``         ``nn.TransformerEncoder`` (:func:`stack_from_torch`)
``TransformerDecoder``         ``nn.TransformerDecoder`` (:func:`stack_from_torch`)
``EncoderDecoderTransformer``  ``nn.Transformer`` (:func:`transformer_from_torch`)
=============================  =====================================================

The classmethods (``MultiHeadAttention.from_torch(m)``, ...) are the documented entry points;
they call the functions here (with their class, so a subclass builds itself). Each builds our module first (its random initialisation draws from
the global random number generator, as the chapters expect), then copies torch's tensors into it.
:func:`expect` is the one type check, with the message ``"X.from_torch: expected nn.Y, received Z"``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_type
from .nn.attention import MultiHeadAttention
from .nn.blocks import DecoderBlock, TransformerBlock
from .nn.normalization import LayerNorm, RMSNorm
from .nn.recurrent import GRU, RNN

__all__ = [
    "expect",
    "mha_from_torch",
    "layer_norm_from_torch",
    "rms_norm_from_torch",
    "rnn_from_torch",
    "gru_from_torch",
    "block_from_torch",
    "decoder_block_from_torch",
]


def expect(owner: type, m, torch_cls: type, detail: str = "", ok: bool = True) -> None:
    """Raise ``ValueError`` unless ``m`` is a ``torch_cls`` (and ``ok``, a further condition that
    ``detail`` describes, holds): ``"Owner.from_torch: expected nn.X<detail>, received Y"``.

    ``Y`` is the type of ``m``, or ``m`` itself (its repr) when the type is right but ``ok`` fails.
    """
    check_type(owner.from_torch, m, torch_cls, detail)
    if not ok:
        raise ValueError(
            f"{owner.__name__}.from_torch: expected nn.{torch_cls.__name__}{detail}, received {m!r}"
        )


def mha_from_torch(m: nn.MultiheadAttention, cls: type = MultiHeadAttention) -> MultiHeadAttention:
    """Build a :class:`MultiHeadAttention` with the weights of a ``torch.nn.MultiheadAttention``.

    Copies the packed input projection ``in_proj_weight`` (rows: query,
    key, value) and ``out_proj``; dtype and device follow ``m``. Our module
    is always batch-first, whatever ``m.batch_first`` says. Two differences in the
    call: ours returns the weights of every head ``(B, H, L, S)``, where torch averages
    them over the heads unless ``average_attn_weights=False`` (the chapters plot single
    heads); and a boolean ``attn_mask`` means ``True`` = may attend here, ``True`` =
    blocked in torch.

    Raises:
        ValueError: for another module, or one with options not supported here.
    """
    expect(cls, m, nn.MultiheadAttention)
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise ValueError(
            f"{cls.__name__}.from_torch: kdim/vdim != embed_dim, add_bias_kv and add_zero_attn "
            "are not supported"
        )
    D = m.embed_dim
    ours = cls(D, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None)
    ours = ours.to(dtype=m.in_proj_weight.dtype, device=m.in_proj_weight.device)
    with torch.no_grad():
        for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
            proj.weight.copy_(m.in_proj_weight[i * D : (i + 1) * D])
            if proj.bias is not None:
                proj.bias.copy_(m.in_proj_bias[i * D : (i + 1) * D])
        ours.out_proj.weight.copy_(m.out_proj.weight)
        if ours.out_proj.bias is not None:
            ours.out_proj.bias.copy_(m.out_proj.bias)
    return ours


def _expect_norm(cls: type, m, torch_cls: type) -> None:
    """Our norms are over one dimension (``d_model,``) only."""
    ok = isinstance(m, torch_cls) and len(m.normalized_shape) == 1
    expect(cls, m, torch_cls, " over one dimension (d_model,)", ok)


def layer_norm_from_torch(m: nn.LayerNorm, cls: type = LayerNorm) -> LayerNorm:
    """Build a :class:`LayerNorm` equal to a ``torch.nn.LayerNorm`` over one dimension.

    A module without affine parameters (``elementwise_affine=False`` or
    ``bias=False``) becomes weight 1 / bias 0.

    Raises:
        ValueError: for another module, or a norm over more than one dimension.
    """
    _expect_norm(cls, m, nn.LayerNorm)
    ours = cls(m.normalized_shape[0], eps=m.eps)
    ref = m.weight if m.weight is not None else m.bias
    if ref is not None:
        ours = ours.to(dtype=ref.dtype, device=ref.device)
    with torch.no_grad():
        if m.weight is not None:
            ours.weight.copy_(m.weight)
        if m.bias is not None:
            ours.bias.copy_(m.bias)
    return ours


def rms_norm_from_torch(m: nn.RMSNorm, cls: type = RMSNorm) -> RMSNorm:
    """Build an :class:`RMSNorm` equal to a ``torch.nn.RMSNorm`` over one dimension.

    ``m.eps=None`` (torch's default) means the machine epsilon of the
    weight's dtype; a module without a weight (``elementwise_affine=False``)
    becomes gain 1.

    Raises:
        ValueError: for another module, or a norm over more than one dimension.
    """
    _expect_norm(cls, m, nn.RMSNorm)
    dtype = m.weight.dtype if m.weight is not None else torch.get_default_dtype()
    eps = m.eps if m.eps is not None else torch.finfo(dtype).eps
    ours = cls(m.normalized_shape[0], eps=eps)
    if m.weight is not None:
        ours = ours.to(dtype=m.weight.dtype, device=m.weight.device)
        with torch.no_grad():
            ours.weight.copy_(m.weight)
    return ours


def _expect_recurrent(cls: type, m, torch_cls: type) -> None:
    """Reject torch modules that our single-layer, one-direction cells cannot reproduce."""
    expect(cls, m, torch_cls)
    if m.num_layers != 1 or m.bidirectional:
        raise ValueError(
            f"{cls.__name__}.from_torch: expected a single-layer, unidirectional module "
            f"(num_layers=1, bidirectional=False), received num_layers={m.num_layers}, "
            f"bidirectional={m.bidirectional}"
        )


def _copy_recurrent(ours: RNN | GRU, m: nn.RNN | nn.GRU) -> RNN | GRU:
    """``ours``, freshly built, moved to ``m``'s dtype and device and given its layer-0 weights."""
    ours = ours.to(dtype=m.weight_ih_l0.dtype, device=m.weight_ih_l0.device)
    with torch.no_grad():
        ours.weight_ih.copy_(m.weight_ih_l0)
        ours.weight_hh.copy_(m.weight_hh_l0)
        if ours.bias_ih is not None:
            ours.bias_ih.copy_(m.bias_ih_l0)
            ours.bias_hh.copy_(m.bias_hh_l0)
    return ours


def rnn_from_torch(m: nn.RNN, cls: type = RNN) -> RNN:
    """The body of :meth:`RNN.from_torch <transformer_lite.nn.recurrent.RNN.from_torch>` (documented there)."""
    _expect_recurrent(cls, m, nn.RNN)
    ours = cls(m.input_size, m.hidden_size, nonlinearity=m.nonlinearity, bias=m.bias)
    return _copy_recurrent(ours, m)


def gru_from_torch(m: nn.GRU, cls: type = GRU) -> GRU:
    """The body of :meth:`GRU.from_torch <transformer_lite.nn.recurrent.GRU.from_torch>` (documented there)."""
    _expect_recurrent(cls, m, nn.GRU)
    return _copy_recurrent(cls(m.input_size, m.hidden_size, bias=m.bias), m)


def block_from_torch(
    layer: nn.TransformerEncoderLayer, cls: type = TransformerBlock
) -> TransformerBlock:
    """Build a :class:`TransformerBlock` computing the same function as an ``nn.TransformerEncoderLayer``.

    Unlike the torch layer, which returns the output tensor only, ours returns
    ``(output, weights, cache)``: the chapters plot what each head attends to.

    Copies the attention, feed-forward and both layer norms, and reads
    ``norm_first``, the activation (ReLU or GELU), dropout and eps. Remember
    that the torch layer's boolean ``src_mask`` means ``True`` = blocked,
    the opposite of ours.

    Raises:
        ValueError: for another layer, or one with another activation or ``bias=False``.
    """
    return _block_from_torch(cls, layer, nn.TransformerEncoderLayer, self_attn="self_attn")


def decoder_block_from_torch(
    layer: nn.TransformerDecoderLayer, cls: type = DecoderBlock
) -> DecoderBlock:
    """Build a :class:`DecoderBlock` computing the same function as an ``nn.TransformerDecoderLayer``.

    Unlike the torch layer, which returns the output tensor only, ours returns
    ``(output, weights, cross_weights)``: the chapters plot what each head attends to.

    Copies both attentions (``self_attn`` and torch's ``multihead_attn``),
    the feed-forward network and the three layer norms, and reads
    ``norm_first``, the activation, dropout and eps; dtype and device
    follow ``layer``. Our block is batch-first whatever ``layer.batch_first``
    says. torch's boolean ``tgt_mask``/``memory_mask`` and key-padding
    masks mean ``True`` = blocked, the opposite of ours.

    Raises:
        ValueError: for another layer, or one with another activation or ``bias=False``.
    """
    return _block_from_torch(
        cls,
        layer,
        nn.TransformerDecoderLayer,
        self_attn="self_attn",
        cross_attn="multihead_attn",
    )


def stack_from_torch(stack: nn.Module, cls: type):
    """Build ``cls`` (``TransformerEncoder`` or ``TransformerDecoder``) computing the same function
    as torch's stack ``cls.torch_class``: each layer with its block's ``from_torch``, and the
    stack's ``norm`` (if any) as our final LayerNorm (see ``cls.from_torch``).

    Raises:
        ValueError: for another module, or as the blocks' and the norm's ``from_torch``.
    """
    check_type(cls.from_torch, stack, cls.torch_class)
    blocks = [cls.block.from_torch(layer) for layer in stack.layers]
    first = blocks[0]
    ours = cls(
        len(blocks),
        first.self_attn.d_model,
        first.self_attn.n_heads,
        first.ff.d_ff,
        dropout=first.dropout1.p,
        activation=first.ff.activation,
        norm_first=first.norm_first,
        eps=first.norm1.eps,
        final_norm=stack.norm is not None,
    )
    ours.layers = nn.ModuleList(blocks)
    if stack.norm is not None:
        ours.norm = LayerNorm.from_torch(stack.norm)
    ref = stack.layers[0].linear1.weight
    return ours.to(dtype=ref.dtype, device=ref.device)


def transformer_from_torch(
    transformer: nn.Transformer,
    src_vocab_size: int,
    tgt_vocab_size: int,
    max_len: int = 512,
    cls: type | None = None,
):
    """Build an ``EncoderDecoderTransformer`` (or ``cls``) whose two stacks are copies of a
    ``torch.nn.Transformer``'s; embeddings and output projection freshly initialised (see
    :meth:`~transformer_lite.models.encoder_decoder.EncoderDecoderTransformer.from_torch`).

    Raises:
        ValueError: for a module other than the above (e.g. a final norm on one stack only).
    """
    # models import nn and this module lazily: a cycle at top level
    from .models.encoder_decoder import (  # noqa: PLC0415
        EncoderDecoderConfig,
        EncoderDecoderTransformer,
        TransformerDecoder,
        TransformerEncoder,
    )

    cls = EncoderDecoderTransformer if cls is None else cls
    check_type(cls.from_torch, transformer, nn.Transformer)
    encoder = TransformerEncoder.from_torch(transformer.encoder)
    decoder = TransformerDecoder.from_torch(transformer.decoder)
    if (encoder.norm is None) != (decoder.norm is None):
        raise ValueError(
            f"{cls.__name__}.from_torch: expected final norms on both stacks or on neither, "
            f"received encoder norm {transformer.encoder.norm!r}, "
            f"decoder norm {transformer.decoder.norm!r}"
        )
    first = encoder.layers[0]
    config = EncoderDecoderConfig(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        d_model=first.self_attn.d_model,
        n_heads=first.self_attn.n_heads,
        n_encoder_layers=len(encoder.layers),
        n_decoder_layers=len(decoder.layers),
        d_ff=first.ff.d_ff,
        dropout=first.dropout1.p,
        max_len=max_len,
        norm_first=first.norm_first,
        activation=first.ff.activation,
        final_norm=encoder.norm is not None,
        eps=first.norm1.eps,
    )
    ref = transformer.encoder.layers[0].linear1.weight
    model = cls(config).to(dtype=ref.dtype, device=ref.device)
    model.encoder, model.decoder = encoder, decoder
    return model


def _torch_activation_name(fn) -> str | None:
    """``"relu"`` or ``"gelu"`` for the activations our feed-forward network computes exactly, else ``None``.

    Accepts what ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer`` store in
    ``.activation``: ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()``. ``nn.GELU(approximate="tanh")``
    is a different function and gives ``None``.
    """
    if fn is F.relu or isinstance(fn, nn.ReLU):
        return "relu"
    if fn is F.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return "gelu"
    return None


def _block_from_torch(cls: type, layer: nn.Module, expected: type, **attentions: str):
    """Our block ``cls`` with the options and weights of the torch layer ``layer``.

    ``attentions`` names each of our attention modules after torch's (``cross_attn="multihead_attn"``);
    the norms (``norm1``, ``norm2``, ...) and the feed-forward network's ``linear1``/``linear2``
    have the same names in both. The block is built in ``layer``'s dtype before the weights
    are copied: copying float64 weights into float32 parameters would round them. The whole
    block is built (random initialisation) before its attentions and norms are replaced: the
    draws it takes from the global generator are part of what the chapters' later cells see.
    """
    expect(cls, layer, expected)
    activation = _torch_activation_name(layer.activation)
    if activation is None:
        raise ValueError(
            f"{cls.__name__}.from_torch: expected a ReLU or exact GELU activation, "
            f"received {layer.activation!r}"
        )
    if layer.linear1.bias is None:
        raise ValueError(
            f"{cls.__name__}.from_torch: layers built with bias=False are not supported"
        )
    w = layer.linear1.weight
    ours = cls(
        d_model=layer.self_attn.embed_dim,
        n_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        activation=activation,
        norm_first=layer.norm_first,
        eps=layer.norm1.eps,
    ).to(dtype=w.dtype, device=w.device)
    for ours_name, torch_name in attentions.items():
        setattr(ours, ours_name, mha_from_torch(getattr(layer, torch_name)))
    for name, module in list(ours.named_children()):
        if isinstance(module, LayerNorm):
            setattr(ours, name, layer_norm_from_torch(getattr(layer, name)))
    ours.ff.linear1.load_state_dict(layer.linear1.state_dict())
    ours.ff.linear2.load_state_dict(layer.linear2.state_dict())
    return ours.to(dtype=w.dtype, device=w.device)

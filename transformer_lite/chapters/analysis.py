"""Small measurements on attention weights, used by the chapters to find and score head patterns.

Sources for the patterns: Clark et al. (2019), "What Does BERT Look At?"
(previous-token heads, heavy attention to [CLS]/[SEP]); Kovaleva et al. (2019);
Xiao et al. (2024) (attention sinks); Kobayashi et al. (2020), "Attention is Not
Only a Weight: Analyzing Transformers with Vector Norms" (weight times the norm of
the transformed value vector), for multi-head and, with shared value heads,
grouped-query attention (Ainslie et al., 2023).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn.attention import MultiHeadAttention
from ..training.data import random_batch

__all__ = [
    "offset_score",
    "previous_token_score",
    "key_score",
    "transformed_values",
    "norm_shares",
    "attention_value_norms",
    "softmax_jacobian",
    "head_outputs_mean",
    "ablate_heads",
    "evaluation_batches",
]


def _check_square(weights: Tensor) -> None:
    if weights.dim() < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"expected self-attention weights of shape (..., L, L), received {tuple(weights.shape)}"
        )


def offset_score(weights: Tensor, offset: int) -> Tensor:
    """Mean weight that each query ``i`` puts on key ``i + offset``, over the queries where that key exists.

    Args:
        weights: self-attention weights ``(..., L, L)`` (rows = queries, columns = keys).
        offset: key position relative to the query (-1 = previous token, 0 = itself, +1 = next).

    Returns:
        Tensor of shape ``(...)``: the mean of ``weights[..., i, i + offset]``; a value
        near 1 means the head almost always attends to that relative position.

    Raises:
        ValueError: if ``weights`` is not square in its last two dimensions or ``|offset| >= L``.
    """
    _check_square(weights)
    L = weights.shape[-1]
    if abs(offset) >= L:
        raise ValueError(f"offset_score: expected |offset| < L = {L}, received offset={offset}")
    return torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1).mean(dim=-1)


def previous_token_score(weights: Tensor) -> Tensor:
    """:func:`offset_score` with ``offset=-1``: how much a head looks at the token just before each query."""
    return offset_score(weights, -1)


def key_score(weights: Tensor, key_index: int) -> Tensor:
    """Mean weight that all queries put on one key (e.g. ``0`` for ``[CLS]``, ``-1`` for ``[SEP]``).

    Args:
        weights: attention weights ``(..., L, S)``.
        key_index: the key's position (negative counts from the end).

    Returns:
        Tensor of shape ``(...)``: ``weights[..., :, key_index].mean(-1)``.

    Raises:
        ValueError: if ``key_index`` is outside ``[-S, S)``.
    """
    if weights.dim() < 2:
        raise ValueError(
            f"key_score: expected weights of shape (..., L, S), received {tuple(weights.shape)}"
        )
    S = weights.shape[-1]
    if not -S <= key_index < S:
        raise ValueError(f"key_score: expected key_index in [{-S}, {S}), received {key_index}")
    return weights[..., :, key_index].mean(dim=-1)


def transformed_values(attention: MultiHeadAttention, value: Tensor) -> Tensor:
    """What each key position hands to each head's part of the output: ``f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h``.

    A :class:`~transformer_lite.nn.attention.MultiHeadAttention` computes, for query ``i``,
    ``y_i = sum_h sum_j a^h_ij f_h(x_j) + b^O``, where ``W^V_h`` (``D x d_head``) and
    ``b^V_h`` are head ``h``'s columns of the value projection and ``W^O_h``
    (``d_head x D``) its rows of the output projection (Kobayashi et al., 2020, Eq. 4,
    written per head). The length ``||f_h(x_j)||`` is the second factor, beside the
    weight ``a^h_ij``, of the size of key ``j``'s term.

    With grouped-query attention (``n_kv_heads < n_heads``) it computes the same sum,
    except that query head ``h`` reads the values of key/value head ``h // G``
    (``G = n_heads // n_kv_heads``; Ainslie et al., 2023, Sec. 2.2): ``W^V_h`` is then that
    shared head's columns of ``v_proj``, while ``W^O_h`` is still head ``h``'s own rows of
    ``out_proj``. Rotary positions turn queries and keys only, so they do not enter ``f_h``.

    Args:
        attention: the module whose value and output projections are used.
        value: ``(B, S, d_model)``, the tensor the module receives as ``value``
            (in self-attention, its query ``x``; no cache).

    Returns:
        ``(B, H, S, d_model)``: ``f_h(x_j)`` for every (query) head ``h`` and key position ``j``,
        in the dtype of the module.

    Raises:
        ValueError: if ``value`` is not of shape ``(B, S, d_model)``.
    """
    if value.dim() != 3 or value.shape[-1] != attention.d_model:
        raise ValueError(
            f"transformed_values: expected value of shape (B, S, {attention.d_model}), "
            f"received {tuple(value.shape)}"
        )
    B, S, D = value.shape
    H, d_head = attention.n_heads, attention.d_head
    H_kv = attention.n_kv_heads
    # (B, S, H_kv*d_head) -> (B, H_kv, S, d_head), bias included if any
    v = attention.v_proj(value).view(B, S, H_kv, d_head).transpose(1, 2)
    if H_kv != H:
        # (B, H, S, d_head): query head h reads key/value head h // G
        v = v.repeat_interleave(H // H_kv, dim=1)
    # out_proj computes merged @ W^T + b^O; head h owns columns h*d_head ... (h+1)*d_head - 1 of W,
    # i.e. rows of W^T: W^O_h = W^T[h*d_head:(h+1)*d_head] = W[:, h*d_head:(h+1)*d_head]^T.
    w_o = attention.out_proj.weight.T.reshape(H, d_head, D)  # (H, d_head, D)
    return torch.einsum("bhsk,hkd->bhsd", v, w_o)  # (B, H, S, D)


def norm_shares(weights: Tensor, norms: Tensor) -> Tensor:
    """Each key's share of a query's weighted sum of vector lengths: ``a_ij ||f(x_j)|| / sum_k a_ik ||f(x_k)||``.

    The weights ``a_ij`` say how much of each key's vector a query takes; the norm
    shares say how much each key's term weighs in the sum once the vectors' lengths
    are counted (Kobayashi et al., 2020, compare ``a_ij`` with ``||a_ij f(x_j)||``).
    Like the weights, the shares of a row are non-negative and sum to 1, so the two
    can be compared on one scale. Note that ``sum_k ||a_ik f(x_k)||`` is an upper bound on
    the length of the weighted sum itself (triangle inequality), not that length.

    Args:
        weights: attention weights ``(..., L, S)``, non-negative.
        norms: vector lengths ``(..., S)``, non-negative, broadcastable against the keys of
            ``weights`` (e.g. ``transformed_values(...).norm(dim=-1)``, shape ``(B, H, S)``).

    Returns:
        ``(..., L, S)``; a row whose weighted sum of lengths is 0 (e.g. a fully masked query)
        gets all zeros.

    Raises:
        ValueError: if ``norms`` does not end in ``S`` or does not broadcast against ``weights``.
    """
    if weights.dim() < 2 or norms.dim() < 1 or norms.shape[-1] != weights.shape[-1]:
        raise ValueError(
            f"norm_shares: expected weights (..., L, S) and norms (..., S) with one S, received "
            f"{tuple(weights.shape)} and {tuple(norms.shape)}"
        )
    try:
        torch.broadcast_shapes(weights.shape, norms.unsqueeze(-2).shape)
    except RuntimeError:
        raise ValueError(
            f"norm_shares: norms {tuple(norms.shape)} do not broadcast against weights "
            f"{tuple(weights.shape)}"
        ) from None
    terms = weights * norms.unsqueeze(-2)  # (..., L, S): ||a_ij f(x_j)||
    total = terms.sum(dim=-1, keepdim=True)  # (..., L, 1)
    return torch.where(total > 0, terms / torch.where(total > 0, total, 1), torch.zeros_like(terms))


def attention_value_norms(model: nn.Module, *args, **kwargs) -> tuple[list[Tensor], list[Tensor]]:
    """Run ``model(*args, **kwargs)`` once and read, for every attention module in it, its weights and value norms.

    Forward hooks on each :class:`~transformer_lite.nn.attention.MultiHeadAttention` inside
    ``model`` record the weights it returns and ``||f_h(x_j)||`` (see :func:`transformed_values`)
    of the ``value`` tensor it received (in self-attention, its query), so the lengths
    belong to exactly the vectors that the weights multiply (after the normalization in a
    pre-norm block). The hooks are removed afterwards, even if the model raises.

    Args:
        model: any module containing such attention modules (e.g. a
            :class:`~transformer_lite.models.bert.BertEncoder` or a
            :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer`);
            ``*args, **kwargs`` are passed to it.

    Returns:
        ``(weights, norms)``: two lists in the order the modules were called, of
        ``(B, H, L, S)`` weights and ``(B, H, S)`` lengths, detached.

    Raises:
        ValueError: if ``model`` contains no attention module, or one is called with a cache.
    """
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not modules:
        raise ValueError(
            f"attention_value_norms: {type(model).__name__} contains no MultiHeadAttention"
        )
    weights, norms = [], []

    def record(module, inputs, kw, output):
        # forward(query, key=None, value=None, *, ..., cache=None); key None: self-attention
        if kw.get("cache") is not None:
            raise ValueError(
                "attention_value_norms: expected a MultiHeadAttention call without a cache, "
                "received cached keys and values"
            )
        key = inputs[1] if len(inputs) > 1 else kw.get("key")
        if key is None:
            value = inputs[0] if inputs else kw["query"]
        else:
            value = inputs[2] if len(inputs) > 2 else kw["value"]
        weights.append(output[1].detach())
        norms.append(transformed_values(module, value).norm(dim=-1).detach())  # (B, H, S)

    handles = [m.register_forward_hook(record, with_kwargs=True) for m in modules]
    try:
        model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return weights, norms


def softmax_jacobian(weights: Tensor) -> Tensor:
    """The Jacobian of the softmax at its output: ``J = diag(a) - a a^T``, ``J_ij = da_i/dz_j``.

    For ``a = softmax(z)`` over the last dimension, ``da_i/dz_j = a_i (1[i = j] - a_j)``:
    ``a_j (1 - a_j)`` on the diagonal, ``-a_i a_j`` off it. ``J`` is symmetric and positive
    semi-definite, each row sums to 0 (adding a constant to every score changes nothing),
    and its largest eigenvalue, its spectral norm, lies between 0 (one weight equal to 1,
    a saturated softmax that passes no gradient) and 1/2 (two weights of 1/2). Vaswani et
    al. (2017), Sec. 3.2.1, suspect that this gradient becomes extremely small
    for large dot products, their reason for scaling them by ``1/sqrt(d_k)``.

    Args:
        weights: softmax outputs ``(..., S)``, each row non-negative and summing to 1.

    Returns:
        ``(..., S, S)``: one Jacobian per row, in the dtype of ``weights``.

    Raises:
        ValueError: if ``weights`` has no dimension.
    """
    if weights.dim() < 1:
        raise ValueError(
            f"softmax_jacobian: expected weights of shape (..., S), received {tuple(weights.shape)}"
        )
    # (..., S, S): diag(a) - outer(a, a)
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def _head_slices(model: nn.Module) -> tuple[list[nn.Module], int]:
    # the attention module of each block, and the width d_head of one head
    attentions = [block.self_attn for block in model.blocks]
    return attentions, attentions[0].d_head


@torch.no_grad()
def head_outputs_mean(model: nn.Module, ids: Tensor, skip: int = 1) -> Tensor:
    """Each head's mean output on a text, before the output projection: ``(n_layers, H, d_head)``.

    ``out_proj`` of every block receives the heads' outputs side by side, ``(B, L, H * d_head)``;
    this averages them over the batch and the positions ``skip ..`` of ``ids`` ``(B, L)``
    (position 0, which sees only itself, is left out by default). The result is the
    replacement that mean-ablation (:func:`ablate_heads`) puts in place of a head.
    """
    attentions, d_head = _head_slices(model)
    means: list[Tensor] = []

    def record(module, args):
        (merged,) = args  # (B, L, H * d_head)
        B, L, _ = merged.shape
        # (B, L, H, d_head) -> mean over batch and positions: (H, d_head)
        means.append(merged[:, skip:].reshape(B, L - skip, -1, d_head).mean(dim=(0, 1)))

    hooks = [a.out_proj.register_forward_pre_hook(record) for a in attentions]
    try:
        model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(means)  # (n_layers, H, d_head)


class ablate_heads:
    """Context manager: within it, the heads ``[(layer, head), ...]`` of ``model`` are removed.

    A forward pre-hook on each layer's ``out_proj`` replaces that head's slice of the
    projection's input, ``[..., head * d_head : (head + 1) * d_head]``: by zeros
    (``means=None``, zero-ablation), or by ``means[layer, head]``, a ``(d_head,)`` vector at every
    position (mean-ablation, with ``means`` from :func:`head_outputs_mean`). Zeroing
    takes the head's term out of the layer's output; replacing it by its mean keeps
    the average contribution and removes only what depends on the input, so the
    residual stream stays nearer the values the later layers were trained on.
    """

    def __init__(self, model: nn.Module, heads, means: Tensor | None = None):
        self.model, self.heads, self.means = model, list(heads), means
        self._hooks: list = []

    def _hook(self, layer: int, heads: list[int], d_head: int):
        def hook(module, args):
            (merged,) = args  # (B, L, H * d_head)
            merged = merged.clone()
            for head in heads:
                cols = slice(head * d_head, (head + 1) * d_head)
                if self.means is None:
                    merged[..., cols] = 0
                else:
                    merged[..., cols] = self.means[layer, head].to(merged.dtype)
            return (merged,)  # what out_proj receives instead

        return hook

    def __enter__(self):
        attentions, d_head = _head_slices(self.model)
        by_layer: dict[int, list[int]] = {}
        for layer, head in self.heads:
            by_layer.setdefault(layer, []).append(head)
        self._hooks = [
            attentions[layer].out_proj.register_forward_pre_hook(self._hook(layer, heads, d_head))
            for layer, heads in by_layer.items()
        ]
        return self.model

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()  # the model is whole again
        self._hooks = []
        return False


def evaluation_batches(ids: Tensor, cfg) -> list[tuple[Tensor, Tensor]]:
    """The windows that ``training.train.evaluate(model, ids, cfg)`` scores, as ``(x, y)`` pairs.

    ``cfg.eval_batches`` batches of ``(cfg.batch_size, cfg.context)`` inputs and targets, drawn by
    ``random_batch`` from a generator seeded with ``cfg.seed + 1``, as ``evaluate`` draws them
    (the training batches use ``cfg.seed``): the mean of ``lm_loss`` over them is ``evaluate``'s loss.
    """
    g = torch.Generator().manual_seed(cfg.seed + 1)
    return [random_batch(ids, cfg.batch_size, cfg.context, g) for _ in range(cfg.eval_batches)]

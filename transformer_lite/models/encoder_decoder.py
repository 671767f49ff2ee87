"""Encoder and decoder stacks, and the encoder-decoder transformer of Vaswani et al. (2017).

Source: Vaswani et al. (2017), "Attention Is All You Need", Sec. 3.1 (N
identical layers in each stack), Sec. 3.4 (embeddings scaled by sqrt(d_model),
a linear map and softmax to next-token probabilities), Sec. 3.5 (sinusoidal
positions). The stacks reproduce ``torch.nn.TransformerEncoder`` /
``nn.TransformerDecoder`` and the model's stacks reproduce ``nn.Transformer``
(see the ``from_torch`` methods).

A note on final layer norms. In a pre-norm stack the residual stream is never
normalized on its way out of the last layer, so the stack ends with one more
LayerNorm (Xiong et al., 2020; GPT-2). A post-norm stack already ends with a
LayerNorm inside its last layer, and the paper adds nothing after it. PyTorch's
``nn.Transformer`` nevertheless gives *both* stacks a final LayerNorm in every
configuration, so its default post-norm model normalizes the last layer's
output twice in a row. ``final_norm=None`` (the default here) follows the
paper and the pre-norm practice; ``final_norm=True`` reproduces torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from ..checks import (
    check_dropout,
    check_heads,
    check_marker,
    check_positive_int,
    check_type,
    embed,
    eval_mode,
    owner_name,
)
from ..config import FFActivation, check_options, check_sizes
from ..nn.blocks import DecoderBlock, TransformerBlock
from ..nn.masks import padding_mask
from ..nn.normalization import LayerNorm
from ..nn.positional import SinusoidalPositionalEncoding
from ..outputs import DecoderOutput, EncoderOutput, Generation, ModelOutput
from .generation import decode

__all__ = [
    "TransformerEncoder",
    "TransformerDecoder",
    "EncoderDecoderConfig",
    "EncoderDecoderTransformer",
    "greedy_decode",
]


class _Stack(nn.Module):
    """``n_layers`` equal blocks and a final LayerNorm: what the encoder and the decoder stacks share."""

    block: type[TransformerBlock] | type[DecoderBlock]  # the block class, set by each stack
    torch_class: type[nn.Module]  # the torch stack that from_torch copies

    def __init__(
        self,
        n_layers: int,  # N, the number of blocks
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.0,  # dropout, activation, norm_first, eps: passed to every block
        activation: FFActivation = "relu",
        norm_first: bool = False,
        eps: float = 1e-5,
        final_norm: bool | None = None,  # a LayerNorm after the last block (None: if pre-norm)
    ) -> None:
        super().__init__()
        check_positive_int(self, "n_layers", n_layers)
        self.layers = nn.ModuleList(
            self.block(
                d_model,
                n_heads,
                d_ff,
                dropout=dropout,
                activation=activation,
                norm_first=norm_first,
                eps=eps,
            )
            for _ in range(n_layers)
        )
        self.norm_first = norm_first
        use_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, eps=eps) if use_norm else None

    @classmethod
    def from_torch(cls, stack: nn.Module) -> _Stack:
        """Build this stack computing the same function as torch's (``cls.torch_class``).

        ``TransformerEncoder`` copies an ``nn.TransformerEncoder``, ``TransformerDecoder`` an
        ``nn.TransformerDecoder``: each layer with its block's ``from_torch``, and the stack's
        ``norm`` (if any) as our final LayerNorm. In eval mode under ``no_grad`` with a key
        padding mask, ``nn.TransformerEncoder`` may take a nested-tensor "fast path" that
        returns zeros (before the final norm) at padded positions, where we return the value
        computed there; real positions agree. Unlike torch's stacks, which return the output
        tensor only, ours return the attention weights of every layer too (the chapters plot
        them), and their boolean masks mean ``True`` = may attend, the opposite of torch's.

        Raises:
            ValueError: for another module, or as the blocks' and the norm's ``from_torch``.

        The body is :func:`transformer_lite.interop.stack_from_torch`.
        """
        from ..interop import stack_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return stack_from_torch(stack, cls)


class TransformerEncoder(_Stack):
    """A stack of ``n_layers`` :class:`~transformer_lite.nn.blocks.TransformerBlock`, plus a final LayerNorm if pre-norm.

    Source: Vaswani et al. (2017), Sec. 3.1 ("a stack of N = 6 identical layers"); the final
    LayerNorm of a pre-norm stack: Xiong et al. (2020).

    Args:
        n_layers: number of blocks N.
        d_model, n_heads, d_ff: as :class:`~transformer_lite.nn.blocks.TransformerBlock`.
        dropout, activation, norm_first, eps: as :class:`~transformer_lite.nn.blocks.TransformerBlock`,
            the same for every block.
        final_norm: whether a LayerNorm follows the last block. ``None``
            (default): only for a pre-norm stack (``norm_first=True``). ``True``
            always, as torch's ``nn.Transformer``; ``False`` never.

    Attributes:
        layers (nn.ModuleList of TransformerBlock), norm (LayerNorm or None).

    Raises:
        ValueError: if ``n_layers`` is not a positive int, or as ``TransformerBlock``.
    """

    block = TransformerBlock
    torch_class = nn.TransformerEncoder

    def forward(
        self, x: Tensor, *, attn_mask: Tensor | None = None, is_causal: bool = False
    ) -> EncoderOutput:
        """Run ``x`` of shape ``(B, L, d_model)`` through every block (same mask for all).

        Returns:
            :class:`~transformer_lite.outputs.EncoderOutput`: ``output`` ``(B, L, d_model)`` and
            ``attentions``, ``n_layers`` self-attention weight tensors ``(B, H, L, L)``, first
            layer first.

        Raises:
            ValueError: as :meth:`TransformerBlock.forward`.
        """
        weights = []
        for layer in self.layers:
            x, w, _ = layer(x, attn_mask=attn_mask, is_causal=is_causal)  # (B, L, D), (B, H, L, L)
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return EncoderOutput(x, tuple(weights))


class TransformerDecoder(_Stack):
    """A stack of ``n_layers`` :class:`~transformer_lite.nn.blocks.DecoderBlock`, plus a final LayerNorm if pre-norm.

    Args, attributes and errors: as :class:`TransformerEncoder`, with ``DecoderBlock`` (whose
    options are ``dropout``, ``activation``, ``norm_first`` and ``eps``) for ``TransformerBlock``.
    """

    block = DecoderBlock
    torch_class = nn.TransformerDecoder

    def forward(
        self,
        x: Tensor,  # (B, L, D), the target states
        memory: Tensor,  # (B, S, D), the encoder's output
        *,
        attn_mask: Tensor | None = None,  # every block's self-attention mask
        memory_mask: Tensor | None = None,  # every block's cross-attention mask
        is_causal: bool = False,
    ) -> DecoderOutput:
        """Run target states ``x`` ``(B, L, d_model)`` through every block, all attending to ``memory`` ``(B, S, D)``.

        Args: as :meth:`DecoderBlock.forward` (the same masks for every block).

        Returns:
            :class:`~transformer_lite.outputs.DecoderOutput`: ``output`` ``(B, L, d_model)``,
            ``attentions`` and ``cross_attentions``, two tuples of ``n_layers`` tensors,
            ``(B, H, L, L)`` and ``(B, H, L, S)``.

        Raises:
            ValueError: as :meth:`DecoderBlock.forward`.
        """
        self_weights, cross_weights = [], []
        for layer in self.layers:
            x, sw, cw = layer(
                x, memory, attn_mask=attn_mask, memory_mask=memory_mask, is_causal=is_causal
            )
            self_weights.append(sw)
            cross_weights.append(cw)
        if self.norm is not None:
            x = self.norm(x)
        return DecoderOutput(x, tuple(self_weights), tuple(cross_weights))


@dataclass(frozen=True)
class EncoderDecoderConfig:
    """Hyperparameters of :class:`EncoderDecoderTransformer` (defaults: the base model of Vaswani et al., Table 3).

    Raises:
        ValueError: (on construction) for fields outside the sizes and options below.
    """

    src_vocab_size: int  # number of source token ids (0 .. src_vocab_size - 1)
    tgt_vocab_size: int  # number of target token ids; also the width of the output logits
    d_model: int = 512  # model width D: embeddings, attention and residual stream
    n_heads: int = 8  # attention heads H per attention sublayer; must divide d_model
    n_encoder_layers: int = 6  # encoder blocks N_enc
    n_decoder_layers: int = 6  # decoder blocks N_dec
    d_ff: int = 2048  # hidden width of each position-wise feed-forward network
    dropout: float = 0.1  # on embeddings + positions, attention weights, feed-forward hidden units, sublayer outputs
    max_len: int = 512  # longest source or target sequence accepted (positions 0 .. max_len - 1)
    norm_first: bool = False  # False: post-norm, as in the paper; True: pre-norm
    activation: FFActivation = "relu"  # feed-forward nonlinearity: "relu" (paper) or "gelu" (exact)
    # LayerNorm after each stack: None = if pre-norm; True = always (as nn.Transformer)
    final_norm: bool | None = None
    eps: float = 1e-5  # LayerNorm epsilon (nn.LayerNorm's default)

    def __post_init__(self) -> None:
        check_sizes(self)
        check_heads(self, self.d_model, self.n_heads)
        check_dropout(self, self.dropout)
        check_options(self)


class EncoderDecoderTransformer(nn.Module):
    """The encoder-decoder transformer: embeddings, sinusoidal positions, two stacks, output projection.

    ``src_ids`` are embedded, scaled by ``sqrt(d_model)`` (Vaswani et al.,
    Sec. 3.4), summed with the sinusoidal encoding (Sec. 3.5) and dropout,
    and encoded into ``memory``; ``tgt_ids`` (the target shifted right: it
    starts with a beginning-of-sequence token) are embedded the same way and
    decoded with a causal self-attention and cross-attention to ``memory``; a
    linear map gives logits over the target vocabulary. Unlike the paper, the
    source embedding, target embedding and output projection are three
    separate matrices (the paper shares one matrix among them).

    Initialisation: every matrix of the stacks and of the output projection is
    Xavier-uniform, as in ``nn.Transformer``; embeddings are N(0, 1/d_model),
    so that after the ``sqrt(d_model)`` scaling their entries have unit
    variance, the same order as the sinusoid's.

    Padding masks follow :func:`~transformer_lite.nn.masks.padding_mask`:
    ``src_padding``/``tgt_padding`` are ``(B, len)`` bool (or 0/1) tensors with
    ``True`` = a real token, ``False`` = padding (the ``attention_mask`` of
    Hugging Face tokenizers; the opposite of torch's ``*_key_padding_mask``).

    Args:
        config: an :class:`EncoderDecoderConfig` (anything else raises ``ValueError``).

    Attributes:
        config, src_embed, tgt_embed (nn.Embedding), pos (SinusoidalPositionalEncoding),
        encoder (TransformerEncoder), decoder (TransformerDecoder), out_proj (nn.Linear(d_model, tgt_vocab_size)).
    """

    def __init__(self, config: EncoderDecoderConfig) -> None:
        super().__init__()
        check_type(self, config, EncoderDecoderConfig)
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, dropout=c.dropout)
        # the two stacks differ in their block and depth only, and take the config's fields of
        # these names as their options (the encoder first: the order of the weights)
        stack = {
            name: getattr(c, name)
            for name in "d_model n_heads d_ff dropout activation norm_first eps final_norm".split()
        }
        self.encoder = TransformerEncoder(c.n_encoder_layers, **stack)
        self.decoder = TransformerDecoder(c.n_decoder_layers, **stack)
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab_size)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for module in (self.encoder, self.decoder, self.out_proj):
            for p in module.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=self.config.d_model**-0.5)

    def _padding(self, name: str, valid: Tensor | None, ids: Tensor) -> Tensor | None:
        if valid is None:
            return None
        check_marker(self, name, valid, ids.shape)
        return padding_mask(valid != 0)  # (B, 1, 1, len)

    def _embed(self, name: str, ids: Tensor, table: nn.Embedding) -> Tensor:
        # (B, len, D), Vaswani et al. Sec. 3.4; the lookup refuses ids outside the vocabulary
        x = embed(self, name, table, ids) * math.sqrt(self.config.d_model)
        return self.pos(x)  # + PE, then dropout

    def encode(self, src_ids: Tensor, src_padding: Tensor | None = None) -> EncoderOutput:
        """Encode the source.

        Args:
            src_ids: ``(B, S)`` integer token ids.
            src_padding: optional ``(B, S)`` bool/0-1, ``True`` = real token.

        Returns:
            :class:`~transformer_lite.outputs.EncoderOutput`: ``output`` (the memory)
            ``(B, S, d_model)`` and ``attentions``, the per-layer encoder self-attention
            weights ``(B, H, S, S)``.

        Raises:
            ValueError: for ids or a padding marker other than the above, or ``S > max_len``.
        """
        x = self._embed("src_ids", src_ids, self.src_embed)  # (B, S, D)
        return self.encoder(x, attn_mask=self._padding("src_padding", src_padding, src_ids))

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_padding: Tensor | None = None,  # the source's padding: hides memory positions
        tgt_padding: Tensor | None = None,
    ) -> DecoderOutput:
        """Decode the target prefix ``tgt_ids`` against ``memory`` (causal self-attention).

        Args:
            tgt_ids: ``(B, L)`` integer ids of the target, shifted right (BOS first).
            memory: ``(B, S, d_model)`` from :meth:`encode`.
            src_padding: optional ``(B, S)``, ``True`` = real source token (hides
                padded memory positions from the cross-attention).
            tgt_padding: optional ``(B, L)``, ``True`` = real target token.

        Returns:
            :class:`~transformer_lite.outputs.DecoderOutput`: ``output`` the logits
            ``(B, L, tgt_vocab_size)`` (row ``t`` scores the token at position ``t + 1``),
            ``attentions`` the per-layer decoder self-attention weights ``(B, H, L, L)`` and
            ``cross_attentions`` the cross-attention weights ``(B, H, L, S)``.

        Raises:
            ValueError: for ids, markers or a ``memory`` other than the above, or ``L > max_len``.
        """
        x = self._embed("tgt_ids", tgt_ids, self.tgt_embed)  # (B, L, D)
        if src_padding is not None and (
            not isinstance(memory, Tensor)
            or memory.dim() != 3
            or tuple(src_padding.shape) != tuple(memory.shape[:2])
            or src_padding.is_floating_point()
        ):
            raise ValueError(
                f"{owner_name(self.decode)}: expected src_padding of shape (B, S) matching memory "
                f"(B, S, D) = {tuple(getattr(memory, 'shape', ()))}, received {tuple(src_padding.shape)}"
            )
        # (B, 1, 1, S): nonzero = a real token
        memory_mask = padding_mask(src_padding != 0) if src_padding is not None else None
        tgt_mask = self._padding("tgt_padding", tgt_padding, tgt_ids)
        h, self_weights, cross_weights = self.decoder(
            x,
            memory,
            attn_mask=tgt_mask,
            memory_mask=memory_mask,
            is_causal=True,
        )
        return DecoderOutput(self.out_proj(h), self_weights, cross_weights)  # (B, L, V_tgt)

    def forward(
        self,
        src_ids: Tensor,
        tgt_ids: Tensor,
        src_padding: Tensor | None = None,
        tgt_padding: Tensor | None = None,
    ) -> ModelOutput:
        """Logits for every target position (teacher forcing).

        Args:
            src_ids: ``(B, S)`` source token ids.
            tgt_ids: ``(B, L)`` target token ids shifted right (BOS first).
            src_padding: optional ``(B, S)``, ``True`` = real token.
            tgt_padding: optional ``(B, L)``, ``True`` = real token.

        Returns:
            :class:`~transformer_lite.outputs.ModelOutput`: ``logits`` ``(B, L, tgt_vocab_size)``
            (position ``t`` depends on ``tgt_ids[:, :t+1]`` only), ``attentions`` the decoder's
            self-attention weights, one ``(B, H, L, L)`` per layer, and ``cache`` ``None``.

        Raises:
            ValueError: as :meth:`encode` and :meth:`decode`, or if the batch sizes differ.
        """
        if (
            isinstance(src_ids, Tensor)
            and isinstance(tgt_ids, Tensor)
            and src_ids.dim() == tgt_ids.dim() == 2
            and src_ids.shape[0] != tgt_ids.shape[0]
        ):
            raise ValueError(
                f"{owner_name(self)}: expected src_ids and tgt_ids with one batch size, received "
                f"{tuple(src_ids.shape)} and {tuple(tgt_ids.shape)}"
            )
        memory = self.encode(src_ids, src_padding).output  # (B, S, D)
        decoded = self.decode(tgt_ids, memory, src_padding, tgt_padding)
        return ModelOutput(decoded.output, decoded.attentions, None)  # logits (B, L, V_tgt)

    @classmethod
    def from_torch(
        cls,
        transformer: nn.Transformer,
        src_vocab_size: int,
        tgt_vocab_size: int,
        max_len: int = 512,
    ) -> EncoderDecoderTransformer:
        """Build a model whose two stacks are copies of a ``torch.nn.Transformer``'s.

        ``nn.Transformer`` holds only the stacks (it takes embeddings in and
        gives hidden states out), so the embeddings and output projection here
        are freshly initialised; what is copied is the encoder and decoder
        layers and their final norms. torch always ends both stacks with a
        LayerNorm, also when post-norm, so the config gets ``final_norm=True``.
        Then ``model.encoder`` / ``model.decoder`` compute what
        ``transformer.encoder`` / ``transformer.decoder`` compute, and
        ``model(src_ids, tgt_ids, ...)`` equals ``model.out_proj`` applied to
        ``transformer(embedded source, embedded target, ...)`` with the
        equivalent masks.

        Raises:
            ValueError: for a module other than the above (e.g. a final norm on one stack only).

        The body is :func:`transformer_lite.interop.transformer_from_torch`.
        """
        from ..interop import transformer_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return transformer_from_torch(transformer, src_vocab_size, tgt_vocab_size, max_len, cls)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in asdict(self.config).items())


def greedy_decode(
    model: EncoderDecoderTransformer,
    src_ids: Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    src_padding: Tensor | None = None,
) -> Generation:
    """Translate ``src_ids`` by picking the most probable next token, one step at a time.

    Source: the standard greedy search (Vaswani et al. use beam search, Sec. 6.1;
    greedy is beam search with a beam of one). The source is encoded once;
    at each step the whole target prefix is decoded again (no key/value cache)
    and the argmax of the last position's logits is appended. A sequence that
    has produced ``eos_id`` is padded with ``eos_id`` from then on; decoding
    stops when every sequence has produced it or after ``max_len`` new tokens (the loop is
    :func:`~transformer_lite.models.generation.decode` with ``temperature=0``).
    The model runs in eval mode (no dropout) without gradients; its previous
    training/eval mode is restored afterwards.

    Args:
        model: an :class:`EncoderDecoderTransformer`.
        src_ids: ``(B, S)`` source token ids.
        max_len: largest number of tokens to generate after BOS (``max_len <= model.config.max_len``:
            the decoder reads BOS and all but the last generated token, ``max_len`` positions).
        bos_id: token that starts every target.
        eos_id: token that ends a target.
        src_padding: optional ``(B, S)``, ``True`` = real source token.

    Returns:
        :class:`~transformer_lite.outputs.Generation`: ``tokens`` int64 ``(B, 1 + T)``,
        ``T <= max_len`` (BOS, then the generated tokens), and the ``logits`` ``(B, T, V_tgt)``
        each token was chosen from.

    Raises:
        ValueError: for arguments other than the above.
    """
    check_type(greedy_decode, model, EncoderDecoderTransformer)
    check_positive_int(greedy_decode, "max_len", max_len)
    if max_len > model.config.max_len:
        raise ValueError(
            f"{owner_name(greedy_decode)}: max_len={max_len} new tokens need {max_len} positions (BOS and all "
            f"but the last token are decoded), but the model "
            f"accepts max_len={model.config.max_len}"
        )
    for name, tok in (("bos_id", bos_id), ("eos_id", eos_id)):
        if (
            isinstance(tok, bool)
            or not isinstance(tok, int)
            or not 0 <= tok < model.config.tgt_vocab_size
        ):
            raise ValueError(
                f"{owner_name(greedy_decode)}: expected {name} in 0..{model.config.tgt_vocab_size - 1}, "
                f"received {tok!r}"
            )
    with eval_mode(model), torch.no_grad():
        memory = model.encode(src_ids, src_padding).output  # (B, S, D)
        prefix = {"tokens": None}  # the target decoded so far, BOS first

        def step(feed: Tensor) -> Tensor:
            """Append ``feed`` to the prefix, decode the whole prefix again; last logits ``(B, V)``."""
            done = prefix["tokens"]
            out = feed if done is None else torch.cat([done, feed], dim=1)  # (B, t)
            prefix["tokens"] = out
            return model.decode(out, memory, src_padding).output[:, -1]  # (B, V)

        # (B, 1): every target starts with BOS
        bos = torch.full((src_ids.shape[0], 1), bos_id, dtype=torch.long, device=src_ids.device)
        return decode(step, bos, max_len, temperature=0.0, eos_id=eos_id)

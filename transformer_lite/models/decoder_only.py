"""A decoder-only transformer language model (GPT-style) with a key/value cache.

Sources: Radford et al. (2018, 2019), GPT and GPT-2 (a stack of causal
self-attention blocks over token + position embeddings, predicting the next
token; pre-norm with a final LayerNorm in GPT-2, Sec. 2.3); Vaswani et al.
(2017), Sec. 3.4 (sharing the embedding matrix with the output layer, after
Press & Wolf, 2017); Touvron et al. (2023), "LLaMA", Sec. 2.2 (RMSNorm, SwiGLU,
rotary embeddings), the architecture of SmolLM2.

Training computes the next-token loss at every position of a known sequence in
one pass (the causal mask keeps position ``t`` from seeing positions after
``t``). Generation is sequential: one new token per step. With a
:class:`KVCache`, each step feeds only the new token and reuses the keys and
values of the earlier positions instead of recomputing them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from ..checks import (
    check_dropout,
    check_heads,
    check_nonnegative_int,
    check_positions,
    check_token_ids,
    check_type,
    embed,
    owner_name,
    shape_dtype,
)
from ..config import Activation, Norm, Positional, check_options, check_sizes
from ..nn.blocks import TransformerBlock, make_norm
from ..nn.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_positional_encoding,
)
from ..outputs import Generation, KVCache, ModelOutput
from .generation import decode_in_eval, sample_next_token

__all__ = ["DecoderOnlyConfig", "KVCache", "DecoderOnlyTransformer", "sample_next_token"]


@dataclass(frozen=True)
class DecoderOnlyConfig:
    """Hyperparameters of a :class:`DecoderOnlyTransformer`; defaults give a small GPT-2-style model.

    Raises:
        ValueError: (on construction) for fields outside the sizes and options below.
    """

    vocab_size: int  # number of token ids V
    max_len: int = 256  # positions 0 .. max_len - 1 (the longest sequence the model may see)
    d_model: int = 128  # model width D
    n_heads: int = 4  # query heads H (d_head = d_model // n_heads)
    n_layers: int = 2  # number of blocks
    d_ff: int = 512  # hidden width of the feed-forward network
    # on embeddings, attention weights, feed-forward hidden units and sublayer outputs
    dropout: float = 0.0
    # pre-norm (GPT-2, Llama) if True, post-norm (original Transformer) if False
    norm_first: bool = True
    # "learned" (GPT-2), "sinusoidal" (Vaswani et al.) or "rotary" (RoPE, Llama)
    positional: Positional = "learned"
    n_kv_heads: int | None = None  # key/value heads for grouped-query attention; None = n_heads
    norm: Norm = "layernorm"  # "layernorm" or "rmsnorm"
    # "relu", "gelu" (two-layer network) or "swiglu" (gated, three matrices)
    activation: Activation = "gelu"
    bias: bool = True  # biases in the attention and feed-forward projections (Llama: none)
    eps: float = 1e-5  # epsilon of every normalization layer
    # RoPE wavelength base (SmolLM2: 100000); used if positional == "rotary"
    rope_base: float = 10000.0
    rope_interleaved: bool = True  # RoPE pairs (2j, 2j+1) if True, (j, j + d_head/2) if False
    tie_embeddings: bool = True  # the output layer reuses the token-embedding matrix

    def __post_init__(self) -> None:
        check_sizes(self)
        check_heads(self, self.d_model, self.n_heads, self.n_kv_heads)
        check_dropout(self, self.dropout)
        check_options(self)
        if self.positional == "rotary" and (self.d_model // self.n_heads) % 2 != 0:
            raise ValueError(
                f"{owner_name(self)}: rotary positions need an even d_head, received "
                f"d_head={self.d_model // self.n_heads}"
            )

    def to_dict(self) -> dict:
        """The fields as a plain dict (for checkpoint metadata)."""
        return asdict(self)


class DecoderOnlyTransformer(nn.Module):
    """A GPT-style language model: embeddings, causal blocks, final norm, language-model head.

    Source: Radford et al. (2019), Sec. 2.3 (GPT-2: a norm at the input of each sublayer and
    one after the last block); the input and output embeddings tied as in Press & Wolf (2017);
    the Llama options (RMSNorm, SwiGLU, rotary
    positions, grouped-query attention) after Touvron et al. (2023), Sec. 2.2.

    ``logits = head(final_norm(blocks(dropout(embed(ids) + positions))))``; with rotary
    positions nothing is added to the embeddings (queries and keys are rotated in every
    layer instead). The final norm is used with pre-norm blocks only (a post-norm block
    already ends with a norm). Weights are initialised N(0, 0.02^2), biases 0, as in GPT-2,
    without GPT-2's 1/sqrt(N) scaling of the residual layers' weights.

    Args:
        config: a :class:`DecoderOnlyConfig` (anything else raises ``ValueError``).

    Attributes:
        config, token_embedding (nn.Embedding), position_embedding (LearnedPositionalEmbedding,
        SinusoidalPositionalEncoding, or None with rotary positions), embedding_dropout,
        blocks (nn.ModuleList of TransformerBlock), final_norm (LayerNorm or RMSNorm if pre-norm,
        else nn.Identity), lm_head (nn.Linear(d_model, vocab_size, bias=False), sharing
        ``token_embedding.weight`` if ``tie_embeddings``).
    """

    def __init__(self, config: DecoderOnlyConfig) -> None:
        super().__init__()
        check_type(self, config, DecoderOnlyConfig)
        c = self.config = config
        d_head = c.d_model // c.n_heads
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        if c.positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(c.d_model, c.max_len)
        elif c.positional == "sinusoidal":  # no parameters, no buffers: the state_dict is unchanged
            self.position_embedding = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        else:  # rotary: nothing is added here; every attention layer rotates its queries and keys
            self.position_embedding = None
        rotary = (
            RotaryEmbedding(d_head, c.rope_base, c.rope_interleaved)
            if c.positional == "rotary"
            else None
        )
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(
                c.d_model,
                c.n_heads,
                c.d_ff,
                n_kv_heads=c.n_kv_heads,
                dropout=c.dropout,
                activation=c.activation,
                norm=c.norm,
                norm_first=c.norm_first,
                eps=c.eps,
                bias=c.bias,
                rotary=rotary,
            )
            for _ in range(c.n_layers)
        )
        self.final_norm = make_norm(c.norm, c.d_model, c.eps) if c.norm_first else nn.Identity()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(_init_weights)
        if c.tie_embeddings:
            # one (V, D) matrix for input and output
            self.lm_head.weight = self.token_embedding.weight

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in self.parameters())

    def _embed(self, input_ids: Tensor, offset: int, position_ids: Tensor | None = None) -> Tensor:
        c = self.config
        # (B, L, D); the lookup refuses ids outside [0, vocab_size)
        x = embed(self, "input_ids", self.token_embedding, input_ids, min_len=1)
        if position_ids is None:
            check_positions(self, offset, input_ids.shape[1], c.max_len)
        # rotary (position_embedding None): nothing is added; positions enter in every attention layer
        if self.position_embedding is not None and position_ids is None:
            # + the rows of positions offset .. offset + L - 1, the same for every row of the batch
            x = self.position_embedding(x, offset)
        if self.position_embedding is not None and position_ids is not None:
            # + (B, L, D): the row of each token's own position (the lookup refuses >= max_len)
            table = (
                self.position_embedding.weight
                if isinstance(self.position_embedding, LearnedPositionalEmbedding)
                else sinusoidal_positional_encoding(
                    c.max_len,
                    c.d_model,
                    base=self.position_embedding.base,
                    dtype=x.dtype,
                    device=x.device,
                )
            )  # (max_len, D)
            x = x + embed(self, "position_ids", table, position_ids)
        return self.embedding_dropout(x)

    def _check_inputs(
        self,
        input_ids: Tensor,
        offset: int,
        attention_mask: Tensor | None,
        position_ids: Tensor | None,
    ) -> Tensor | None:
        """Check the shapes and dtypes of ``input_ids``, ``attention_mask`` and ``position_ids`` (their
        values: the embedding lookup); return the per-row positions to embed, or None."""
        owner = owner_name(self)
        check_token_ids(self, "input_ids", input_ids, min_len=1)
        B, L = input_ids.shape
        if attention_mask is not None:
            expected = (B, offset + L)
            if attention_mask.dtype != torch.bool or tuple(attention_mask.shape) != expected:
                raise ValueError(
                    f"{owner}: expected a bool attention_mask of shape (B, len(cache) + L) = "
                    f"{expected} (True = a real token), received {shape_dtype(attention_mask)}"
                )
        if position_ids is not None:
            if self.position_embedding is None:
                raise ValueError(
                    f"{owner}: position_ids need added position embeddings; rotary positions take "
                    "one offset for the batch (received position_ids with positional='rotary')"
                )
            if position_ids.is_floating_point() or tuple(position_ids.shape) != (B, L):
                raise ValueError(
                    f"{owner}: expected integer position_ids of shape (B, L) = {(B, L)}, received "
                    + shape_dtype(position_ids)
                )
        elif attention_mask is not None and self.position_embedding is not None:
            # each token's position counts the real tokens before it in its own row (padding
            # tokens get position 0; nothing attends to them)
            position_ids = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)[:, -L:]  # (B, L)
        return position_ids

    def forward(
        self,
        input_ids: Tensor,
        *,
        cache: KVCache | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> ModelOutput:
        """Next-token logits at every position.

        A batch of sequences of different lengths is padded on the left (generation appends on
        the right, so every row's last column is then its newest real token). Two things make a
        padded row compute what it would alone: ``attention_mask`` hides its padding keys from
        every query (combined with the causal mask), and ``position_ids`` number its real tokens
        from 0. By default ``position_ids`` are counted from ``attention_mask``. With rotary
        positions no per-row numbering is applied: every row's tokens sit at positions
        ``len(cache) ..``, and since RoPE scores depend only on differences of positions, a row
        shifted by its padding scores the same (up to rounding).

        Args:
            input_ids: ``(B, L)`` int64 token ids. With a non-empty ``cache`` these are the
                *new* tokens, at columns ``len(cache) .. len(cache) + L - 1``.
            cache: a :class:`KVCache` to read from and append to (in place), or ``None``.
            attention_mask: ``None`` (every token real) or bool ``(B, len(cache) + L)``, ``True``
                at real tokens, ``False`` at padding, covering the cached and the new columns.
            position_ids: ``None`` or integer ``(B, L)``, the position of each new token
                (learned or sinusoidal positions only). ``None``: counted from
                ``attention_mask`` (the number of real tokens before it in its row), or
                ``len(cache) .. len(cache) + L - 1`` without a mask.

        Returns:
            :class:`~transformer_lite.outputs.ModelOutput`: ``logits`` ``(B, L, vocab_size)``
            (row ``t`` scores the token at position ``t + 1``), ``attentions`` (``n_layers``
            tensors ``(B, H, L, len(cache) + L)``, first layer first) and ``cache`` (the one
            passed in, now holding these positions too, or ``None``).

        Raises:
            ValueError: for arguments other than the above.
        """
        if cache is not None:
            check_type(self, cache, KVCache, " (or None) as cache")
        offset = len(cache) if cache is not None else 0
        position_ids = self._check_inputs(input_ids, offset, attention_mask, position_ids)
        x = self._embed(input_ids, offset, position_ids)  # (B, L, D)
        # (B, 1, 1, S): padding keys hidden from every head and query; None: nothing to hide
        key_mask = attention_mask[:, None, None, :] if attention_mask is not None else None
        attentions = []
        for i, block in enumerate(self.blocks):
            past = cache.layers[i] if cache is not None and i < len(cache.layers) else None
            # (B, L, D), (B, H, L, S), this layer's keys and values: the block computes them
            # anyway; they are kept only in a cache. A key is seen only if both masks allow it
            # (the causal one aligned bottom-right with a cache).
            x, weights, present = block(x, attn_mask=key_mask, is_causal=True, cache=past)
            if cache is not None:
                # replace (or append) this layer's keys and values
                cache.layers[i : i + 1] = [present]
            attentions.append(weights)
        logits = self.lm_head(self.final_norm(x))  # (B, L, V)
        return ModelOutput(logits, tuple(attentions), cache)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        attention_mask: Tensor | None = None,
    ) -> Generation:
        """Append ``max_new_tokens`` tokens, one at a time, each drawn from the model's next-token distribution.

        Without the cache every step runs the whole sequence so far (at most its last
        ``max_len`` tokens: a sliding window, so the output may be longer than ``max_len``);
        with the cache the prompt is run once and each later step runs only the newest
        token, so every position must stay below ``max_len``. While the sequence fits,
        both give the same logits (up to rounding) and so the same tokens. The model is
        put in eval mode for the call (dropout off) and restored afterwards. The loop is
        :func:`~transformer_lite.models.generation.decode`.

        Prompts of different lengths go in one batch padded on the **left**, with
        ``attention_mask`` marking the real tokens: every row's last column is then its
        newest token, whose logits each step reads. At each step the mask grows by one
        ``True`` column for the new token, :meth:`forward` hides the padding keys and numbers
        each row's real tokens from 0 (its positions), and a row generates what its prompt
        would alone, up to rounding.

        Args:
            input_ids: ``(B, L)`` int64 prompt (left-padded if ``attention_mask`` is given;
                the id at padding does not matter).
            max_new_tokens: number of tokens to append (``>= 0``).
            temperature: divides the logits; ``0`` picks the most likely token (greedy).
            top_k: sample only among the ``top_k`` most likely tokens (``None`` = all).
            use_cache: reuse keys and values through a :class:`KVCache`; the prompt and
                ``max_new_tokens - 1`` new tokens must then fit in ``max_len`` (the last new token
                is never fed).
            generator: ``torch.Generator`` for reproducible sampling.
            attention_mask: ``None`` (no padding) or bool ``(B, L)``, ``True`` at real tokens:
                in each row some ``False`` (padding) and then only ``True``.

        Returns:
            :class:`~transformer_lite.outputs.Generation`: ``tokens`` ``(B, L + max_new_tokens)``
            int64 and ``logits`` ``(B, max_new_tokens, vocab_size)``, the logits each step
            sampled from (before temperature).

        Raises:
            ValueError: for arguments other than the above.
        """
        check_nonnegative_int(self.generate, "max_new_tokens", max_new_tokens)
        if (
            use_cache
            and input_ids.dim() == 2
            and input_ids.shape[1] + max_new_tokens - 1 > self.config.max_len
        ):
            raise ValueError(
                f"{owner_name(self.generate)}: a prompt of {input_ids.shape[1]} tokens plus {max_new_tokens} new ones needs "
                f"{input_ids.shape[1] + max_new_tokens - 1} positions, but max_len={self.config.max_len}"
            )
        if attention_mask is not None:
            _check_left_padding(self.generate, input_ids, attention_mask)
        cache = KVCache() if use_cache else None
        seen = {"tokens": None, "mask": None}  # the sequence and its mask so far

        def step(feed: Tensor) -> Tensor:
            """Feed the prompt (first call) or the newest token; the next-token logits ``(B, V)``."""
            first = seen["tokens"] is None
            tokens = feed if first else torch.cat((seen["tokens"], feed), dim=1)  # (B, L + steps)
            mask = attention_mask
            if mask is not None and not first:  # the new token is real: (B, L + steps)
                mask = torch.cat((seen["mask"], mask.new_ones(mask.shape[0], 1)), dim=1)
            seen["tokens"], seen["mask"] = tokens, mask
            window = feed if use_cache else tokens[:, -self.config.max_len :]  # (B, <= max_len)
            # the mask covers every column the step attends to: the cached ones and the window
            visible = mask if mask is None or use_cache else mask[:, -window.shape[1] :]
            # (B, V): scores of the next token, read at the last column (the newest real token)
            return self(window, cache=cache, attention_mask=visible).logits[:, -1]

        return decode_in_eval(self, step, input_ids, max_new_tokens, temperature, top_k, generator)


def _check_left_padding(owner, input_ids: Tensor, attention_mask: Tensor) -> None:
    """Raise ``ValueError`` unless ``attention_mask`` is a bool ``(B, L)`` left-padding mask of ``input_ids``."""
    expected = tuple(input_ids.shape) if isinstance(input_ids, Tensor) else "(B, L)"
    if (
        not isinstance(attention_mask, Tensor)
        or attention_mask.dtype != torch.bool
        or tuple(attention_mask.shape) != expected
    ):
        raise ValueError(
            f"{owner_name(owner)}: expected a bool attention_mask of the shape of input_ids, (B, L) = "
            f"{expected}, received {shape_dtype(attention_mask)}"
        )
    if not attention_mask.any(dim=1).all():
        rows = (~attention_mask.any(dim=1)).nonzero().flatten().tolist()
        raise ValueError(
            f"{owner_name(owner)}: expected a real token in every row, rows {rows} are all padding"
        )
    # left padding: once a row's tokens are real they stay real (False ... False True ... True)
    right = (attention_mask[:, :-1] & ~attention_mask[:, 1:]).any(dim=1)
    if right.any():
        raise ValueError(
            f"{owner_name(owner)}: expected left padding (False ... False True ... True in each row; new "
            "tokens are appended on the right), received padding after a real token in rows "
            f"{right.nonzero().flatten().tolist()}"
        )


def _init_weights(module: nn.Module) -> None:
    """GPT-2's N(0, 0.02^2) for linear and embedding weights, zero biases (no 1/sqrt(N) scaling)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)

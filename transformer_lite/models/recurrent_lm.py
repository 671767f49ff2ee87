"""A recurrent language model: the baseline the decoder-only transformer is compared with in chapter 8.

Source: Cho et al. (2014), the GRU, here ``torch.nn.GRU`` (chapter 6 writes the cell
out in :class:`~transformer_lite.nn.recurrent.GRU`); Karpathy's char-RNN setting
(characters in, next-character logits out).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from ..checks import (
    check_dropout,
    check_nonnegative_int,
    check_type,
    embed,
)
from ..config import check_sizes
from ..outputs import Generation, ModelOutput
from .generation import decode_in_eval

__all__ = ["GRUConfig", "GRULanguageModel"]


@dataclass(frozen=True)
class GRUConfig:
    """Hyperparameters of a :class:`GRULanguageModel` (the field names are the keys of its checkpoints).

    Raises:
        ValueError: (on construction) for non-positive sizes or ``dropout`` outside [0, 1).
    """

    vocab_size: int  # number of token ids V
    d_model: int  # embedding and hidden width
    n_layers: int = 1  # stacked GRU layers
    dropout: float = 0.0  # between GRU layers and before the head (training only)
    # the head reuses the embedding matrix (off, as in char-RNN models)
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        check_sizes(self)
        check_dropout(self, self.dropout)

    def to_dict(self) -> dict:
        """The fields as a plain dict (for checkpoint metadata)."""
        return asdict(self)


class GRULanguageModel(nn.Module):
    """A recurrent baseline: embedding, ``torch.nn.GRU`` layers (Cho et al., 2014), linear head.

    The recurrent state carries the whole past, so generation needs no cache: each step
    feeds one token and the state. Every part keeps PyTorch's default initialisation,
    in particular N(0, 1) for the embedding. (With the transformer's N(0, 0.02^2) the
    GRU's inputs start so small that it learns far more slowly: on the Shakespeare corpus
    we measured a validation loss of 2.76 instead of 1.77 nats/char after 200 steps.)

    Args:
        config: a :class:`GRUConfig` (anything else raises ``ValueError``).

    Attributes:
        config, vocab_size, d_model, n_layers, token_embedding (nn.Embedding), gru (nn.GRU),
        dropout (nn.Dropout), lm_head (nn.Linear(d_model, vocab_size, bias=False)).
    """

    def __init__(self, config: GRUConfig) -> None:
        super().__init__()
        check_type(self, config, GRUConfig)
        c = self.config = config
        self.vocab_size, self.d_model, self.n_layers = c.vocab_size, c.d_model, c.n_layers
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.gru = nn.GRU(
            c.d_model,
            c.d_model,
            num_layers=c.n_layers,
            batch_first=True,
            dropout=c.dropout if c.n_layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(c.dropout)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids: Tensor, *, cache: Tensor | None = None) -> ModelOutput:
        """Next-token logits at every position, continuing from the state ``cache``.

        Args:
            input_ids: ``(B, L)`` int64 token ids.
            cache: ``None`` (start from zeros) or the state ``(n_layers, B, d_model)`` a previous
                call returned.

        Returns:
            :class:`~transformer_lite.outputs.ModelOutput`: ``logits`` ``(B, L, V)``,
            ``attentions`` ``()`` and ``cache`` the final state ``(n_layers, B, d_model)``.

        Raises:
            ValueError: for ``input_ids`` other than the above.
        """
        x = embed(self, "input_ids", self.token_embedding, input_ids, min_len=1)  # (B, L, D)
        hidden, state = self.gru(x, cache)  # (B, L, D), (n_layers, B, D)
        logits = self.lm_head(self.dropout(hidden))  # (B, L, V)
        return ModelOutput(logits, (), state)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,  # (B, L) int64, the prompt
        max_new_tokens: int,  # >= 0
        *,
        temperature: float = 1.0,  # 0: the arg-max (greedy)
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """Append ``max_new_tokens`` sampled tokens, carrying the GRU state from step to step.

        The loop is :func:`~transformer_lite.models.generation.decode`: the prompt is fed once,
        then each new token with the state. The model is in eval mode for the call.

        Args:
            input_ids, max_new_tokens, temperature, top_k, generator: as
                :meth:`DecoderOnlyTransformer.generate`.

        Returns:
            :class:`~transformer_lite.outputs.Generation`: ``tokens`` ``(B, L + max_new_tokens)``
            int64 and the ``logits`` ``(B, max_new_tokens, V)`` each token was drawn from.

        Raises:
            ValueError: for ``max_new_tokens`` other than an int ``>= 0``, or as :meth:`forward`.
        """
        check_nonnegative_int(self.generate, "max_new_tokens", max_new_tokens)
        state = {"cache": None}

        def step(feed: Tensor) -> Tensor:
            """Feed the prompt (first call) or the newest token with the state; logits ``(B, V)``."""
            out = self(feed, cache=state["cache"])
            state["cache"] = out.cache
            return out.logits[:, -1]

        return decode_in_eval(self, step, input_ids, max_new_tokens, temperature, top_k, generator)

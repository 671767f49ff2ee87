"""A BERT encoder built from this package's blocks (Devlin et al., 2019).

Source: Devlin et al. (2019), "BERT", Sec. 3 (input representation: token + position +
segment embeddings, then LayerNorm; a stack of post-norm Transformer encoder layers with
GELU). :func:`~transformer_lite.pretrained.minilm.load_minilm` loads the published weights
of all-MiniLM-L6-v2 into it (the Hugging Face name map lives there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..checks import check_heads, check_marker, check_shape, check_type, embed
from ..config import check_sizes
from ..nn.blocks import TransformerBlock
from ..nn.masks import padding_mask
from ..nn.normalization import LayerNorm
from ..nn.positional import LearnedPositionalEmbedding
from ..outputs import EncoderOutput

__all__ = ["BertConfig", "BertEncoder"]


@dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder (names follow this package; Hugging Face names in brackets)."""

    vocab_size: int = 30522  # WordPiece vocabulary [vocab_size]
    max_len: int = 512  # learned positions [max_position_embeddings]
    type_vocab_size: int = 2  # segment (token type) embeddings
    d_model: int = 384  # [hidden_size]
    n_heads: int = 12  # [num_attention_heads]
    n_layers: int = 6  # [num_hidden_layers]
    d_ff: int = 1536  # [intermediate_size]
    eps: float = 1e-12  # LayerNorm epsilon [layer_norm_eps]

    def __post_init__(self) -> None:
        check_sizes(self)
        check_heads(self, self.d_model, self.n_heads)


class BertEncoder(nn.Module):
    """A post-norm BERT encoder built from this package's blocks (Devlin et al., 2019, Sec. 3).

    Input representation = token embedding + learned position embedding +
    token-type embedding, then LayerNorm; then ``n_layers`` post-norm
    :class:`TransformerBlock` s with exact GELU.

    Args:
        config: a :class:`BertConfig` (anything else raises ``ValueError``).

    Attributes:
        config, token_embedding (nn.Embedding), position_embedding (LearnedPositionalEmbedding),
        token_type_embedding (nn.Embedding), embedding_norm (LayerNorm), blocks (nn.ModuleList of
        TransformerBlock): the names :func:`~transformer_lite.pretrained.minilm.load_minilm` maps
        the published weights onto.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        check_type(self, config, BertConfig)
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = LearnedPositionalEmbedding(config.d_model, config.max_len)
        self.token_type_embedding = nn.Embedding(config.type_vocab_size, config.d_model)
        self.embedding_norm = LayerNorm(config.d_model, eps=config.eps)
        self.blocks = nn.ModuleList(
            TransformerBlock(
                config.d_model,
                config.n_heads,
                config.d_ff,
                activation="gelu",
                norm_first=False,
                eps=config.eps,
            )
            for _ in range(config.n_layers)
        )

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> EncoderOutput:
        """Encode a batch of token ids.

        Args:
            input_ids: ``(B, L)`` int64 token ids (from :class:`WordPieceTokenizer`).
            attention_mask: optional ``(B, L)`` with 1/True for real tokens and 0/False
                for padding (keys at padding positions get zero weight).
            token_type_ids: optional ``(B, L)`` segment ids; zeros by default.

        Returns:
            :class:`~transformer_lite.outputs.EncoderOutput`: ``output``, the hidden states
            ``(B, L, d_model)`` of the last layer, and ``attentions``, ``n_layers``
            attention-weight tensors ``(B, H, L, L)``.

        Raises:
            ValueError: for ids, a mask or token types other than the above, or ``L > max_len``.
        """
        # (B, L, D): token + position; the lookup refuses ids outside the vocabulary
        x = self.position_embedding(embed(self, "input_ids", self.token_embedding, input_ids))
        if attention_mask is not None:
            check_marker(self, "attention_mask", attention_mask, input_ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        check_shape(self, "token_type_ids", token_type_ids, input_ids.shape)
        x = x + embed(self, "token_type_ids", self.token_type_embedding, token_type_ids)
        x = self.embedding_norm(x)
        # (B, 1, 1, L): nonzero = a real token
        mask = padding_mask(attention_mask != 0) if attention_mask is not None else None
        attentions = []
        for block in self.blocks:
            x, weights, _ = block(x, attn_mask=mask)  # (B, L, D), (B, H, L, L)
            attentions.append(weights)
        return EncoderOutput(x, tuple(attentions))

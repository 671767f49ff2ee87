"""A per-position classifier on an encoder stack, runnable post-norm or pre-norm with the same weights.

Source: Xiong et al. (2020), "On Layer Normalization in the Transformer Architecture", Sec. 3
(gradients of post-LN and pre-LN Transformers at initialization). Post-norm and pre-norm
blocks have exactly the same parameters (one attention, one feed-forward, two layer norms),
so one set of weights can be run both ways (:func:`with_norm_first`); only the pre-norm stack
has one more LayerNorm at the end, which starts as the identity (weight 1, bias 0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from torch import Tensor, nn

from .. import checks
from ..checks import check_dropout, check_heads, check_type
from ..config import check_sizes
from ..outputs import ModelOutput
from .encoder_decoder import TransformerEncoder

__all__ = ["TaggerConfig", "EncoderTagger", "with_norm_first"]


@dataclass(frozen=True)
class TaggerConfig:
    """Hyperparameters of an :class:`EncoderTagger`.

    Raises:
        ValueError: (on construction) for fields outside the sizes and options below.
    """

    vocab_size: int  # number of input ids
    n_classes: int  # number of output classes per position
    n_layers: int  # encoder blocks
    d_model: int  # model width D
    n_heads: int  # attention heads H
    d_ff: int  # hidden width of each feed-forward network
    norm_first: bool = False  # pre-norm (the stack then ends with a final LayerNorm) or post-norm
    dropout: float = 0.0  # inside every block (attention weights, hidden units, sublayer outputs)

    def __post_init__(self) -> None:
        check_sizes(self)
        check_heads(self, self.d_model, self.n_heads)
        check_dropout(self, self.dropout)

    def to_dict(self) -> dict:
        """The fields as a plain dict."""
        return asdict(self)


class EncoderTagger(nn.Module):
    """Token embedding, a :class:`~transformer_lite.models.encoder_decoder.TransformerEncoder`, and a linear classifier at every position.

    No position information is added: the tasks it is used for here (such as
    counting how often each symbol occurs) do not depend on order. Dropout acts inside
    every block only (see :class:`~transformer_lite.nn.blocks.TransformerBlock`): the
    embeddings and the classifier input are not dropped. Active in ``train()`` mode only.

    Args:
        config: a :class:`TaggerConfig`.

    Attributes:
        config, embed (nn.Embedding), encoder (TransformerEncoder), head (nn.Linear(d_model, n_classes)).

    Raises:
        ValueError: if ``config`` is not a :class:`TaggerConfig`, or as ``TransformerEncoder``.
    """

    def __init__(self, config: TaggerConfig) -> None:
        super().__init__()
        check_type(self, config, TaggerConfig)
        c = self.config = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.encoder = TransformerEncoder(
            c.n_layers, c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, norm_first=c.norm_first
        )
        self.head = nn.Linear(c.d_model, c.n_classes)

    def forward(self, ids: Tensor) -> ModelOutput:
        """Map ``ids`` ``(B, L)`` (int64) to per-position class logits.

        Returns:
            :class:`~transformer_lite.outputs.ModelOutput`: ``logits`` ``(B, L, n_classes)``,
            ``attentions`` (one ``(B, H, L, L)`` per layer) and ``cache`` ``None``.

        Raises:
            ValueError: if ``ids`` is not a 2-D integer tensor.
        """
        h, attentions = self.encoder(checks.embed(self, "ids", self.embed, ids))  # (B, L, D)
        return ModelOutput(self.head(h), attentions, None)  # logits (B, L, n_classes)


def with_norm_first(model: EncoderTagger, norm_first: bool = True) -> EncoderTagger:
    """A copy of ``model`` with every block switched to ``norm_first``, holding the same weights.

    The attention, feed-forward and layer-norm parameters of every block, the
    embedding and the classifier are copied; a pre-norm copy's final LayerNorm
    is new (weight 1, bias 0: the identity at initialization).

    Raises:
        ValueError: if ``model`` is not an :class:`EncoderTagger`.
    """
    if not isinstance(model, EncoderTagger):
        raise ValueError(
            f"with_norm_first: expected an EncoderTagger, received {type(model).__name__}"
        )
    copy = EncoderTagger(replace(model.config, norm_first=norm_first))
    missing, unexpected = copy.load_state_dict(model.state_dict(), strict=False)
    # Only the final norm may differ: present in a pre-norm stack, absent in a post-norm one.
    assert set(missing) | set(unexpected) <= {"encoder.norm.weight", "encoder.norm.bias"}, (
        missing,
        unexpected,
    )
    return copy

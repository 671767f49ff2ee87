"""Choosing the next token, and the one loop that generates a sequence token by token.

Every model of the package generates through :func:`decode`: the decoder-only transformer
(with or without its key/value cache), the GRU language model (carrying its state) and the
encoder-decoder's :func:`~transformer_lite.models.encoder_decoder.greedy_decode`. A model
hands the loop a ``step`` function that maps the tokens to feed to the next-token logits;
what a step remembers (a cache, a state, the prefix) is the step's business. The two language
models' ``generate`` call it through :func:`decode_in_eval` (eval mode, and the empty logits of
a call that asks for no token).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..checks import check_nonnegative_int, eval_mode, owner_name
from ..outputs import Generation

__all__ = ["sample_next_token", "decode"]


def sample_next_token(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick one token per row from next-token logits.

    ``temperature = 0``: the arg-max (greedy decoding; the lowest id on ties).
    Otherwise sample from ``softmax(logits / temperature)``, restricted to the
    ``top_k`` largest logits if given (top-k sampling; Fan et al., 2018,
    "Hierarchical Neural Story Generation").

    Args:
        logits: ``(B, V)`` floating.
        temperature: ``>= 0``; below 1 sharpens, above 1 flattens the distribution.
        top_k: ``None`` or an int in ``[1, V]``.
        generator: ``torch.Generator`` for reproducible draws.

    Returns:
        ``(B, 1)`` int64 token ids.

    Raises:
        ValueError: for arguments other than the above.
    """
    if logits.dim() != 2:
        raise ValueError(
            f"{owner_name(sample_next_token)}: expected logits of shape (B, V), received {tuple(logits.shape)}"
        )
    if not temperature >= 0:
        raise ValueError(
            f"{owner_name(sample_next_token)}: expected temperature >= 0, received {temperature}"
        )
    if top_k is not None and not 1 <= top_k <= logits.shape[-1]:
        raise ValueError(
            f"{owner_name(sample_next_token)}: expected top_k in [1, {logits.shape[-1]}], received {top_k}"
        )
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    scaled = logits.float() / temperature  # (B, V)
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


@torch.no_grad()
def decode(
    step: Callable[[Tensor], Tensor],
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
) -> Generation:
    """Generate ``max_new_tokens`` tokens after ``prompt``, one per step (autoregressive decoding).

    Source: the factorisation p(y) = prod_t p(y_t | y_<t) of a language model, sampled left to
    right (Radford et al., 2019, Sec. 2; greedy search when ``temperature = 0``, as in
    Vaswani et al., 2017, Sec. 6.1 with a beam of one).

    Each step calls ``logits = step(feed)`` with ``feed`` the prompt first and then the token
    chosen at the previous step (the last token chosen is never fed), chooses the next token
    with :func:`sample_next_token` (one ``torch.multinomial`` draw with ``generator`` per step
    when sampling) and appends it. With ``eos_id``, a row that has produced ``eos_id`` gets
    ``eos_id`` from then on, and the loop stops early once every row has produced it. The
    model's train/eval mode is the caller's business.

    Args:
        step: maps the tokens to feed ``(B, L)`` (then ``(B, 1)``) to the next-token logits ``(B, V)``.
        prompt: ``(B, L)`` int64, the first tokens.
        max_new_tokens: the most tokens to append (``>= 0``).
        temperature, top_k, generator: as :func:`sample_next_token`.
        eos_id: the token that ends a row, or ``None`` (every row runs ``max_new_tokens`` steps).

    Returns:
        :class:`~transformer_lite.outputs.Generation`: ``tokens`` ``(B, L + T)`` and the ``logits``
        ``(B, T, V)`` each token was chosen from (before temperature), ``T <= max_new_tokens``
        (``T = 0``: logits ``(B, 0, 0)``, the loop never saw V).

    Raises:
        ValueError: if ``max_new_tokens`` is not an int ``>= 0``, or as :func:`sample_next_token`.
    """
    check_nonnegative_int(decode, "max_new_tokens", max_new_tokens)
    tokens, feed, step_logits = prompt, prompt, []
    done = (
        None
        if eos_id is None
        else torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    )
    for _ in range(max_new_tokens):
        logits = step(feed)  # (B, V): scores of the next token
        step_logits.append(logits)
        next_token = sample_next_token(logits, temperature, top_k, generator)  # (B, 1)
        if done is not None:  # a finished row is padded with eos_id
            next_token = torch.where(done[:, None], torch.full_like(next_token, eos_id), next_token)
            done = done | (next_token[:, 0] == eos_id)  # (B,)
        tokens = torch.cat((tokens, next_token), dim=1)  # (B, L + steps so far)
        feed = next_token
        if done is not None and bool(done.all()):
            break
    if step_logits:
        logits = torch.stack(step_logits, dim=1)  # (B, T, V)
    else:
        logits = torch.zeros((prompt.shape[0], 0, 0), device=prompt.device)
    return Generation(tokens, logits)


def decode_in_eval(
    model: nn.Module,
    step: Callable[[Tensor], Tensor],
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float,
    top_k: int | None,
    generator: torch.Generator | None,
) -> Generation:
    """:func:`decode` with ``model`` in eval mode (its mode restored afterwards): a language model's ``generate``.

    ``model.lm_head`` is the output layer; its weight ``(V, D)`` gives the empty logits of a call
    with ``max_new_tokens = 0`` their shape ``(B, 0, V)`` and dtype (:func:`decode` never sees V).
    """
    with eval_mode(model):
        result = decode(
            step, prompt, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator
        )
    if max_new_tokens > 0:
        return result
    head = model.lm_head.weight  # (V, D)
    empty = prompt.new_zeros((prompt.shape[0], 0, head.shape[0]), dtype=head.dtype)  # (B, 0, V)
    return Generation(result.tokens, empty)

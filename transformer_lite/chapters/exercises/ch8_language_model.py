"""Exercise checkers of chapter 8, ``notebooks/08_language_model.ipynb``:
the next-token loss, temperature and top-k, loss units, the size of a key/value cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ...models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from ...outputs import KVCache
from . import _checking as checking

__all__ = [
    "check_next_token_loss",
    "check_temperature_top_k",
    "check_loss_units",
    "check_kv_cache_bytes",
]


# --------------------------------------------------------------------------- chapter 8: the next-token loss


def _next_token_nll(logits: Tensor, ids: Tensor) -> Tensor:
    """-log p(ids[b, t + 1] | logits[b, t]) for t = 0 .. L-2: float64 ``(B, L - 1)``, by log-softmax and gather."""
    log_p = torch.log_softmax(logits[:, :-1].double(), dim=-1)  # (B, L-1, V)
    return -log_p.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)


def _nll_against(logits: Tensor, targets: Tensor, dim: int = -1) -> Tensor:
    """-log softmax(logits)[target] at every position: logits ``(B, T, V)``, targets ``(B, T)`` -> ``(B, T)``."""
    log_p = torch.log_softmax(logits.double(), dim=dim)  # (B, T, V)
    return -log_p.gather(-1, targets[..., None]).squeeze(-1)  # (B, T)


@checking.checker("check_next_token_loss")
def check_next_token_loss(fn: Callable) -> None:
    """Check ``fn(logits, ids) -> loss``: the mean next-token cross-entropy of a language model, in nats.

    ``logits`` ``(B, L, V)`` float64 are the model's outputs for the windows ``ids`` ``(B, L)`` int64 (row
    ``t`` scores the token that follows position ``t``). Expected: a 0-dim float tensor equal to
    ``-(1 / (B (L - 1))) sum_{b, t < L-1} log softmax(logits[b, t])[ids[b, t + 1]]``, the negative of the
    log-likelihood objective of Radford et al. (2018), Eq. 1, averaged over the ``B (L - 1)`` positions that
    have a target (the last position has none) and measured with the natural logarithm (nats; divide by
    ln 2 for bits). Cases include ``L = 2`` (one target per row) and ``B = 1``.

    Raises:
        AssertionError: naming the likely mistake (no shift, shifted the wrong way, wrap-around with
            ``torch.roll``, sum instead of mean, bits instead of nats, mean of -log p over the vocabulary,
            dividing by L instead of L - 1, log-softmax over the wrong axis, raw logits without the log-softmax).
    """
    g = checking.gen(31)
    # The first case is the most telling: B > 1 and L > 2, so every mistake below gives a different number.
    for B, L, V in [(3, 6, 7), (2, 2, 5), (1, 9, 11), (4, 3, 3)]:
        case = f"logits of shape {(B, L, V)}, ids of shape {(B, L)}"
        logits = 2.0 * torch.randn(B, L, V, generator=g, dtype=torch.float64)
        ids = torch.randint(0, V, (B, L), generator=g)
        ids[:, 1] = (
            ids[:, 0] + 1
        ) % V  # the first two tokens of every row differ: a missing shift shows
        loss = checking.call(fn, logits.clone(), ids.clone())
        if not isinstance(loss, Tensor):
            raise AssertionError(
                f"loss for {case}: expected a 0-dim torch.Tensor, received {type(loss).__name__}"
            )
        if loss.dim() != 0:
            raise AssertionError(
                f"loss for {case}: expected a 0-dim tensor (shape (), one number for the whole "
                f"batch), received shape {tuple(loss.shape)}; average over every position "
                "that has a target"
            )
        if not loss.is_floating_point():
            raise AssertionError(
                f"loss for {case}: expected a floating tensor, received dtype {loss.dtype}"
            )
        nll = _next_token_nll(logits, ids)  # (B, L-1)
        ref = nll.mean()
        if checking.close(loss, ref):
            continue
        n = B * (L - 1)
        variants = {
            "no shift: each position was scored against its own token; logits[:, t] predicts ids[:, t + 1], so "
            "compare logits[:, :-1] with ids[:, 1:]": _nll_against(logits, ids).mean(),
            "no shift (with the last position dropped): logits[:, :-1] must be scored against ids[:, 1:], not "
            "ids[:, :-1]": _nll_against(logits[:, :-1], ids[:, :-1]).mean(),
            "shifted the wrong way: logits[:, 1:] against ids[:, :-1] asks each position for the token BEFORE "
            "it; use logits[:, :-1] against ids[:, 1:]": _nll_against(
                logits[:, 1:], ids[:, :-1]
            ).mean(),
            "wrap-around: torch.roll moved the first token to the end, so the last position was scored against "
            "ids[:, 0]; cut with slices (logits[:, :-1], ids[:, 1:]) instead": _nll_against(
                logits, torch.roll(ids, -1, dims=1)
            ).mean(),
            "sum instead of mean: average over the B * (L - 1) positions": nll.sum(),
            "bits instead of nats: use the natural logarithm (torch.log / log_softmax), not log2": nll.mean()
            / math.log(2),
            "mean of -log p over the whole vocabulary: pick the target token's log-probability (gather or "
            "F.cross_entropy), do not average over all V tokens": -torch.log_softmax(
                logits[:, :-1].double(), dim=-1
            ).mean(),
            "divided by L instead of L - 1: only L - 1 positions per row have a target, so the mean is over "
            f"B * (L - 1) = {n} positions, not B * L = {B * L}": nll.sum() / (B * L),
            "log-softmax over the wrong axis: normalize over the vocabulary (dim=-1), not over the positions": _nll_against(
                logits[:, :-1], ids[:, 1:], dim=1
            ).mean(),
            "used the raw logit of the target: apply log_softmax first, the loss is -log p, not -logit": -logits[
                :, :-1
            ]
            .double()
            .gather(-1, ids[:, 1:, None])
            .mean(),
        }
        raise checking.diagnose(loss, variants, case, "loss", ref)


# --------------------------------------------------------------------------- chapter 8: temperature and top-k


def _temperature_top_k_probs(
    logits: Tensor,
    temperature: float,
    top_k: int | None,
    smallest: bool = False,
    renormalize: bool = True,
) -> Tensor:
    """Reference (and mistaken variants): softmax(logits / T) on the k kept tokens of each row, 0 elsewhere."""
    scaled = logits.double() / temperature  # (B, V)
    V = scaled.shape[-1]
    k = V if top_k is None else top_k
    order = scaled.argsort(dim=-1, descending=not smallest)  # (B, V)
    keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order[:, :k], True)  # (B, V)
    if not renormalize:  # softmax over all V first, then cut
        return torch.softmax(scaled, dim=-1) * keep
    # (B, V), 0 outside the kept set
    weights = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True)) * keep
    return weights / weights.sum(dim=-1, keepdim=True)


@checking.checker("check_temperature_top_k")
def check_temperature_top_k(fn: Callable) -> None:
    """Check ``fn(logits, temperature, top_k) -> probs``: the distribution that temperature and top-k sampling use.

    ``logits`` ``(B, V)`` float64, ``temperature`` a float > 0, ``top_k`` an int in ``[1, V]`` or ``None``
    (all tokens). Expected ``(B, V)``: ``softmax(logits / temperature)`` restricted to the ``top_k`` largest
    logits of each row, the other entries exactly 0, renormalised so that each row sums to 1 (the softmax
    with a temperature: Hinton, Vinyals & Dean, 2015, Eq. 1; temperature sampling of text: Holtzman et al.,
    2020; top-k sampling: Fan et al., 2018). :func:`transformer_lite.models.generation.sample_next_token` draws
    from this distribution. The logits are continuous random numbers, so no two are tied; the cases cover temperatures
    0.5, 1 and 2 and ``top_k`` None, 1, 3 and V.

    Raises:
        AssertionError: naming the likely mistake (multiplied by the temperature, kept the k smallest, not
            renormalised after zeroing, k + 1 or k - 1 tokens kept, top_k ignored, temperature ignored, logits
            or log-probabilities returned instead of probabilities).
    """
    g = checking.gen(37)
    # The first case is the most telling: T != 1 and 1 < k < V, so every mistake below changes the numbers.
    for B, V, temperature, top_k in [
        (3, 7, 0.5, 3),
        (2, 6, 2.0, None),
        (4, 9, 1.0, 1),
        (2, 5, 2.0, 5),
        (1, 8, 0.5, None),
        (3, 10, 2.0, 3),
        (2, 4, 0.5, 1),
    ]:
        case = f"logits of shape {(B, V)}, temperature={temperature}, top_k={top_k}"
        logits = 1.5 * torch.randn(B, V, generator=g, dtype=torch.float64)
        probs = checking.call(fn, logits.clone(), temperature, top_k)
        checking.check_tensor(probs, "probabilities", (B, V), case)
        ref = _temperature_top_k_probs(logits, temperature, top_k)
        if checking.close(probs, ref):
            continue
        p = probs.double()
        if torch.isnan(p).any():
            raise AssertionError(
                f"probabilities for {case} contain NaN: a row of only -inf scores (no token "
                "kept?) or 0/0 in the normalization"
            )
        if (p < 0).any() or torch.isinf(p).any():
            raise AssertionError(
                f"wrong probabilities for {case}. Likely mistake: returned logits or "
                "log-probabilities instead of probabilities (negative or infinite values); "
                "apply the softmax after the cut"
            )
        k = V if top_k is None else top_k
        variants = {
            "multiplied by the temperature instead of dividing: softmax(logits / temperature), so T < 1 "
            "sharpens and T > 1 flattens": _temperature_top_k_probs(
                logits * temperature**2, temperature, top_k
            ),
            "kept the k smallest logits: keep the k LARGEST (torch.topk returns the largest by default)": _temperature_top_k_probs(
                logits, temperature, top_k, smallest=True
            ),
            "not renormalised after zeroing (softmax first, then cut): set the dropped logits to -inf before "
            "the softmax, or divide the kept probabilities by their sum, so each row sums to 1": _temperature_top_k_probs(
                logits, temperature, top_k, renormalize=False
            ),
            "top_k ignored: keep only the top_k largest logits, set the others' probability to 0": _temperature_top_k_probs(
                logits, temperature, None
            ),
            "temperature ignored: divide the logits by the temperature before the softmax": _temperature_top_k_probs(
                logits, 1.0, top_k
            ),
        }
        if k + 1 <= V:
            variants[
                "off by one: k + 1 tokens kept, keep exactly top_k (compare with the k-th largest using >=, "
                "or torch.topk(..., top_k))"
            ] = _temperature_top_k_probs(logits, temperature, k + 1)
        if k - 1 >= 1:
            variants[
                "off by one: k - 1 tokens kept, keep exactly top_k (the k-th largest logit itself stays)"
            ] = _temperature_top_k_probs(logits, temperature, k - 1)
        sums = p.sum(dim=-1)
        for mistake, value in variants.items():
            if checking.close(p, value):
                raise AssertionError(f"wrong probabilities for {case}. Likely mistake: {mistake}")
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
            rounded = [round(s, 4) for s in sums.tolist()]
            raise AssertionError(
                f"wrong probabilities for {case}: the rows sum to {rounded}, not 1; these must be "
                "probabilities (softmax after the cut)"
            )
        raise checking.diagnose(p, {}, case, "probabilities", ref)


# --------------------------------------------------------------------------- chapter 8: units and cache size


@checking.checker("check_loss_units")
def check_loss_units(fn: Callable) -> None:
    """Check ``fn(loss) -> (bits, perplexity)`` for a loss in nats per token (a float).

    Expected: ``bits = loss / ln 2`` (one nat is ``1 / ln 2`` bits: ``ln p = ln 2 * log2 p``) and the
    perplexity ``exp(loss)``, the number of equally likely choices with the same loss (equal to ``2 ** bits``).
    Cases: the uniform guess over 78 symbols (``ln 78``: perplexity 78), ``ln 2`` (one bit, perplexity 2),
    0 (certainty: 0 bits, perplexity 1) and 1.5.

    Raises:
        AssertionError: naming the likely mistake (multiplied by ln 2 instead of dividing, log10 instead of
            ln, perplexity as ``2 ** loss`` or ``exp(bits)``, the pair in the wrong order).
    """
    for loss in (math.log(78), math.log(2), 0.0, 1.5):
        case = f"loss {loss:.4f} nats"
        got = checking.call(fn, loss)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise AssertionError(
                f"for {case}: expected a pair (bits, perplexity), received {got!r}"
            )
        try:
            bits, perplexity = float(got[0]), float(got[1])
        except (TypeError, ValueError) as exc:
            raise AssertionError(
                f"for {case}: expected two numbers (bits, perplexity), received {got!r}"
            ) from exc
        want_bits, want_ppl = loss / math.log(2), math.exp(loss)
        ok_bits = math.isclose(bits, want_bits, rel_tol=1e-6, abs_tol=1e-9)
        ok_ppl = math.isclose(perplexity, want_ppl, rel_tol=1e-6, abs_tol=1e-9)
        if ok_bits and ok_ppl:
            continue
        if (
            loss > 0
            and math.isclose(bits, want_ppl, rel_tol=1e-6)
            and math.isclose(perplexity, want_bits, rel_tol=1e-6)
        ):
            raise AssertionError(
                f"for {case}: the pair is in the wrong order; return (bits, perplexity)"
            )
        if not ok_bits:
            mistakes = {
                "multiplied by ln 2: a nat is 1 / ln 2 bits, so divide the loss by ln 2": loss
                * math.log(2),
                "log10 instead of ln: bits = loss / ln 2 (math.log(2), the natural logarithm)": loss
                / math.log10(2),
            }
            for mistake, value in mistakes.items():
                if loss > 0 and math.isclose(bits, value, rel_tol=1e-6):
                    raise AssertionError(f"wrong bits for {case}. Likely mistake: {mistake}")
            raise AssertionError(
                f"wrong bits for {case}: expected {want_bits:.6f}, received {bits:.6f}"
            )
        mistakes = {
            "2 ** loss: the loss is in nats, so the perplexity is e ** loss (or 2 ** bits)": 2.0
            ** loss,
            "exp(bits): bits go with base 2, so the perplexity is 2 ** bits = e ** loss": math.exp(
                want_bits
            ),
        }
        for mistake, value in mistakes.items():
            if loss > 0 and math.isclose(perplexity, value, rel_tol=1e-6):
                raise AssertionError(f"wrong perplexity for {case}. Likely mistake: {mistake}")
        raise AssertionError(
            f"wrong perplexity for {case}: expected {want_ppl:.6f}, received {perplexity:.6f}"
        )


@checking.checker("check_kv_cache_bytes")
def check_kv_cache_bytes(fn: Callable) -> None:
    """Check ``fn(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number) -> int``: the size of a key/value cache.

    Expected: ``2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number`` bytes (a key and a value
    per layer, key/value head and token; Ainslie et al., 2023, share each key/value head among several query
    heads). The oracle is independent of that formula: for each case a small
    :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` with grouped-query attention processes
    ``n_tokens`` tokens into a :class:`~transformer_lite.outputs.KVCache`, whose tensors' bytes are
    counted (float32: 4 bytes; float64: 8). Then SmolLM2's numbers (30 layers, 3 key/value heads of width 64,
    8192 tokens, float32) are checked against the formula.

    Raises:
        AssertionError: naming the likely mistake (keys only, the query heads counted instead of the key/value
            heads, bits instead of bytes, the bytes per number left out).
    """
    cases = [(2, 2, 4, 5, torch.float32), (3, 1, 8, 7, torch.float64), (1, 3, 2, 1, torch.float32)]
    for n_layers, n_kv, d_head, n_tokens, dtype in cases:
        n_heads = 2 * n_kv  # grouped-query attention: two query heads per key/value head
        cfg = DecoderOnlyConfig(
            vocab_size=11,
            max_len=16,
            d_model=n_heads * d_head,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=8,
            n_kv_heads=n_kv,
            positional="rotary",
        )
        with torch.random.fork_rng():  # seeded weights, without touching the reader's random state
            torch.manual_seed(0)
            model = DecoderOnlyTransformer(cfg).to(dtype).eval()
        cache = KVCache()
        with torch.no_grad():
            model(torch.arange(n_tokens)[None] % 11, cache=cache)  # (1, n_tokens)
        want = cache.num_bytes()  # measured on the cache's tensors
        size = torch.empty((), dtype=dtype).element_size()
        case = (
            f"n_layers={n_layers}, n_kv_heads={n_kv} (with {n_heads} query heads), d_head={d_head}, "
            f"n_tokens={n_tokens}, bytes_per_number={size}"
        )
        got = checking.call(fn, n_layers, n_kv, d_head, n_tokens, size)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            per = n_layers * d_head * n_tokens
            mistakes = {
                "keys only: the cache holds a key AND a value per token (factor 2)": want // 2,
                "counted the query heads: only the n_kv_heads key/value heads are cached": 2
                * per
                * n_heads
                * size,
                "bits instead of bytes (factor 8)": 8 * want,
                "the bytes per number left out: that counts numbers, not bytes": want // size,
            }
            for mistake, value in mistakes.items():
                if got == value:
                    raise AssertionError(f"wrong size for {case}. Likely mistake: {mistake}")
            raise AssertionError(
                f"wrong size for {case}: the cache measured {want:,} bytes, received {got!r}"
            )
    want = 2 * 30 * 3 * 64 * 8192 * 4
    got = checking.call(fn, 30, 3, 64, 8192, 4)
    if got != want:
        raise AssertionError(
            f"wrong size for SmolLM2 (30 layers, 3 key/value heads of width 64, 8192 tokens, "
            f"float32): expected {want:,} bytes, received {got!r}"
        )

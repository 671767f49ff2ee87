"""Tests for the checkers of chapter 8 (notebook 08): check_next_token_loss and check_temperature_top_k.

Oracles: learner-style correct solutions written here independently of the checkers (the loss through
F.cross_entropy, through an explicit log-sum-exp loop, and through the package's ``train.lm_loss``; the
distribution through masked_fill + softmax, through torch.topk + scatter, and through
``sample_next_token``'s own route), plus one deliberately wrong implementation per classic mistake, each of
which must be rejected with a message naming *that* mistake. A stub raising NotImplementedError must print
"not implemented yet".
"""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import CheckerCases, assert_leaves_global_random_state
from transformer_lite.chapters.exercises import check_next_token_loss, check_temperature_top_k
from transformer_lite.training.train import lm_loss

CASES = CheckerCases()


# --------------------------------------------------------------------------- the next-token loss


@CASES.passes(check_next_token_loss)
def loss_cross_entropy(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))  # (B*(L-1), V)


@CASES.passes(check_next_token_loss)
def loss_by_hand(logits, ids):
    """Position by position: log-sum-exp minus the target's logit, averaged by hand."""
    total, count = 0.0, 0
    for b in range(logits.shape[0]):
        for t in range(logits.shape[1] - 1):
            row = logits[b, t]
            total = total + torch.logsumexp(row, 0) - row[ids[b, t + 1]]
            count += 1
    return total / count


@CASES.passes(check_next_token_loss)
def loss_package(logits, ids):
    return lm_loss(logits[:, :-1], ids[:, 1:])


@CASES.named(check_next_token_loss, "no shift: each position was scored against its own token")
def loss_no_shift(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


@CASES.named(check_next_token_loss, "no shift (with the last position dropped)")
def loss_no_shift_cut(logits, ids):
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, :-1].flatten())


@CASES.named(check_next_token_loss, "shifted the wrong way")
def loss_wrong_way(logits, ids):
    return F.cross_entropy(logits[:, 1:].flatten(0, 1), ids[:, :-1].flatten())


@CASES.named(check_next_token_loss, "wrap-around: torch.roll")
def loss_roll(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), torch.roll(ids, -1, dims=1).flatten())


@CASES.named(check_next_token_loss, "sum instead of mean")
def loss_sum(logits, ids):
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="sum")


@CASES.named(check_next_token_loss, "bits instead of nats")
def loss_bits(logits, ids):
    return loss_cross_entropy(logits, ids) / math.log(2)


@CASES.named(check_next_token_loss, "bits instead of nats")
def loss_bits_log2(logits, ids):
    p = torch.softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])
    return -torch.log2(p).mean()


@CASES.named(check_next_token_loss, "mean of -log p over the whole vocabulary")
def loss_vocab_mean(logits, ids):
    return -torch.log_softmax(logits[:, :-1], -1).mean()


@CASES.named(check_next_token_loss, "divided by L instead of L - 1")
def loss_divide_by_L(logits, ids):
    return loss_sum(logits, ids) / ids.numel()


@CASES.named(check_next_token_loss, "log-softmax over the wrong axis")
def loss_wrong_axis(logits, ids):
    return -torch.log_softmax(logits[:, :-1], dim=1).gather(-1, ids[:, 1:, None]).mean()


@CASES.named(check_next_token_loss, "used the raw logit of the target")
def loss_raw_logit(logits, ids):
    return -logits[:, :-1].gather(-1, ids[:, 1:, None]).mean()


@CASES.named(check_next_token_loss, "expected a 0-dim torch.Tensor, received float")
def loss_float(logits, ids):
    return loss_cross_entropy(logits, ids).item()


@CASES.named(
    check_next_token_loss,
    "expected a 0-dim tensor (shape (), one number for the whole batch), received shape (3, 5)",
)
def loss_per_position(logits, ids):
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, L-1)


def test_loss_first_case_tells_every_mistake_apart():
    """Every named mistake is caught on the first case (B=3, L=6, V=7), not by luck on a later one."""
    for fn in (
        loss_no_shift,
        loss_wrong_way,
        loss_roll,
        loss_sum,
        loss_bits,
        loss_vocab_mean,
        loss_divide_by_L,
    ):
        with pytest.raises(AssertionError, match=r"logits of shape \(3, 6, 7\)"):
            check_next_token_loss(fn)


def test_loss_unknown_mistake_crash_and_stub(capsys):
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_next_token_loss(lambda logits, ids: loss_cross_entropy(logits, ids) + 0.1)
    with pytest.raises(AssertionError, match="expected a floating tensor"):
        check_next_token_loss(lambda logits, ids: torch.tensor(1))
    with pytest.raises(AssertionError, match="your function raised"):
        check_next_token_loss(lambda logits, ids: F.cross_entropy(logits, ids[:, 1:]))

    def stub(logits, ids):
        raise NotImplementedError

    assert check_next_token_loss(stub) is None
    assert "check_next_token_loss: not implemented yet" in capsys.readouterr().out


def test_loss_reference_on_a_hand_computed_case():
    """The checker's oracle on a case small enough to do by hand: L = 2, V = 2, logits (0, ln 3) -> p = (1/4, 3/4)."""
    from transformer_lite.chapters.exercises.ch8_language_model import _next_token_nll

    logits = torch.tensor([[[0.0, math.log(3.0)], [5.0, -5.0]]], dtype=torch.float64)  # (1, 2, 2)
    # target of position 0 is token 1: p = 3/4
    nll = _next_token_nll(logits, torch.tensor([[0, 1]]))
    torch.testing.assert_close(nll, torch.tensor([[-math.log(0.75)]], dtype=torch.float64))
    # target token 0: p = 1/4, loss ln 4 = 2 bits
    nll = _next_token_nll(logits, torch.tensor([[1, 0]]))
    torch.testing.assert_close(nll, torch.tensor([[math.log(4.0)]], dtype=torch.float64))


# --------------------------------------------------------------------------- temperature and top-k


@CASES.passes(check_temperature_top_k)
def probs_masked(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]  # (B, 1)
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.softmax(scaled, dim=-1)


@CASES.passes(check_temperature_top_k)
def probs_scatter(logits, temperature, top_k):
    k = logits.shape[-1] if top_k is None else top_k
    # the largest logits are the largest scaled logits (T > 0)
    values, index = torch.topk(logits, k, dim=-1)
    return torch.zeros_like(logits).scatter(-1, index, torch.softmax(values / temperature, dim=-1))


@CASES.passes(check_temperature_top_k)
def probs_power(logits, temperature, top_k):
    """p ** (1 / T), renormalised, equals softmax(logits / T); then cut and renormalise again."""
    p = torch.softmax(logits, -1) ** (1.0 / temperature)
    p = p / p.sum(-1, keepdim=True)
    if top_k is not None:
        kth = torch.topk(p, top_k, dim=-1).values[:, -1:]
        p = torch.where(p >= kth, p, torch.zeros_like(p))
    return p / p.sum(-1, keepdim=True)


@CASES.named(check_temperature_top_k, "multiplied by the temperature instead of dividing")
def probs_times_t(logits, temperature, top_k):
    return probs_masked(logits * temperature**2, temperature, top_k)


@CASES.named(check_temperature_top_k, "kept the k smallest logits")
def probs_smallest(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1, largest=False).values[:, -1:]
        scaled = scaled.masked_fill(scaled > kth, float("-inf"))
    return torch.softmax(scaled, dim=-1)


@CASES.named(check_temperature_top_k, "not renormalised after zeroing")
def probs_not_renormalised(logits, temperature, top_k):
    p = torch.softmax(logits / temperature, -1)
    if top_k is not None:
        kth = torch.topk(p, top_k, dim=-1).values[:, -1:]
        p = p * (p >= kth)
    return p


@CASES.named(check_temperature_top_k, "off by one: k + 1 tokens kept")
def probs_k_plus_one(logits, temperature, top_k):
    k = None if top_k is None else min(top_k + 1, logits.shape[-1])
    return probs_masked(logits, temperature, k)


@CASES.named(check_temperature_top_k, "off by one: k - 1 tokens kept")
def probs_k_minus_one(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled <= kth, float("-inf"))  # '<=' drops the k-th one too
    return torch.softmax(scaled, dim=-1)


@CASES.named(check_temperature_top_k, "top_k ignored")
def probs_no_top_k(logits, temperature, top_k):
    return torch.softmax(logits / temperature, -1)


@CASES.named(check_temperature_top_k, "temperature ignored")
def probs_no_temperature(logits, temperature, top_k):
    return probs_masked(logits, 1.0, top_k)


@CASES.named(
    check_temperature_top_k, "returned logits or log-probabilities instead of probabilities"
)
def probs_log(logits, temperature, top_k):
    return torch.log(probs_masked(logits, temperature, top_k))


@CASES.named(
    check_temperature_top_k, "returned logits or log-probabilities instead of probabilities"
)
def probs_logits(logits, temperature, top_k):
    return logits / temperature


@CASES.named(check_temperature_top_k, "the rows sum to [0.5, 0.5, 0.5], not 1")
def probs_half(logits, temperature, top_k):
    return 0.5 * probs_masked(logits, temperature, top_k)


def test_temperature_shape_crash_nan_unknown_and_stub(capsys):
    with pytest.raises(AssertionError, match=r"expected shape \(3, 7\), received \(3, 1\)"):
        check_temperature_top_k(
            lambda logits, t, k: probs_masked(logits, t, k).argmax(-1, keepdim=True)
        )
    with pytest.raises(AssertionError, match="contain NaN"):
        check_temperature_top_k(lambda logits, t, k: probs_masked(logits, t, k) * float("nan"))
    with pytest.raises(AssertionError, match="your function raised"):
        # no dim 2: IndexError
        check_temperature_top_k(lambda logits, t, k: torch.softmax(logits / t, dim=2))
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_temperature_top_k(lambda logits, t, k: probs_masked(logits, 1.3 * t, k))

    def stub(logits, temperature, top_k):
        raise NotImplementedError

    assert check_temperature_top_k(stub) is None
    assert "check_temperature_top_k: not implemented yet" in capsys.readouterr().out


def test_temperature_reference_on_a_hand_computed_case():
    """Logits (ln 1, ln 2, ln 3, ln 4) at T = 1 give p = (1, 2, 3, 4) / 10; top-2 keeps (3, 4) / 7; at T = 0.5
    the probabilities go as the squares, (9, 16) / 25."""
    from transformer_lite.chapters.exercises.ch8_language_model import _temperature_top_k_probs

    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64))
    torch.testing.assert_close(
        _temperature_top_k_probs(logits, 1.0, None),
        torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64),
    )
    torch.testing.assert_close(
        _temperature_top_k_probs(logits, 1.0, 2),
        torch.tensor([[0.0, 0.0, 3 / 7, 4 / 7]], dtype=torch.float64),
    )
    torch.testing.assert_close(
        _temperature_top_k_probs(logits, 0.5, 2),
        torch.tensor([[0.0, 0.0, 9 / 25, 16 / 25]], dtype=torch.float64),
    )


def test_sample_next_token_draws_from_the_checked_distribution():
    """The package's sampler and the checked distribution agree: with top_k = 2 it never draws outside the top 2,
    and its draw frequencies match the reference probabilities (6,000 seeded draws, 4 standard errors)."""
    from transformer_lite.chapters.exercises.ch8_language_model import _temperature_top_k_probs
    from transformer_lite.models.generation import sample_next_token

    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)).float()
    want = _temperature_top_k_probs(logits, 0.5, 2)[0]  # (0, 0, 9/25, 16/25)
    g = torch.Generator().manual_seed(0)
    n = 6000
    # (n,)
    draws = sample_next_token(logits.expand(n, 4), temperature=0.5, top_k=2, generator=g)[:, 0]
    freq = torch.bincount(draws, minlength=4).double() / n
    assert freq[0] == 0 and freq[1] == 0
    stderr = math.sqrt(float(want[2] * want[3]) / n)
    assert abs(float(freq[2] - want[2])) < 4 * stderr


# --------------------------------------------------------------------------- units (exercise 8.1) and cache size (8.4)
# Oracles: the definitions written here (a nat is 1 / ln 2 bits; perplexity e ** loss = 2 ** bits) and, for the
# cache, the formula of the exercise's solution, while the checker measures real KVCache tensors.

from transformer_lite.chapters.exercises import check_kv_cache_bytes, check_loss_units  # noqa: E402


@pytest.mark.parametrize(
    "fn",
    [
        lambda loss: (loss / math.log(2), math.exp(loss)),
        lambda loss: [loss * math.log2(math.e), 2 ** (loss / math.log(2))],
    ],
)
def test_loss_units_accepts_correct_solutions(fn, capsys):
    check_loss_units(fn)
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (lambda loss: (loss * math.log(2), math.exp(loss)), "multiplied by ln 2"),
        (lambda loss: (loss / math.log10(2), math.exp(loss)), "log10 instead of ln"),
        (lambda loss: (loss / math.log(2), 2**loss), "2 ** loss"),
        (lambda loss: (loss / math.log(2), math.exp(loss / math.log(2))), "exp(bits)"),
        (lambda loss: (math.exp(loss), loss / math.log(2)), "wrong order"),
        (lambda loss: loss / math.log(2), "expected a pair"),
    ],
)
def test_loss_units_names_the_mistake(fn, mistake):
    with pytest.raises(AssertionError, match=re.escape(mistake)):
        check_loss_units(fn)


def kv_bytes(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):
    return 2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number


def test_kv_cache_bytes_accepts_the_formula(capsys):
    check_kv_cache_bytes(kv_bytes)
    assert "all checks passed" in capsys.readouterr().out


def test_kv_cache_checker_leaves_the_readers_random_state_alone():
    # the checker seeds its own models; a reader's later torch.randn must not depend on it
    assert_leaves_global_random_state(check_kv_cache_bytes, kv_bytes)


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (lambda *a: kv_bytes(*a) // 2, "keys only"),
        (lambda L, k, d, n, b: kv_bytes(L, 2 * k, d, n, b), "counted the query heads"),
        (lambda *a: 8 * kv_bytes(*a), "bits instead of bytes"),
        (lambda L, k, d, n, b: kv_bytes(L, k, d, n, 1), "bytes per number left out"),
        (lambda L, k, d, n, b: kv_bytes(L, k, d, n + 1, b), "the cache measured"),
    ],
)
def test_kv_cache_bytes_names_the_mistake(fn, mistake):
    with pytest.raises(AssertionError, match=re.escape(mistake)):
        check_kv_cache_bytes(fn)


def test_units_and_cache_stubs_print_not_implemented(capsys):
    def stub(*args):
        raise NotImplementedError

    check_loss_units(stub)
    check_kv_cache_bytes(stub)
    assert capsys.readouterr().out.count("not implemented yet") == 2


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

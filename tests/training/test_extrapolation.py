"""Train short, test long (transformer_lite.training.extrapolation). Oracles: the parent
DecoderOnlyTransformer (with its learned table zeroed, for "none"), a forward pass written out
with torch's scaled_dot_product_attention and an ALiBi bias built from the paper's formula (for
"alibi"), plain-Python scoring loops and readers whose accuracy is known (for recency_accuracy),,
loops that find the last marked symbol (for make_recency_batch), and exact enumeration of
every sequence (for bag_of_tokens_ceiling)."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import transformer_lite as tl
from tests.conftest import F64, close
from transformer_lite.outputs import ModelOutput
from transformer_lite.training import extrapolation as ex

SETTINGS = settings(derandomize=True, max_examples=20, deadline=None)


def _config(n_layers=1, max_len=40):
    return tl.DecoderOnlyConfig(
        vocab_size=8, max_len=max_len, d_model=16, n_heads=4, n_layers=n_layers, d_ff=24
    )


def _model(scheme, n_layers=1, seed=0):
    torch.manual_seed(seed)
    return ex.PositionSchemeTransformer(_config(n_layers), scheme).double().eval()


def _ids(B=3, L=11, seed=1):
    return torch.randint(0, 8, (B, L), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rotary"])
def test_parent_schemes_are_the_parent_model(scheme):
    ours = _model(scheme)
    torch.manual_seed(0)
    parent = tl.DecoderOnlyTransformer(
        tl.DecoderOnlyConfig(**{**_config().to_dict(), "positional": scheme})
    )
    parent = parent.double().eval()
    assert ours.state_dict().keys() == parent.state_dict().keys()
    for name, value in parent.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
    x = _ids()
    close(ours(x).logits, parent(x).logits)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_none_is_the_learned_model_with_a_zero_table(n_layers):
    ours = _model("none", n_layers)
    parent = tl.DecoderOnlyTransformer(
        tl.DecoderOnlyConfig(**{**_config(n_layers).to_dict(), "positional": "learned"})
    ).double()
    missing = parent.load_state_dict(ours.state_dict(), strict=False).missing_keys
    assert missing == ["position_embedding.weight"]  # the only difference
    with torch.no_grad():
        parent.position_embedding.weight.zero_()
    x = _ids()
    close(ours(x).logits, parent.eval()(x).logits)


def _alibi_by_hand(model, ids):
    """The ALiBi forward pass written out: pre-norm blocks, GELU network, tied head, float64."""
    H = model.config.n_heads
    x = model.token_embedding(ids)  # (B, L, D), nothing added
    B, L, D = x.shape
    d = D // H
    # Press et al. (2022), Sec. 3: score(i, j) - m_h (i - j) with m_h = 2^(-8(h+1)/H), causal
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)], dtype=F64)
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    bias = -slopes[:, None, None] * (i - j).to(F64)  # (H, L, L)
    bias = bias.masked_fill(j > i, float("-inf"))
    for blk in model.blocks:
        a = blk.self_attn
        h = F.layer_norm(x, (D,), blk.norm1.weight, blk.norm1.bias, 1e-5)

        def split(t):
            return t.view(B, L, H, d).transpose(1, 2)  # (B, H, L, d)

        q, k, v = split(a.q_proj(h)), split(a.k_proj(h)), split(a.v_proj(h))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B, H, L, d)
        x = x + a.out_proj(out.transpose(1, 2).reshape(B, L, D))
        h = F.layer_norm(x, (D,), blk.norm2.weight, blk.norm2.bias, 1e-5)
        x = x + blk.ff.linear2(F.gelu(blk.ff.linear1(h)))
    x = F.layer_norm(x, (D,), model.final_norm.weight, model.final_norm.bias, 1e-5)
    return x @ model.token_embedding.weight.T  # (B, L, V)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_alibi_matches_the_forward_pass_written_out(n_layers):
    model = _model("alibi", n_layers)
    assert model.position_embedding is None
    with torch.no_grad():
        x = _ids(L=13)
        close(model(x).logits, _alibi_by_hand(model, x))


def test_none_and_alibi_start_from_the_sinusoidal_models_weights():
    sinusoidal = _model("sinusoidal").state_dict()
    for scheme in ("none", "alibi"):
        state = _model(scheme).state_dict()
        assert state.keys() == sinusoidal.keys()
        assert all(torch.equal(state[k], sinusoidal[k]) for k in state)


@SETTINGS
@given(seed=st.integers(0, 999), L=st.integers(3, 20))
def test_one_layer_without_positions_sees_a_bag_of_tokens(seed, L):
    """The reason "none" must fail: its last output ignores the order of the earlier tokens."""
    model = _model("none", 1)
    x = _ids(B=2, L=L, seed=seed)
    perm = torch.cat(
        (
            torch.randperm(L - 1, generator=torch.Generator().manual_seed(seed)),
            torch.tensor([L - 1]),
        )
    )
    with torch.no_grad():
        close(model(x[:, perm]).logits[:, -1], model(x).logits[:, -1], atol=1e-10, rtol=1e-9)


def test_two_layers_without_positions_do_see_the_order():
    """Not so with two layers (the causal mask leaks positions into layer 1): the argument needs one."""
    model = _model("none", 2)
    x = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 0]])
    swapped = torch.tensor([[2, 1, 3, 4, 5, 6, 7, 0]])
    with torch.no_grad():
        gap = (model(x).logits[:, -1] - model(swapped).logits[:, -1]).abs().max()
    assert gap > 1e-8


def test_unknown_scheme_is_rejected():
    with pytest.raises(ValueError, match="scheme"):
        ex.PositionSchemeTransformer(_config(), "t5")


def _recency_by_loops(tokens):
    """The answer written as a loop: the last marked symbol before the final token."""
    out = []
    for row in tokens.tolist():
        marked = [t for t in row[:-1] if t < ex.N_MARKED]
        out.append(marked[-1])
    return out


@SETTINGS
@given(seed=st.integers(0, 999), n=st.integers(2, 30), B=st.integers(1, 6))
def test_recency_batch_matches_a_loop(seed, n, B):
    tokens, answers = ex.make_recency_batch(B, n, torch.Generator().manual_seed(seed))
    assert tokens.shape == (B, n) and answers.shape == (B,)
    assert (tokens[:, -1] == ex.QUERY).all() and (tokens[:, 0] < ex.N_MARKED).all()
    assert (tokens[:, :-1] < ex.QUERY).all()
    assert answers.tolist() == _recency_by_loops(tokens)


class _Reader(torch.nn.Module):
    """Puts logit 1 on the last marked token (``recent``) or on the token at position ``at``."""

    def __init__(self, at=None):
        super().__init__()
        self.at = at

    def forward(self, ids):
        B, L = ids.shape
        if self.at is None:
            src = torch.tensor(_recency_by_loops(ids))
        else:
            src = ids[:, self.at]
        logits = F.one_hot(src, ex.VOCAB_SIZE).double()  # (B, V)
        # (B, L, V), as a model of the package returns it
        return ModelOutput(logits[:, None].expand(B, L, ex.VOCAB_SIZE), (), None)


def test_recency_accuracy_of_readers_with_known_answers():
    assert ex.recency_accuracy(_Reader(), [4, 16, 40]) == {4: 1.0, 16: 1.0, 40: 1.0}
    # position 0 is always marked: reading it is right exactly when no later token is marked
    acc = ex.recency_accuracy(_Reader(at=0), [2, 3], n_eval=4000)
    assert acc[2] == 1.0  # one token before the query: the answer is at position 0
    assert (
        abs(acc[3] - (0.75 + 0.25 / 4)) < 0.03
    )  # position 1 unmarked, or marked with the same symbol


@SETTINGS
@given(seed=st.integers(0, 999), n=st.integers(2, 20))
def test_recency_accuracy_matches_a_python_loop(seed, n):
    model = _model("rotary")
    got = ex.recency_accuracy(model, [n], n_eval=50, seed=seed)
    tokens, _ = ex.make_recency_batch(50, n, torch.Generator().manual_seed(seed + n))
    with torch.no_grad():
        logits = model(tokens).logits
    hits = 0
    for b, answer in enumerate(_recency_by_loops(tokens)):
        row = logits[b, n - 1].tolist()
        hits += row.index(max(row)) == answer
    assert got == {n: hits / 50}
    assert not model.training


def test_recency_accuracy_restores_training_mode():
    model = _model("none").train()
    ex.recency_accuracy(model, [6], n_eval=10)
    assert model.training


def _exact_ceiling(length, p=0.25):
    """Enumerate every sequence: position 0 marked, then marked with probability p."""
    n, total = length - 1, 0.0
    kinds = [("m", s) for s in range(ex.N_MARKED)] + [("f", None)]
    for rest in itertools.product(kinds, repeat=n - 1):
        for first in range(ex.N_MARKED):
            symbols = [first] + [s for k, s in rest if k == "m"]
            prob = (1 / ex.N_MARKED) * p ** (len(symbols) - 1) * (1 - p) ** (n - len(symbols))
            prob *= (1 / ex.N_MARKED) ** (len(symbols) - 1)
            best = max(symbols.count(s) for s in range(ex.N_MARKED)) / len(symbols)
            total += prob * best
    return total


@pytest.mark.parametrize("length", [2, 3, 5])
def test_bag_of_tokens_ceiling_by_enumeration(length):
    estimate = ex.bag_of_tokens_ceiling(length, n_eval=40_000)
    assert abs(estimate - _exact_ceiling(length)) < 0.01  # standard error below 0.002


def test_bag_of_tokens_ceiling_is_the_best_multiset_guess_on_its_sequences():
    n, N = 12, 300
    ceiling = ex.bag_of_tokens_ceiling(n, n_eval=N, seed=7)
    tokens, _ = ex.make_recency_batch(N, n, torch.Generator().manual_seed(7 + n))
    total = 0.0
    for row in tokens.tolist():
        marked = [t for t in row if t < ex.N_MARKED]
        total += max(marked.count(s) for s in range(ex.N_MARKED)) / len(marked)
    assert ceiling == pytest.approx(total / N, abs=1e-12)


def test_train_recency_lowers_the_loss_and_keeps_untrained_positions():
    torch.manual_seed(0)
    cfg = tl.DecoderOnlyConfig(
        vocab_size=8, max_len=24, d_model=16, n_heads=4, n_layers=1, d_ff=24, tie_embeddings=False
    )
    model = ex.PositionSchemeTransformer(cfg, "learned", embedding_std=0.3)
    table = model.position_embedding.weight.detach().clone()
    losses = ex.train_recency(model, 8, min_len=4, steps=60, seed=0)
    assert len(losses) == 60 and sum(losses[-10:]) < sum(losses[:10])
    after = model.position_embedding.weight.detach()
    assert torch.equal(after[8:], table[8:])  # positions >= 8 never trained: no gradient, no step
    assert not torch.equal(after[:8], table[:8])
    assert not model.training


def test_errors():
    with pytest.raises(ValueError, match="n_eval"):
        ex.recency_accuracy(_Reader(), [4], n_eval=0)
    with pytest.raises(ValueError, match="length"):
        ex.make_recency_batch(2, 1)
    with pytest.raises(ValueError, match="p_marked"):
        ex.make_recency_batch(2, 4, p_marked=0.0)
    with pytest.raises(ValueError, match="embedding_std"):
        ex.PositionSchemeTransformer(_config(), "none", embedding_std=0.0)
    with pytest.raises(ValueError, match="max_len"):
        ex.train_recency(_model("none"), 3, min_len=4)

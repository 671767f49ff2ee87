"""Toy tasks (transformer_lite.training.toy_tasks). Oracles: plain-Python reimplementations on lists
(reversal, sorting, counting, the shift, exact match written element by element), and
hand-written small cases."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite.outputs import ModelOutput
from transformer_lite.training import toy_tasks as tt

SETTINGS = settings(derandomize=True, max_examples=40, deadline=None)
# Ranges that several property tests below draw from (the same strategy, so the same examples).
BATCHES = st.integers(1, 5)
EXTRAS = st.integers(0, 4)  # positions beyond the shortest allowed length
SEEDS = st.integers(0, 999)


def _content(row):
    return [int(v) for v in row if int(v) != tt.PAD]


@SETTINGS
@given(
    batch=st.integers(1, 6),
    n_symbols=st.integers(1, 10),
    min_len=st.integers(1, 5),
    extra=EXTRAS,
    seed=st.integers(0, 10_000),
    task=st.sampled_from(["reverse", "sort"]),
)
def test_reversal_batch_matches_a_list_oracle(batch, n_symbols, min_len, extra, seed, task):
    max_len = min_len + extra
    src, tgt = tt.make_reversal_batch(
        batch, n_symbols, min_len, max_len, generator=torch.Generator().manual_seed(seed), task=task
    )
    assert src.shape == (batch, max_len) and tgt.shape == (batch, max_len + 1)
    assert src.dtype == tgt.dtype == torch.int64
    for s, t in zip(src.tolist(), tgt.tolist()):
        n = len(_content(s))
        assert min_len <= n <= max_len
        assert s[:n] == _content(s) and all(v == tt.PAD for v in s[n:])  # right-padded
        assert all(tt.FIRST_SYMBOL <= v < tt.FIRST_SYMBOL + n_symbols for v in s[:n])
        answer = s[:n][::-1] if task == "reverse" else sorted(s[:n])
        assert t == answer + [tt.EOS] + [tt.PAD] * (max_len - n)


def test_reversal_batch_is_reproducible_and_excludes_held_out():
    a = tt.make_reversal_batch(50, 3, 2, 3, generator=torch.Generator().manual_seed(0))
    b = tt.make_reversal_batch(50, 3, 2, 3, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    held = {tuple(_content(r)) for r in a[0][:10]}  # some of the 9 + 27 possible sequences
    src, _ = tt.make_reversal_batch(
        300, 3, 2, 3, generator=torch.Generator().manual_seed(1), exclude=held
    )
    assert not held & {tuple(_content(r)) for r in src}


def test_reversal_batch_errors():
    with pytest.raises(ValueError, match="batch_size"):
        tt.make_reversal_batch(0)
    with pytest.raises(ValueError, match="max_len"):
        tt.make_reversal_batch(2, min_len=5, max_len=4)
    with pytest.raises(ValueError, match="task"):
        tt.make_reversal_batch(2, task="rotate")
    with pytest.raises(ValueError, match="exclude holds"):
        tt.make_reversal_batch(2, n_symbols=2, min_len=1, max_len=1, exclude={(3,)})


def test_shift_right_by_hand():
    tgt = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    assert tt.shift_right(tgt).tolist() == [[1, 5, 6, 7], [1, 8, 2, 0]]
    assert tt.shift_right(torch.tensor([[9]]), bos_id=4).tolist() == [[4]]
    for bad in (
        torch.zeros(3, dtype=torch.long),
        torch.zeros(2, 3),
        torch.zeros(2, 0, dtype=torch.long),
    ):
        with pytest.raises(
            ValueError, match=r"shift_right: expected an integer tensor of shape \(B, T\)"
        ):
            tt.shift_right(bad)


def _exact_match_oracle(gen_row, tgt_row):
    want = tgt_row[: tgt_row.index(tt.EOS) + 1]
    got = gen_row[1:]
    return got[: len(want)] == want


def test_exact_match_against_a_list_oracle():
    tgt = torch.tensor([[5, 6, 2, 0], [5, 6, 2, 0], [5, 6, 2, 0], [7, 8, 9, 2], [7, 8, 9, 2]])
    gen = torch.tensor(
        [[1, 5, 6, 2, 2], [1, 5, 6, 7, 2], [1, 5, 6, 2, 9], [1, 7, 8, 9, 2], [1, 7, 8, 9, 9]]
    )
    got = tt.exact_match(gen, tgt).tolist()
    assert (
        got
        == [_exact_match_oracle(g, t) for g, t in zip(gen.tolist(), tgt.tolist())]
        == [True, False, True, True, False]
    )
    short = torch.tensor([[1, 5]])  # generation stopped early: too short to contain the target
    assert tt.exact_match(short, torch.tensor([[5, 6, 2]])).tolist() == [False]
    with pytest.raises(ValueError, match="exact_match"):
        tt.exact_match(gen[:2], tgt)


def test_mirror_positions_and_alignment_accuracy():
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    assert tt.mirror_positions(src).tolist() == [[2, 1, 0, -1, -1], [3, 2, 1, 0, -1]]
    expected = tt.mirror_positions(src)[:, :4]  # (B, L=4)
    w = torch.zeros(2, 4, 4)
    w[0, 0, 2] = w[0, 1, 1] = w[0, 2, 1] = 1.0  # hits, hit, miss (row 3 not counted)
    w[1, torch.arange(4), torch.tensor([3, 2, 1, 0])] = 1.0  # four hits
    assert tt.alignment_accuracy(w, expected) == pytest.approx(6 / 7)
    with pytest.raises(ValueError, match="alignment_accuracy"):
        tt.alignment_accuracy(w, expected[:, :3])
    with pytest.raises(ValueError, match="mirror_positions"):
        tt.mirror_positions(torch.zeros(3, dtype=torch.long))


@SETTINGS
@given(
    batch=BATCHES,
    seq_len=st.integers(1, 9),
    n_symbols=st.integers(1, 7),
    seed=SEEDS,
)
def test_histogram_counts_match_list_count(batch, seq_len, n_symbols, seed):
    ids, counts = tt.make_histogram_batch(
        batch, seq_len, n_symbols, generator=torch.Generator().manual_seed(seed)
    )
    assert ids.shape == counts.shape == (batch, seq_len)
    for row, c in zip(ids.tolist(), counts.tolist()):
        assert c == [row.count(v) for v in row]
        assert all(0 <= v < n_symbols for v in row)


def test_histogram_errors():
    with pytest.raises(ValueError, match="seq_len"):
        tt.make_histogram_batch(2, seq_len=0)


def test_symbols_round_trip_and_errors():
    assert tt.symbols_to_ids("abj") == [3, 4, 12]
    assert tt.ids_to_symbols([1, 3, 12, 2, 0]) == ["BOS", "a", "j", "EOS", "PAD"]
    with pytest.raises(ValueError, match="letters"):
        tt.symbols_to_ids("abk")
    with pytest.raises(ValueError, match="ids_to_symbols"):
        tt.ids_to_symbols([13])


# Delayed recall. Oracles: the answer read off each row as a Python list; models written by hand that read the
# answer (or a wrong position) directly, whose accuracy is known without any training.


@SETTINGS
@given(
    batch=BATCHES,
    lag=st.integers(1, 9),
    extra=EXTRAS,
    n_symbols=st.integers(2, 9),
    seed=SEEDS,
)
def test_delayed_recall_answer_is_the_token_lag_steps_before_the_last(
    batch, lag, extra, n_symbols, seed
):
    length = lag + 1 + extra
    tokens, answers = tt.make_delayed_recall_batch(
        batch, lag, n_symbols, length, generator=torch.Generator().manual_seed(seed)
    )
    assert tokens.shape == (batch, length) and answers.shape == (batch,)
    assert tokens.dtype == answers.dtype == torch.int64
    for row, answer in zip(tokens.tolist(), answers.tolist()):
        assert all(0 <= v < n_symbols for v in row)
        # the last token is row[::-1][0]; lag steps back is row[::-1][lag]
        assert answer == row[::-1][lag]


def test_delayed_recall_default_length_puts_the_answer_first_and_is_reproducible():
    tokens, answers = tt.make_delayed_recall_batch(
        200, 5, 4, generator=torch.Generator().manual_seed(3)
    )
    assert tokens.shape == (200, 6) and torch.equal(answers, tokens[:, 0])
    again = tt.make_delayed_recall_batch(200, 5, 4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(tokens, again[0]) and torch.equal(answers, again[1])
    assert set(tokens.flatten().tolist()) == {0, 1, 2, 3}  # every symbol is drawn


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(lag=0), "lag"),
        (dict(lag=3, length=3), "length"),
        (dict(lag=2, n_symbols=1), "n_symbols"),
        (dict(lag=2, batch_size=0), "batch_size"),
    ],
)
def test_delayed_recall_errors(kwargs, name):
    args = dict(batch_size=2) | kwargs
    with pytest.raises(ValueError, match=f"make_delayed_recall_batch: expected {name}"):
        tt.make_delayed_recall_batch(**args)


class _Reader(torch.nn.Module):
    """Logits that put all weight on the token `read_back` steps before each position (no learning needed)."""

    def __init__(self, read_back, n_symbols):
        super().__init__()
        self.read_back, self.n_symbols = read_back, n_symbols
        self.unused = torch.nn.Parameter(torch.zeros(()))  # something for the optimiser to hold

    def forward(self, ids):  # (B, L) -> (B, L, V)
        # source[:, t] = ids[:, t - read_back] (wrapping)
        source = torch.roll(ids, self.read_back, dims=1)
        logits = 100.0 * torch.nn.functional.one_hot(source, self.n_symbols).double() + self.unused
        return ModelOutput(logits, (), None)  # as a model of the package returns it


@pytest.mark.parametrize("lag, length", [(1, None), (4, None), (3, 9)])
def test_train_delayed_recall_scores_a_perfect_reader_one(lag, length):
    assert (
        tt.train_delayed_recall(
            _Reader(lag, 5), lag, steps=2, n_symbols=5, length=length, seed=7, n_eval=300
        )
        == 1.0
    )


@pytest.mark.parametrize("lag, length", [(1, 3), (4, 6), (3, 9)])
def test_train_delayed_recall_scores_a_wrong_reader_by_coincidence(lag, length):
    # reading one step too far back is right exactly where the two tokens coincide in the held-out sequences
    tokens, answers = tt.make_delayed_recall_batch(
        300, lag, 5, length, torch.Generator().manual_seed(7 + 10_000)
    )
    coincide = (
        sum(row[::-1][lag + 1] == a for row, a in zip(tokens.tolist(), answers.tolist())) / 300
    )
    got = tt.train_delayed_recall(
        _Reader(lag + 1, 5), lag, steps=2, n_symbols=5, length=length, seed=7, n_eval=300
    )
    assert got == pytest.approx(coincide)
    assert got < 0.5


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_train_delayed_recall_learns_a_short_lag():
    torch.manual_seed(0)
    from transformer_lite.models.recurrent_lm import GRUConfig, GRULanguageModel

    model = GRULanguageModel(GRUConfig(4, 16))
    assert tt.train_delayed_recall(model, lag=1, steps=150, n_symbols=4, lr=1e-2) > 0.95


# Delayed recall with a random prefix (max_prefix = P > 0): the offset stays k, the answer's absolute position moves.


@SETTINGS
@given(
    batch=BATCHES,
    lag=st.integers(1, 9),
    max_prefix=st.integers(1, 6),
    n_symbols=st.integers(2, 9),
    seed=SEEDS,
)
def test_random_prefix_keeps_the_answer_lag_steps_before_the_last(
    batch, lag, max_prefix, n_symbols, seed
):
    tokens, answers = tt.make_delayed_recall_batch(
        batch, lag, n_symbols, generator=torch.Generator().manual_seed(seed), max_prefix=max_prefix
    )
    length = tokens.shape[1]
    assert lag + 1 <= length <= lag + 1 + max_prefix and answers.shape == (batch,)
    for row, answer in zip(tokens.tolist(), answers.tolist()):
        assert all(0 <= v < n_symbols for v in row)
        assert answer == row[::-1][lag]  # k back from the last token, whatever the length


def test_random_prefix_lengths_cover_the_whole_range_uniformly():
    gen = torch.Generator().manual_seed(0)
    lengths = [
        tt.make_delayed_recall_batch(2, 3, 4, generator=gen, max_prefix=5)[0].shape[1]
        for _ in range(1200)
    ]
    assert set(lengths) == {4, 5, 6, 7, 8, 9}  # 3 + 1 + p for p = 0 .. 5
    # each of the 6 lengths about 200 times (binomial sd ~ 13)
    assert all(140 < lengths.count(n) < 260 for n in set(lengths))


def test_max_prefix_zero_is_the_original_task_bit_for_bit():
    # the original task by hand: lag + 1 uniform symbols, the answer the first of them
    expected = torch.randint(0, 5, (7, 4), generator=torch.Generator().manual_seed(11))
    for extra in ({}, {"max_prefix": 0}):
        tokens, answers = tt.make_delayed_recall_batch(
            7, 3, 5, generator=torch.Generator().manual_seed(11), **extra
        )
        assert torch.equal(tokens, expected) and torch.equal(answers, expected[:, 0])


def test_eval_lengths_by_hand():
    assert tt.delayed_recall_eval_lengths(3, 10, 2) == [(4, 4), (5, 3), (6, 3)]
    assert tt.delayed_recall_eval_lengths(1, 6, 5) == [(n, 1) for n in range(2, 8)]
    assert tt.delayed_recall_eval_lengths(5, 7) == [(6, 7)]
    with pytest.raises(ValueError, match="delayed_recall_eval_lengths: expected n_eval"):
        tt.delayed_recall_eval_lengths(3, 2, 2)


class _Spy(_Reader):
    """A `_Reader` that also records the length of every batch it reads."""

    def __init__(self, read_back, n_symbols):
        super().__init__(read_back, n_symbols)
        self.seen = []

    def forward(self, ids):
        self.seen.append((self.training, ids.shape[0], ids.shape[1]))
        return super().forward(ids)


def test_train_with_random_prefix_draws_lengths_and_tests_every_one():
    spy = _Spy(4, 5)
    got = tt.train_delayed_recall(
        spy, 4, steps=60, batch_size=3, n_symbols=5, seed=2, n_eval=50, max_prefix=3
    )
    assert got == 1.0  # reading 4 back is right at every length
    train = [n for training, _, n in spy.seen if training]
    assert len(train) == 60 and set(train) == {5, 6, 7, 8}
    held_out = [(n, b) for training, b, n in spy.seen if not training]
    assert held_out == [(5, 13), (6, 13), (7, 12), (8, 12)]  # 50 split over 4 lengths


class _FirstTokenReader(_Reader):
    """The shortcut of the original task: output the token at absolute position 0, whatever the length."""

    def forward(self, ids):
        first = ids[:, :1].expand_as(ids)  # (B, L)
        logits = 100.0 * torch.nn.functional.one_hot(first, self.n_symbols).double() + self.unused
        return ModelOutput(logits, (), None)


def test_the_position_zero_shortcut_is_perfect_only_without_a_prefix():
    lag, n_symbols, n_eval, prefix = 3, 5, 600, 4
    fixed = tt.train_delayed_recall(
        _FirstTokenReader(0, n_symbols), lag, steps=1, n_symbols=n_symbols, n_eval=n_eval
    )
    assert fixed == 1.0
    # with a prefix it is right when the answer is at position 0 (1 length in 5) or equals the first token
    gen = torch.Generator().manual_seed(0 + 10_000)
    hits = 0
    for length, count in tt.delayed_recall_eval_lengths(lag, n_eval, prefix):
        tokens, answers = tt.make_delayed_recall_batch(count, lag, n_symbols, length, gen)
        hits += sum(row[0] == a for row, a in zip(tokens.tolist(), answers.tolist()))
    moved = tt.train_delayed_recall(
        _FirstTokenReader(0, n_symbols),
        lag,
        steps=1,
        n_symbols=n_symbols,
        n_eval=n_eval,
        max_prefix=prefix,
    )
    assert moved == pytest.approx(hits / n_eval)
    assert 0.2 < moved < 0.5  # expected 1/5 + 4/5 * 1/5 = 0.36


@pytest.mark.parametrize(
    "call, match",
    [
        (
            dict(batch_size=2, lag=2, max_prefix=-1),
            "make_delayed_recall_batch: expected max_prefix",
        ),
        (dict(batch_size=2, lag=2, length=5, max_prefix=2), "expected length None"),
    ],
)
def test_random_prefix_errors(call, match):
    with pytest.raises(ValueError, match=match):
        tt.make_delayed_recall_batch(**call)


def test_train_with_random_prefix_errors_before_training():
    spy = _Spy(2, 4)
    with pytest.raises(ValueError, match="train_delayed_recall: expected length None"):
        tt.train_delayed_recall(spy, 2, steps=5, n_symbols=4, length=6, max_prefix=2)
    with pytest.raises(ValueError, match="delayed_recall_eval_lengths: expected n_eval"):
        tt.train_delayed_recall(spy, 2, steps=5, n_symbols=4, n_eval=2, max_prefix=2)
    with pytest.raises(ValueError, match="train_delayed_recall: expected max_prefix"):
        tt.train_delayed_recall(spy, 2, steps=5, n_symbols=4, max_prefix=-2)
    assert spy.seen == []  # no step was taken

"""Tests for transformer_lite.models.generation: the one decode loop and sample_next_token.

Oracles: explicit loops written out here (the loops each model ran before the loop was shared):
the step sees the prompt first and then each chosen token except the last; sampling draws one
``torch.multinomial`` per step from the caller's generator (so a hand loop with a generator
seeded alike picks the same tokens); greedy is the arg-max with the lowest id on ties; after
``eos_id`` a row is padded with ``eos_id`` and the loop stops when every row is done. The models'
``generate`` against the hand loop over their ``forward`` (bit-equal: the same calls).
"""

import pytest
import torch

from transformer_lite.models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from transformer_lite.models.generation import decode, sample_next_token
from transformer_lite.models.recurrent_lm import GRUConfig, GRULanguageModel
from transformer_lite.outputs import Generation, KVCache

V = 7


class ScriptedStep:
    """A step that records what it is fed and returns logits drawn from its own generator."""

    def __init__(self, seed=0):
        self.fed = []
        self.g = torch.Generator().manual_seed(seed)

    def __call__(self, feed):
        self.fed.append(feed.clone())
        return torch.randn(feed.shape[0], V, generator=self.g)


def test_the_step_sees_the_prompt_then_each_token_but_the_last():
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    step = ScriptedStep()
    out = decode(step, prompt, 4, temperature=0.9, generator=torch.Generator().manual_seed(1))
    assert isinstance(out, Generation)
    assert out.tokens.shape == (2, 7) and out.logits.shape == (2, 4, V)
    assert torch.equal(out.tokens[:, :3], prompt)
    assert len(step.fed) == 4 and torch.equal(step.fed[0], prompt)
    for k in range(1, 4):  # each later step is fed the token chosen just before
        assert torch.equal(step.fed[k], out.tokens[:, 2 + k : 3 + k])


def test_one_multinomial_per_step_from_the_callers_generator(monkeypatch):
    prompt = torch.tensor([[0], [1], [2]])
    out = decode(ScriptedStep(3), prompt, 6, top_k=4, generator=torch.Generator().manual_seed(5))
    # the hand loop: the same logits, the same generator, one draw per step
    g, step, tokens = torch.Generator().manual_seed(5), ScriptedStep(3), prompt
    feed = prompt
    for _ in range(6):
        logits = step(feed)
        scaled = logits.float()
        kth = torch.topk(scaled, 4, dim=-1).values[:, -1:]
        probs = torch.softmax(scaled.masked_fill(scaled < kth, float("-inf")), dim=-1)
        feed = torch.multinomial(probs, 1, generator=g)
        tokens = torch.cat((tokens, feed), dim=1)
    assert torch.equal(out.tokens, tokens)
    calls = []
    real = torch.multinomial

    def counting(*args, **kwargs):
        calls.append(kwargs.get("generator"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "multinomial", counting)
    mine = torch.Generator().manual_seed(0)
    state = torch.get_rng_state()
    decode(ScriptedStep(), prompt, 5, generator=mine)
    assert calls == [mine] * 5
    assert torch.equal(torch.get_rng_state(), state), "the global generator is not touched"
    calls.clear()
    decode(ScriptedStep(), prompt, 5, temperature=0)
    assert calls == [], "greedy draws nothing"


def test_greedy_is_the_argmax_with_the_lowest_id_on_ties():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    out = decode(lambda feed: logits, torch.zeros(2, 1, dtype=torch.long), 3, temperature=0)
    assert out.tokens[:, 1:].tolist() == [[1, 1, 1], [0, 0, 0]]
    assert torch.equal(sample_next_token(logits, 0), logits.argmax(dim=-1, keepdim=True))


def test_eos_pads_finished_rows_and_stops_when_all_are_done():
    # row 0 picks 2 (eos) at once, row 1 picks 1 then 2: then every row is done
    script = iter([torch.tensor([2, 1]), torch.tensor([0, 2]), torch.tensor([0, 0])])

    def step(feed):
        return torch.nn.functional.one_hot(next(script), 4).float() * 5

    out = decode(step, torch.tensor([[3], [3]]), 10, temperature=0, eos_id=2)
    assert out.tokens.tolist() == [[3, 2, 2], [3, 1, 2]]  # row 0's own choice 0 replaced by eos
    assert out.logits.shape == (2, 2, 4)
    never = decode(
        lambda f: torch.eye(4)[[0, 1]] * 5, torch.tensor([[3], [3]]), 3, temperature=0, eos_id=2
    )
    assert never.tokens.tolist() == [[3, 0, 0, 0], [3, 1, 1, 1]]  # no eos: max_new_tokens steps


def test_zero_steps_and_errors():
    prompt = torch.tensor([[1, 2]])
    out = decode(ScriptedStep(), prompt, 0)
    assert out.tokens is prompt and out.logits.shape == (1, 0, 0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        decode(ScriptedStep(), prompt, -1)


def tiny_lm(**overrides):
    torch.manual_seed(0)
    fields = dict(vocab_size=V, max_len=6, d_model=12, n_heads=3, n_layers=2, d_ff=16, dropout=0.1)
    return DecoderOnlyTransformer(DecoderOnlyConfig(**{**fields, **overrides})).train()


@pytest.mark.parametrize("use_cache", [True, False])
def test_decoder_only_generate_is_the_hand_loop_over_forward(use_cache):
    model = tiny_lm()
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    new = 3 if use_cache else 8  # without the cache the window slides past max_len
    out = model.generate(
        prompt, new, temperature=0.8, top_k=5, use_cache=use_cache,
        generator=torch.Generator().manual_seed(2),
    )  # fmt: skip
    assert model.training, "the mode is restored"
    model.eval()
    g, tokens, feed, step_logits = torch.Generator().manual_seed(2), prompt, prompt, []
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for _ in range(new):
            window = feed if use_cache else tokens[:, -6:]
            logits = model(window, cache=cache).logits[:, -1]
            step_logits.append(logits)
            feed = sample_next_token(logits, 0.8, 5, g)
            tokens = torch.cat((tokens, feed), dim=1)
    assert torch.equal(out.tokens, tokens)
    assert torch.equal(out.logits, torch.stack(step_logits, dim=1))


def test_decoder_only_generate_with_a_mask_is_the_hand_loop():
    model = tiny_lm(max_len=12).eval()
    prompt = torch.tensor([[0, 2, 3], [4, 5, 6]])
    mask = torch.tensor([[False, True, True], [True, True, True]])
    out = model.generate(prompt, 4, temperature=0, use_cache=False, attention_mask=mask)
    tokens, m, step_logits = prompt, mask, []
    with torch.no_grad():
        for _ in range(4):
            logits = model(tokens, attention_mask=m).logits[:, -1]
            step_logits.append(logits)
            tokens = torch.cat((tokens, logits.argmax(-1, keepdim=True)), dim=1)
            m = torch.cat((m, torch.ones(2, 1, dtype=torch.bool)), dim=1)
    assert torch.equal(out.tokens, tokens)
    assert torch.equal(out.logits, torch.stack(step_logits, dim=1))


def test_gru_generate_is_the_hand_loop_with_the_state():
    torch.manual_seed(0)
    gru = GRULanguageModel(GRUConfig(V, 8, n_layers=2, dropout=0.2)).train()
    prompt = torch.tensor([[1, 2], [3, 4]])
    out = gru.generate(prompt, 5, temperature=1.3, generator=torch.Generator().manual_seed(9))
    assert gru.training
    gru.eval()
    g, tokens, feed, state, step_logits = torch.Generator().manual_seed(9), prompt, prompt, None, []
    with torch.no_grad():
        for _ in range(5):
            logits, _, state = gru(feed, cache=state)
            step_logits.append(logits[:, -1])
            feed = sample_next_token(logits[:, -1], 1.3, None, g)
            tokens = torch.cat((tokens, feed), dim=1)
    assert torch.equal(out.tokens, tokens)
    assert torch.equal(out.logits, torch.stack(step_logits, dim=1))

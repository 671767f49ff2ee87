"""The exercises of chapter 9 (build your own GPT): check_gpt_module, check_training_loop,
check_cached_generation and check_capstone.

Oracle: learner-style classes and functions written here from the formulas (GPT-2: token and
position embeddings, pre-norm blocks, a final norm, an output layer tied to the token embedding;
the training loop of chapter 8; incremental decoding with a key/value cache), independently of the
checkers' own variant helpers. The right answers must pass and print "all checks passed"; each
deliberately wrong one, one classic mistake apiece, must be rejected with an AssertionError naming
that mistake; a stub raising NotImplementedError must print "not implemented yet". The checker's own
reference loop must give train()'s losses and weights, bit for bit.
"""

import copy
import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lite as tl
from tests.chapters.learners import BlockReference, LayerNormReference, MHAReference
from tests.conftest import (
    CheckerCases,
    assert_leaves_global_random_state,
    assert_prints_not_implemented,
)
from transformer_lite.chapters.exercises import ch9_build_a_gpt as ch9
from transformer_lite.chapters.exercises.ch9_build_a_gpt import (
    check_cached_generation,
    check_capstone,
    check_gpt_module,
    check_training_loop,
)
from transformer_lite.training.data import random_batch
from transformer_lite.training.train import TrainConfig, learning_rate, lm_loss, train

CASES = CheckerCases()


# =========================================================================== the learner's modules
# Chapter 1's attention and chapter 4's layer norm, feed-forward network and block, as a learner
# writes them (tests/chapters/learners.py); here the block holds the learner's attention too.


class GPTBlock(BlockReference):
    def attention(self, d_model, n_heads, dropout):
        return MHAReference(d_model, n_heads)


# =========================================================================== the GPT
# cls(vocab_size, max_len, d_model, n_heads, n_layers, d_ff, dropout=0.0); forward(ids (B, L)) -> (B, L, V)


@CASES.passes(check_gpt_module)
class GPTReference(nn.Module):
    """GPT-2 (Radford et al., 2019) with the ReLU network of chapter 4; one step per method."""

    norm_first = True

    def __init__(self, vocab_size, max_len, d_model, n_heads, n_layers, d_ff, dropout=0.0):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.embedding_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            GPTBlock(d_model, n_heads, d_ff, dropout, norm_first=self.norm_first)
            for _ in range(n_layers)
        )
        self.final_norm = LayerNormReference(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tie()

    def tie(self):
        self.lm_head.weight = self.token_embedding.weight

    def embed_positions(self, L):  # (L, D)
        return self.position_embedding(torch.arange(L))

    def embed(self, ids):
        return self.token_embedding(ids) + self.embed_positions(ids.shape[1])

    def mask(self, L):
        return torch.ones(L, L, dtype=torch.bool).tril()

    def head(self, x):
        return self.lm_head(self.final_norm(x))

    def forward(self, input_ids):
        x = self.embedding_dropout(self.embed(input_ids))
        mask = self.mask(input_ids.shape[1])
        for block in self.blocks:
            x = block(x, attn_mask=mask)
        return self.head(x)


@CASES.named(check_gpt_module, "final norm missing")
class GPTNoFinalNorm(GPTReference):
    def head(self, x):
        return self.lm_head(x)


@CASES.named(check_gpt_module, "head not tied")
class GPTUntied(GPTReference):
    def tie(self):
        pass


@CASES.named(check_gpt_module, "position embedding missing")
class GPTNoPositions(GPTReference):
    def embed_positions(self, L):
        return 0


@CASES.named(check_gpt_module, "position embedding offset")
class GPTPositionsFromOne(GPTReference):
    def embed_positions(self, L):
        return self.position_embedding.weight[1 : L + 1]


@CASES.named(check_gpt_module, "causal mask missing")
class GPTNoMask(GPTReference):
    def mask(self, L):
        return torch.ones(L, L, dtype=torch.bool)  # every key allowed


@CASES.named(check_gpt_module, "post-norm instead of pre-norm")
class GPTPostNorm(GPTReference):
    norm_first = False


@CASES.named(check_gpt_module, "embedding scaled by sqrt(d_model)")
class GPTScaledEmbedding(GPTReference):
    def embed(self, ids):
        return super().embed(ids) * math.sqrt(self.token_embedding.embedding_dim)


@CASES.named(check_gpt_module, "dropout active in eval mode")
class GPTDropoutAlwaysOn(GPTReference):
    def embed(self, ids):
        return F.dropout(super().embed(ids), p=0.2, training=True)


@CASES.named(check_gpt_module, "part of forward is cut from the graph")
class GPTDetachedEmbedding(GPTReference):
    def embed(self, ids):
        return super().embed(ids).detach()


@CASES.named(check_gpt_module, "could not copy the package's weights")
class GPTOtherNames(GPTReference):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wpe = self.position_embedding
        del self.position_embedding

    def embed_positions(self, L):
        return self.wpe(torch.arange(L))


class BlockStub(GPTBlock):
    def forward(self, x, attn_mask=None):
        raise NotImplementedError


@CASES.named(check_gpt_module, "paste your code of chapters 1 and 4")
class GPTWithStubBlocks(GPTReference):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for block in self.blocks:
            block.__class__ = BlockStub


# =========================================================================== the training loop
# fn(model, train_ids, cfg, progress=True) -> the loss of every step


def _optimizer(model, cfg):
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": matrices, "weight_decay": cfg.weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def _loop(model, train_ids, cfg, loss_fn=None, order="right", schedule=True, train_mode=True):
    """The loop of chapter 8 with one switch per step, as a learner might get each one wrong."""
    torch.manual_seed(cfg.seed)
    batches = torch.Generator().manual_seed(cfg.seed)
    optimizer = _optimizer(model, cfg)
    if train_mode:
        model.train()
    losses = []
    for step in range(cfg.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg) if schedule else cfg.lr
        x, y = random_batch(train_ids, cfg.batch_size, cfg.context, batches)
        logits = model(x)
        loss = (loss_fn or (lambda logits, x, y: lm_loss(logits, y)))(logits, x, y)
        if order == "right":
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
        elif order == "no zero_grad":
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
        elif order == "no clip":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        elif order == "step first":
            optimizer.zero_grad()
            optimizer.step()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        elif order == "step, then zero_grad, then backward":
            optimizer.step()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        losses.append(loss.item())
    return losses


@CASES.passes(check_training_loop)
def train_reference(model, train_ids, cfg, progress=True):
    return _loop(model, train_ids, cfg)


@CASES.named(check_training_loop, "targets not shifted")
def train_targets_not_shifted(model, train_ids, cfg, progress=True):
    return _loop(model, train_ids, cfg, loss_fn=lambda logits, x, y: lm_loss(logits, x))


def wrong_loop(name, phrase, **switches):
    """Register ``_loop`` with ``switches`` turned, as the wrong loop ``name`` whose message contains
    ``phrase``."""

    def fn(model, train_ids, cfg, progress=True):
        return _loop(model, train_ids, cfg, **switches)

    fn.__name__ = fn.__qualname__ = name
    CASES.named(check_training_loop, phrase)(fn)


wrong_loop("train_without_zero_grad", "zero_grad missing", order="no zero_grad")
wrong_loop("train_without_clipping", "no clipping", order="no clip")
wrong_loop("train_constant_lr", "schedule not applied", schedule=False)
wrong_loop("train_in_eval_mode", "model left in eval mode", train_mode=False)


@CASES.named(check_training_loop, "loss averaged wrongly")
def train_summed_loss(model, train_ids, cfg, progress=True):
    def summed(logits, x, y):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum")

    return _loop(model, train_ids, cfg, loss_fn=summed)


@CASES.named(check_training_loop, "loss averaged wrongly")
def train_sum_over_positions(model, train_ids, cfg, progress=True):
    def per_sequence(logits, x, y):  # summed over the positions, averaged over the batch
        nll = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (B, L)
        return nll.sum(dim=1).mean()

    return _loop(model, train_ids, cfg, loss_fn=per_sequence)


wrong_loop("train_step_before_backward", "optimizer stepped before backward", order="step first")
wrong_loop(
    "train_step_with_stale_gradients",
    "optimizer stepped before backward",
    order="step, then zero_grad, then backward",
)


@CASES.named(check_training_loop, "expected one loss per step")
def train_returns_last_loss_only(model, train_ids, cfg, progress=True):
    return _loop(model, train_ids, cfg)[-1:]


@CASES.named(check_training_loop, "expected the list of the")
def train_returns_nothing(model, train_ids, cfg, progress=True):
    _loop(model, train_ids, cfg)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()


def test_package_model_and_train_pass(capsys):
    """The package's own model and loop are what the checkers compare with."""

    def package_train(model, train_ids, cfg, progress=True):
        # the checker hands out a GPT whose call returns the logits (the learner's contract);
        # the package's loop reads ModelOutput.logits: the same object as the package's class
        handed_out, model.__class__ = model.__class__, tl.DecoderOnlyTransformer
        try:
            return train(model, train_ids, train_ids[:50], cfg, progress=False).step_loss
        finally:
            model.__class__ = handed_out

    assert check_training_loop(package_train) is None
    assert "check_training_loop: all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [3, 8])
def test_checker_reference_loop_is_train(seed):
    """The checker's mistake-free variant is train() bit for bit (so each variant differs from it
    only by its mistake)."""
    cfg = TrainConfig(steps=4, batch_size=3, context=6, warmup_steps=2, grad_clip=0.05, seed=seed)
    cfg = TrainConfig(**{**cfg.__dict__, "eval_every": 4, "eval_batches": 1})
    ids = torch.randint(0, 7, (300,), generator=torch.Generator().manual_seed(0))
    a = ch9._train_model(7, 6, seed)
    b = copy.deepcopy(a)
    history = train(a, ids, ids[:60], cfg, progress=False)
    losses = ch9._train_variant(b, ids, cfg)
    assert losses == history.step_loss
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_training_mistakes_change_the_run():
    """Every variant the checker names differs from the right run (else its message could never
    be the one reached), on the checker's own settings."""
    cfg = TrainConfig(steps=4, batch_size=3, context=6, lr=2e-2, min_lr=2e-3, warmup_steps=2)
    cfg = TrainConfig(**{**cfg.__dict__, "grad_clip": 0.05, "seed": 3})
    ids = torch.randint(0, 7, (400,), generator=torch.Generator().manual_seed(1))
    initial = ch9._train_model(7, 6, 3)
    runs = {}
    for variant in [None, *ch9._TRAIN_MISTAKES.values()]:
        model = copy.deepcopy(initial)
        losses = ch9._train_variant(model, ids, cfg, variant)
        runs[variant] = (losses, ch9._flat(model))
    right = runs.pop(None)
    for variant, run in runs.items():
        assert not ch9._same_run(*run, *right), variant


# =========================================================================== generation with a cache
# cls(...) with forward(input_ids, cache=None); generate(model, ids, n, temperature=0.0, use_cache=True,
# generator=None) -> (B, L + n)


class CachedReference(GPTReference):
    """Incremental decoding (Shazeer, 2019): the new tokens' keys and values appended per layer."""

    def position_ids(self, start, L):
        return torch.arange(start, start + L)

    def store(self, cache, i, k, v):
        if i < len(cache.layers):
            k = torch.cat([cache.layers[i][0], k], dim=2)
            v = torch.cat([cache.layers[i][1], v], dim=2)
            cache.layers[i] = (k, v)
        else:
            cache.layers.append((k, v))
        return k, v

    def cached_mask(self, L, S):
        return tl.causal_mask(L, S)

    def forward(self, input_ids, cache=None):
        if cache is None:
            return super().forward(input_ids)
        L = input_ids.shape[1]
        positions = self.position_ids(len(cache), L)
        x = self.token_embedding(input_ids) + self.position_embedding(positions)
        for i, block in enumerate(self.blocks):  # pre-norm, in eval mode
            attn, h = block.self_attn, block.norm1(x)
            q, k, v = (attn.split(t) for t in attn.project(h, h, h))
            k, v = self.store(cache, i, k, v)
            heads, _ = attn.attend(q, k, v, self.cached_mask(L, k.shape[2]))
            x = x + attn.output(attn.merge(heads))
            x = x + block.ff(block.norm2(x))
        return self.head(x)


class CachedNoOffset(CachedReference):
    def position_ids(self, start, L):
        return torch.arange(L)


class CachedNotExtended(CachedReference):
    def store(self, cache, i, k, v):
        if i < len(cache.layers):  # reads the cache but stores only the new keys and values
            cached = cache.layers[i]
            cache.layers[i] = (k, v)
            return torch.cat([cached[0], k], dim=2), torch.cat([cached[1], v], dim=2)
        cache.layers.append((k, v))
        return k, v


class CachedTopLeft(CachedReference):
    def cached_mask(self, L, S):
        return torch.ones(L, S, dtype=torch.bool).tril()


@dataclass(frozen=True)
class Decoding:
    """How ``generate_reference`` decodes: the defaults are right; each mistake below turns one switch."""

    refeed: bool = False  # the whole sequence fed at every step, not the newest token
    position: int = -1  # the position whose logits give the next token
    new_cache: bool = False  # a fresh cache at every step


def generate_reference(
    model,
    input_ids,
    max_new_tokens,
    temperature=0.0,
    use_cache=True,
    generator=None,
    how=Decoding(),
):
    tokens, cache = input_ids, (tl.KVCache() if use_cache else None)
    for step in range(max_new_tokens):
        fed = tokens if how.refeed or not use_cache or step == 0 else tokens[:, -1:]
        if use_cache and how.new_cache:
            cache = tl.KVCache()
        logits = model(fed, cache=cache) if use_cache else model(fed)
        nxt = tl.sample_next_token(logits[:, how.position], temperature, generator=generator)
        tokens = torch.cat([tokens, nxt], dim=1)
    return tokens


def generate_refeeds(*args, **kwargs):
    return generate_reference(*args, **kwargs, how=Decoding(refeed=True))


def generate_first_position(*args, **kwargs):
    return generate_reference(*args, **kwargs, how=Decoding(position=0))


def generate_new_cache_each_step(*args, **kwargs):
    return generate_reference(*args, **kwargs, how=Decoding(new_cache=True))


def generate_one_more(model, input_ids, max_new_tokens, **kwargs):
    return generate_reference(model, input_ids, max_new_tokens + 1, **kwargs)


def generate_one_less(model, input_ids, max_new_tokens, **kwargs):
    return generate_reference(model, input_ids, max(max_new_tokens - 1, 0), **kwargs)


def generate_greedy_always(model, input_ids, max_new_tokens, temperature=0.0, **kwargs):
    return generate_reference(model, input_ids, max_new_tokens, temperature=0.0, **kwargs)


def test_cached_generation_passes(capsys):
    assert check_cached_generation(CachedReference, generate_reference) is None
    assert "check_cached_generation: all checks passed" in capsys.readouterr().out


def test_package_generate_agrees_with_reference():
    """The oracle of the generation checks: tl's generate, cached and uncached, is the reference's."""
    torch.manual_seed(0)
    model = tl.DecoderOnlyTransformer(ch9.reference_config(11, 10, 8, 2, 2, 17)).eval()
    prompt = torch.randint(0, 11, (2, 3))

    def logits_only(ids, cache=None):  # the learner's contract: a call returns the logits
        return model(ids, cache=cache).logits

    for use_cache in (True, False):
        with torch.no_grad():
            ours = generate_reference(logits_only, prompt, 6, use_cache=use_cache)
        assert torch.equal(ours, model.generate(prompt, 6, temperature=0.0).tokens)


@pytest.mark.parametrize(
    "cls, generate, phrase",
    [
        (CachedNoOffset, generate_reference, "position ids not offset by the cache length"),
        (CachedNotExtended, generate_reference, "cache not extended"),
        (CachedTopLeft, generate_reference, "causal mask aligned top-left"),
        (CachedReference, generate_refeeds, "whole prompt re-fed each step with the cache"),
        (CachedReference, generate_one_more, "off by one in the number of new tokens"),
        (CachedReference, generate_one_less, "off by one in the number of new tokens"),
        (CachedReference, generate_first_position, "logits of the wrong position"),
        (CachedReference, generate_new_cache_each_step, "a new cache at every step"),
        (CachedReference, generate_greedy_always, "temperature ignored"),
        (GPTNoFinalNorm, generate_reference, "make MyGPT pass check_gpt_module first"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_cached_generation_mistakes_are_named(cls, generate, phrase):
    with pytest.raises(AssertionError, match=phrase):
        check_cached_generation(cls, generate)


# =========================================================================== the capstone
# train_fn(corpus) -> (model, losses); generate as above; record: a dict the checker fills


def _capstone_train(corpus, cls=CachedReference, steps=200):
    torch.manual_seed(0)
    model = cls(len(corpus.vocab), 32, 32, 4, 1, 64)
    with torch.no_grad():  # GPT-2's small initialization, as MyGPT's constructor gives it
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif "bias" in name:
                p.zero_()
    cfg = TrainConfig(steps=steps, batch_size=16, context=32, lr=1e-2, min_lr=1e-3, warmup_steps=20)
    return model, _loop(model, corpus.train_ids, cfg)


@pytest.fixture(scope="module")
def trained():
    """A small learner-style GPT trained briefly on chapter 8's corpus (a few seconds)."""
    from transformer_lite.training.data import load_shakespeare

    try:
        corpus = load_shakespeare()
    except FileNotFoundError as exc:
        pytest.skip(f"the Shakespeare corpus is not installed ({exc})")
    return _capstone_train(corpus)


@pytest.mark.slow
def test_capstone_passes_and_records(trained, capsys):
    record = {}
    assert check_capstone(lambda corpus: copy.deepcopy(trained), generate_reference, record) is None
    out = capsys.readouterr().out
    assert "check_capstone: all checks passed" in out
    assert record["val_loss"] < record["unigram_loss"] - ch9.CAPSTONE_MARGIN
    assert record["logit_difference"] <= 1e-8 and len(record["losses"]) == 200
    assert record["sample"].startswith("HAMLET\n") and set(record) >= {"model", "greedy", "seconds"}
    # the baseline on the checker's own windows, beside the whole held-out text's
    assert abs(record["unigram_window_loss"] - record["unigram_loss"]) < 0.1


def test_unigram_window_loss_scores_the_windows_targets():
    # training text "aaab": p(a) = 3/4, p(b) = 1/4; targets a, b, b in two windows
    corpus = type("Corpus", (), {"train_ids": torch.tensor([0, 0, 0, 1]), "vocab": "ab"})
    windows = [(None, torch.tensor([[0, 1]])), (None, torch.tensor([[1]]))]
    by_hand = (-(math.log(3 / 4) + math.log(1 / 4)) / 2 - math.log(1 / 4)) / 2
    assert ch9.unigram_window_loss(corpus, windows) == pytest.approx(by_hand, rel=1e-12)


def _untrained(corpus):
    torch.manual_seed(0)
    return CachedReference(len(corpus.vocab), 32, 32, 4, 1, 64), []


def _package_model(corpus):
    cfg = ch9.reference_config(len(corpus.vocab), 32, 32, 4, 1, 64)
    return tl.DecoderOnlyTransformer(cfg), []


def _package_attention_inside(corpus):
    model, losses = _untrained(corpus)
    model.blocks[0].self_attn = tl.MultiHeadAttention(32, 4)
    return model, losses


def _returns_losses_only(corpus):
    return [3.0, 2.5]


@pytest.mark.slow
@pytest.mark.parametrize(
    "make, generate, phrase",
    [
        ("untrained", generate_reference, "not 0.5 below the unigram baseline"),
        ("package model", generate_reference, "contains the package's DecoderOnlyTransformer"),
        ("package attention", generate_reference, "contains the package's MultiHeadAttention"),
        ("losses only", generate_reference, "must return \\(model, losses\\)"),
        ("no final norm", generate_reference, "logits\\s+differ from your model's"),
        ("trained", generate_new_cache_each_step, "cached generation differs from uncached"),
        ("trained", generate_one_more, "off by one in the number of new tokens"),
    ],
)
def test_capstone_mistakes_are_named(trained, make, generate, phrase):
    def no_final_norm(corpus):
        model, losses = copy.deepcopy(trained)
        model.__class__ = type("NoFinalNorm", (CachedReference,), {"head": GPTNoFinalNorm.head})
        return model, losses

    train_fn = {
        "untrained": _untrained,
        "package model": _package_model,
        "package attention": _package_attention_inside,
        "losses only": _returns_losses_only,
        "no final norm": no_final_norm,
        "trained": lambda corpus: copy.deepcopy(trained),
    }[make]
    with pytest.raises(AssertionError, match=phrase):
        check_capstone(train_fn, generate)


# =========================================================================== stubs and random state


def _stub(*args, **kwargs):
    raise NotImplementedError


class GPTStub(GPTReference):
    def __init__(self, *args, **kwargs):  # the constructor's tie line is still the stub's raise
        raise NotImplementedError


@pytest.mark.parametrize(
    "check, args",
    [
        (check_gpt_module, (GPTStub,)),
        (check_training_loop, (_stub,)),
        (check_cached_generation, (GPTStub, _stub)),
        (check_cached_generation, (CachedReference, _stub)),
        (check_capstone, (_stub, _stub)),
    ],
    ids=["gpt", "train", "cache-class", "cache-generate", "capstone"],
)
def test_stub_prints_not_implemented(check, args, capsys):
    assert_prints_not_implemented(check, capsys, *args)


@pytest.mark.parametrize(
    "check, args",
    [
        (check_gpt_module, (GPTReference,)),
        (check_training_loop, (train_reference,)),
        (check_cached_generation, (CachedReference, generate_reference)),
    ],
    ids=["gpt", "train", "cache"],
)
def test_checkers_leave_the_global_random_state_alone(check, args):
    assert_leaves_global_random_state(check, *args)

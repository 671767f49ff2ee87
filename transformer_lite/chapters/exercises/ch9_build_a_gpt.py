"""Exercise checkers of chapter 9, ``notebooks/09_build_a_gpt.ipynb``: the learner's GPT built from the
modules of chapters 1 and 4, its training loop, generation with a key/value cache, and the capstone
(that GPT trained on chapter 8's corpus).

The oracles are the package's: :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer`
(pre-norm, learned positions, ReLU feed-forward networks, output layer tied to the token embedding),
whose weights are copied into the learner's model, :func:`~transformer_lite.training.train.train` and
:meth:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer.generate`.
"""

from __future__ import annotations

import copy
import math
import time
from collections import Counter
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from ...nn.attention import scaled_dot_product_attention
from ...nn.masks import causal_mask
from ...outputs import KVCache
from ...training.data import load_shakespeare, random_batch
from ...training.train import TrainConfig, learning_rate, lm_loss, train
from . import _checking as checking
from ._checking import NotImplementedYet

__all__ = [
    "check_gpt_module",
    "check_training_loop",
    "check_cached_generation",
    "check_capstone",
    "unigram_loss",
    "CAPSTONE_MARGIN",
]

# The capstone's held-out loss must lie this many nats per character below the unigram baseline.
CAPSTONE_MARGIN = 0.5
# The capstone's sample (recorded for the chapter) is drawn at this temperature.
SAMPLE_TEMPERATURE = 0.8

_GPT_NAMES = (
    "token_embedding, position_embedding (each with a weight), blocks (an nn.ModuleList of your "
    "MyBlock: self_attn with q_proj, k_proj, v_proj, out_proj; ff with linear1, linear2; norm1, "
    "norm2), final_norm and lm_head"
)


# --------------------------------------------------------------------------- the reference model


def reference_config(V, max_len, D, H, n_layers, d_ff, dropout=0.0) -> DecoderOnlyConfig:
    """The package's configuration of the learner's GPT: pre-norm blocks with the ReLU feed-forward
    network of chapter 4, learned positions, layer norms with eps 1e-5, the output layer tied."""
    return DecoderOnlyConfig(
        vocab_size=V,
        max_len=max_len,
        d_model=D,
        n_heads=H,
        n_layers=n_layers,
        d_ff=d_ff,
        dropout=dropout,
        activation="relu",
        norm_first=True,
        positional="learned",
        tie_embeddings=True,
    )


def _reference_gpt(
    sizes: tuple, g: torch.Generator, dropout: float = 0.0
) -> DecoderOnlyTransformer:
    """A float64 package GPT whose weights are far from their initial values (norm gains not 1,
    biases not 0, embeddings and matrices of order 1), so that every part of the forward pass shows."""
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 10_000, (1,), generator=g)))
        ref = DecoderOnlyTransformer(reference_config(*sizes, dropout=dropout)).double()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g, dtype=p.dtype) + 0.5)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
            elif "embedding" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.7)
            else:  # a linear layer's (out, in) matrix
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / math.sqrt(p.shape[1]))
    return ref.eval()


def _check_tied(student: nn.Module, case: str) -> None:
    head = getattr(getattr(student, "lm_head", None), "weight", None)
    table = getattr(getattr(student, "token_embedding", None), "weight", None)
    if head is None or table is None:
        raise AssertionError(f"{case}: expected the submodules {_GPT_NAMES}, as in the stub")
    if head is not table:
        raise AssertionError(
            f"{case}: head not tied: lm_head has a weight matrix of its own. The output layer reuses "
            "the token-embedding matrix (Press & Wolf, 2017): self.lm_head.weight = "
            "self.token_embedding.weight, one (V, D) parameter trained by both uses"
        )


def _with_norm_first(block, norm_first: bool, x: Tensor, mask: Tensor | None) -> Tensor:
    saved = block.norm_first
    block.norm_first = norm_first
    try:
        return block(x, attn_mask=mask)[0]
    finally:
        block.norm_first = saved


def _gpt_variant(ref: DecoderOnlyTransformer, ids: Tensor, mistake: str | None = None) -> Tensor:
    """The package GPT's logits for ``ids`` (B, L), or those of one classic mistake."""
    B, L = ids.shape
    x = ref.token_embedding(ids)  # (B, L, D)
    if mistake == "scaled":
        x = x * math.sqrt(ref.config.d_model)
    table = ref.position_embedding.weight  # (max_len, D)
    if mistake == "offset":
        x = x + table[1 : L + 1]
    elif mistake != "no positions":
        x = x + table[:L]
    if mistake == "scaled sum":
        x = x * math.sqrt(ref.config.d_model)
    mask = None if mistake == "no mask" else causal_mask(L)
    for block in ref.blocks:
        x = _with_norm_first(block, mistake != "post-norm", x, mask)
    if mistake != "no final norm":
        x = ref.final_norm(x)
    return ref.lm_head(x)  # (B, L, V)


_GPT_MISTAKES = {
    "final norm missing: a pre-norm stack never normalizes the residual stream itself, so the model "
    "applies self.final_norm once, after the last block and before lm_head": "no final norm",
    "position embedding missing: add self.position_embedding's rows 0 .. L - 1 to the token embeddings": "no positions",
    "position embedding offset: the first token sits at position 0, so add rows 0 .. L - 1 "
    "(torch.arange(L)), not 1 .. L": "offset",
    "causal mask missing: pass a causal mask (tl.causal_mask(L), True = may attend) to every block": "no mask",
    "post-norm instead of pre-norm: a GPT's blocks are pre-norm, MyBlock(..., norm_first=True)": "post-norm",
    "embedding scaled by sqrt(d_model): the original Transformer multiplies its embeddings by "
    "sqrt(d_model), but GPT-2 and tl.DecoderOnlyTransformer do not": "scaled",
    "embedding scaled by sqrt(d_model) (here the sum with the positions): GPT-2 and "
    "tl.DecoderOnlyTransformer add the two embeddings as they are": "scaled sum",
}
# the likely mistake when two calls in eval mode differ (checking.check_eval_repeatable)
_GPT_EVAL_DROPOUT = (
    "dropout active in eval mode: call self.embedding_dropout (it follows model.eval()), "
    "never F.dropout(..., training=True)"
)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _check_blocks(student, ref, g, case) -> None:
    """Each of the learner's blocks must compute the package's pre-norm block with a causal mask."""
    D = ref.config.d_model
    L = min(4, ref.config.max_len)
    x = torch.randn(2, L, D, generator=g, dtype=torch.float64) * 1.5 + 0.3
    mask = causal_mask(L)
    for i, (mine, theirs) in enumerate(zip(student.blocks, ref.blocks)):
        try:
            with torch.no_grad():
                y = _first(mine(x.clone(), attn_mask=mask))
        except NotImplementedError as exc:
            raise AssertionError(
                f"{case}: blocks[{i}] (your MyBlock, or the attention, layer norm or feed-forward "
                "network inside it) still raises NotImplementedError: paste your code of chapters 1 "
                "and 4 into the cell of your modules"
            ) from exc
        except Exception as exc:
            raise AssertionError(
                f"{case}: blocks[{i}](x, attn_mask=mask) raised {type(exc).__name__}: {exc}. Your "
                "MyBlock must take a (B, L, D) tensor and an (L, L) bool mask, as in chapter 4"
            ) from exc
        with torch.no_grad():
            expected = theirs(x, attn_mask=mask)[0]
            if checking.close(y, expected):
                continue
            if checking.close(y, _with_norm_first(theirs, False, x, mask)):
                raise AssertionError(
                    f"{case}: blocks[{i}] is a post-norm block. Likely mistake: post-norm instead of "
                    "pre-norm: a GPT's blocks are pre-norm, MyBlock(..., norm_first=True)"
                )
        raise AssertionError(
            f"{case}: blocks[{i}] does not compute the package's pre-norm block with the same weights "
            "and a causal mask: make MyMultiHeadAttention pass check_multi_head_attention (chapter 1) "
            "and MyBlock pass check_block_module (chapter 4) first"
        )


def _compare_param_grads(student, ref, ids, upstream, case) -> None:
    """The gradients of ``sum(logits * upstream)`` with respect to every parameter must agree."""
    for model in (student, ref):
        model.zero_grad(set_to_none=True)
    (checking.call(student, ids) * upstream).sum().backward()
    (ref(ids).logits * upstream).sum().backward()
    mine = dict(student.named_parameters())
    for name, p in ref.named_parameters():
        q = mine.get(name)
        if q is None:
            continue
        if q.grad is None or (not (q.grad.abs() > 0).any() and (p.grad.abs() > 0).any()):
            raise AssertionError(
                f"no gradient reached {name} for {case}: the logits are right, but forward cuts the "
                "graph; do not use .detach(), .data, torch.no_grad() or numpy inside forward"
            )
        if not checking.close(q.grad, p.grad):
            err = (q.grad - p.grad).abs().max().item()
            raise AssertionError(
                f"wrong gradient with respect to {name} for {case} (largest difference {err:.3g}), "
                "although the logits are right. Likely mistake: part of forward is cut from the graph "
                "(.detach(), .data, torch.no_grad()), or a tensor is modified in place after it was used"
            )
    for model in (student, ref):
        model.zero_grad(set_to_none=True)


_GPT_SIZES = [  # (V, max_len, d_model, n_heads, n_layers, d_ff): odd vocabularies and widths
    (11, 7, 8, 2, 2, 17),
    (5, 4, 6, 3, 1, 7),
    (13, 9, 12, 4, 3, 25),
]


@checking.checker("check_gpt_module")
def check_gpt_module(cls) -> None:
    """Check a module class ``cls(vocab_size, max_len, d_model, n_heads, n_layers, d_ff, dropout=0.0)``
    whose ``forward(input_ids)`` maps ``(B, L)`` token ids to ``(B, L, vocab_size)`` logits as
    :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` does (pre-norm blocks,
    learned positions, ReLU feed-forward networks, a final norm, the output layer tied to the token
    embedding).

    The package model's weights are copied into the learner's; both run in float64 in eval mode on
    several sizes, with one position, ``max_len`` positions and lengths in between. Logits, a change of
    a future token (it must leave every earlier logit unchanged) and the gradients of every parameter
    must agree.

    Raises:
        AssertionError: naming the likely mistake (head not tied, final norm missing, positions missing
            or offset, causal mask missing, post-norm blocks, embedding scaled by sqrt(d_model), dropout
            active in eval mode, gradients cut), or that a block does not compute the package's block.
    """
    g = checking.gen(29)
    for sizes in _GPT_SIZES:
        V, max_len, D, H, n_layers, d_ff = sizes
        name = getattr(cls, "__name__", "your module")
        model_case = f"{name}{sizes[:4] + (n_layers, d_ff)}, dropout=0.2"
        student = checking.build(cls, sizes, {"dropout": 0.2}, seed=D)
        _check_tied(student, model_case)
        ref = _reference_gpt(sizes, g)
        checking.load_reference(student, ref, "check_gpt_module", _GPT_NAMES)
        student.eval()
        _check_blocks(student, ref, g, model_case)
        for B, L in [(2, max_len - 2), (3, 1), (1, max_len)]:
            case = f"{model_case}, input_ids of shape {(B, L)}"
            ids = torch.randint(0, V, (B, L), generator=g)
            with torch.no_grad():
                logits = checking.call(student, ids.clone())
                checking.check_tensor(logits, "logits", (B, L, V), case)
                again = checking.call(student, ids.clone())
                expected = ref(ids).logits
                checking.check_eval_repeatable(
                    logits, again, expected, case, _GPT_EVAL_DROPOUT, "logits"
                )
                if L > 1:  # a change at the last position must leave every earlier logit alone
                    edited = ids.clone()
                    edited[:, -1] = (edited[:, -1] + 1) % V
                    moved = (checking.call(student, edited) - logits)[:, :-1].abs().max().item()
                    if moved > 0:
                        raise AssertionError(
                            f"{case}: changing the token at the last position changed the logits of "
                            f"earlier positions (by up to {moved:.3g}). Likely mistake: causal mask "
                            "missing: pass a causal mask (tl.causal_mask(L), True = may attend) to "
                            "every block"
                        )
                if not checking.close(logits, expected):
                    variants = {
                        m: _gpt_variant(ref, ids, v)
                        for m, v in _GPT_MISTAKES.items()
                        if not (v == "offset" and L + 1 > max_len)
                    }
                    raise checking.diagnose(logits, variants, case, "logits", expected)
            upstream = torch.randn(B, L, V, generator=g, dtype=torch.float64)
            _compare_param_grads(student, ref, ids, upstream, case)


# --------------------------------------------------------------------------- the training loop


def _train_variant(model: nn.Module, ids: Tensor, cfg: TrainConfig, mistake: str | None = None):
    """The loop of :func:`~transformer_lite.training.train.train` (without its evaluations), or one
    classic mistake; returns the loss of every step. ``mistake=None`` gives train()'s losses and
    weights (tests/chapters/test_module_exercises_ch9.py checks it)."""
    torch.manual_seed(cfg.seed)  # the dropout masks
    batches = torch.Generator().manual_seed(cfg.seed)  # the window starts
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": cfg.weight_decay},
            {"params": others, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=cfg.betas,
    )
    if mistake != "eval mode":
        model.train()
    losses = []
    for step in range(cfg.steps):
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr if mistake == "no schedule" else learning_rate(step, cfg)
        x, y = random_batch(ids, cfg.batch_size, cfg.context, batches)  # (B, L) each
        logits = model(x).logits  # (B, L, V)
        if mistake == "not shifted":
            loss = lm_loss(logits, x)
        elif mistake == "summed":
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
        elif mistake == "summed over positions":
            loss = lm_loss(logits, y) * cfg.context
        else:
            loss = lm_loss(logits, y)
        if mistake == "step before backward":  # step with no gradient at all
            optimizer.zero_grad(set_to_none=True)
            optimizer.step()
            loss.backward()
        else:
            if mistake != "no zero_grad":
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if mistake != "no clipping":
                torch.nn.utils.clip_grad_norm_(matrices + others, cfg.grad_clip)
            optimizer.step()
        losses.append(loss.item())
    return losses


_STEP_ORDER = (
    "optimizer stepped before backward: each step is zero_grad(), loss.backward(), clipping, then "
    "optimizer.step(), so that the step uses this batch's gradients"
)
_AVERAGE = (
    "loss averaged wrongly: the loss is the MEAN of -ln p(target) over all B * L positions "
    "(lm_loss, or F.cross_entropy on (B*L, V) logits), not a sum"
)
_TRAIN_MISTAKES = {
    "targets not shifted: the target of position t is the NEXT token, y[:, t] = x[:, t + 1] (the "
    "second tensor random_batch returns), not x itself": "not shifted",
    "zero_grad missing: gradients accumulate over the steps; call optimizer.zero_grad() before "
    "loss.backward() at every step": "no zero_grad",
    "no clipping: rescale the gradients with torch.nn.utils.clip_grad_norm_(model.parameters(), "
    "cfg.grad_clip) after loss.backward() and before optimizer.step()": "no clipping",
    "schedule not applied: set every param group's 'lr' to learning_rate(step, cfg) at each step "
    "(warm-up, then the half cosine)": "no schedule",
    "model left in eval mode (dropout off): call model.train() before the loop": "eval mode",
    _AVERAGE: "summed",
    _AVERAGE + " (this one sums over the positions)": "summed over positions",
    _STEP_ORDER + " (here the weights never moved)": "step before backward",
}


def _train_model(V: int, context: int, seed: int) -> nn.Module:
    """A float64 package GPT with dropout (so that train and eval mode differ), in eval mode."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = DecoderOnlyTransformer(reference_config(V, context, 8, 2, 1, 16, dropout=0.1))
    return model.double().eval()


class _LogitsGPT(DecoderOnlyTransformer):
    """The package GPT with the learner's contract: ``model(x)`` returns the logits ``(B, L, V)``."""

    def forward(self, input_ids: Tensor, **kwargs) -> Tensor:
        return super().forward(input_ids, **kwargs).logits


def _handed_out(model: DecoderOnlyTransformer) -> DecoderOnlyTransformer:
    """A copy of ``model`` (same parameters, names and order) whose call returns the logits tensor."""
    copied = copy.deepcopy(model)
    copied.__class__ = _LogitsGPT
    return copied


def _flat(model: nn.Module) -> Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _same_run(losses, params, other_losses, other_params) -> bool:
    return (
        len(losses) == len(other_losses)
        and torch.allclose(
            torch.tensor(losses, dtype=torch.float64),
            torch.tensor(other_losses, dtype=torch.float64),
            rtol=1e-7,
            atol=1e-9,
        )
        and torch.allclose(params, other_params, rtol=1e-6, atol=1e-9)
    )


@checking.checker("check_training_loop")
def check_training_loop(fn: Callable) -> None:
    """Check ``fn(model, train_ids, cfg, progress=True) -> losses``: the training loop of
    :func:`~transformer_lite.training.train.train`, written out.

    ``fn`` trains ``model`` in place for ``cfg.steps`` steps (a
    :class:`~transformer_lite.training.train.TrainConfig`) on windows of ``train_ids`` drawn with
    ``random_batch`` and returns the mean next-token loss of every step. The checker hands it a small
    float64 package GPT with dropout, left in eval mode, and compares the losses and the weights after
    a few steps (a short warm-up, then the half cosine, gradients clipped at every step) with those of
    ``train`` from the same initial weights, for two seeds.

    Raises:
        AssertionError: naming the likely mistake (targets not shifted, zero_grad missing, no clipping,
            schedule not applied, model left in eval mode, loss summed instead of averaged, optimizer
            stepped before backward), or saying what was returned instead of one loss per step.
    """
    g = checking.gen(31)
    V, context = 7, 6
    ids = torch.randint(0, V, (400,), generator=g)
    for seed, steps in ((3, 4), (8, 5)):
        cfg = TrainConfig(
            steps=steps,
            batch_size=3,
            context=context,
            lr=2e-2,
            min_lr=2e-3,
            warmup_steps=2,
            grad_clip=0.05,
            eval_every=steps,
            eval_batches=1,
            seed=seed,
        )
        case = (
            f"a one-layer GPT with dropout 0.1 (float64, handed to you in eval mode), {steps} steps "
            f"with seed {seed}, batch_size 3, context {context}, warm-up 2 steps, grad_clip 0.05"
        )
        initial = _train_model(V, context, seed)
        student = _handed_out(initial)
        with torch.random.fork_rng():
            try:
                losses = checking.call(fn, student, ids.clone(), cfg, progress=False)
            except AssertionError as exc:
                if "modified by an inplace operation" not in str(exc):
                    raise
                raise AssertionError(
                    f"wrong training run for {case}: backward failed because the weights changed "
                    f"after the forward pass. Likely mistake: {_STEP_ORDER}"
                ) from exc
        if losses is None or not hasattr(losses, "__len__"):
            raise AssertionError(
                f"{case}: expected the list of the {steps} step losses, received {type(losses).__name__}"
                "; append loss.item() at every step and return the list"
            )
        losses = [float(v) for v in losses]
        if len(losses) != steps:
            raise AssertionError(
                f"{case}: expected one loss per step ({steps}), received {len(losses)}"
            )
        params = _flat(student)
        reference = copy.deepcopy(initial)
        with torch.random.fork_rng():
            history = train(reference, ids, ids[:100], cfg, progress=False)
        if _same_run(losses, params, history.step_loss, _flat(reference)):
            continue
        for mistake, variant in _TRAIN_MISTAKES.items():
            model = copy.deepcopy(initial)
            with torch.random.fork_rng():
                variant_losses = _train_variant(model, ids, cfg, variant)
            if _same_run(losses, params, variant_losses, _flat(model)):
                raise AssertionError(f"wrong training run for {case}. Likely mistake: {mistake}")
        if torch.equal(params, _flat(initial)):
            raise AssertionError(
                f"wrong training run for {case}: the weights never changed. Likely mistake: {_STEP_ORDER}"
            )
        loss_gap = max(abs(a - b) for a, b in zip(losses, history.step_loss))
        raise AssertionError(
            f"wrong training run for {case}: the step losses differ from train()'s by up to "
            f"{loss_gap:.3g} (first step: {losses[0]:.6f}, expected {history.step_loss[0]:.6f}) and "
            "match none of the usual mistakes. Keep the stub's seeding and optimizer, draw each batch "
            "with random_batch(train_ids, cfg.batch_size, cfg.context, batches), and compare your loop "
            "step by step with chapter 8's"
        )


# --------------------------------------------------------------------------- generation with a cache


class _Mistake(Exception):
    """A protocol error seen by the spy: reported as the checker's verdict."""


class _Spy:
    """Stands in for the model in the learner's generate: records every call and checks the protocol."""

    def __init__(self, model: nn.Module, prompt_len: int, use_cache: bool) -> None:
        self.model, self.prompt_len, self.use_cache = model, prompt_len, use_cache
        self.calls: list[Tensor] = []  # the logits each call returned
        self.cache_id = None

    def __call__(self, input_ids, cache=None, **kwargs):
        k = len(self.calls)
        seen = self.prompt_len + k  # tokens in the sequence at this call
        L = input_ids.shape[1]
        if self.use_cache:
            if cache is None:
                raise _Mistake(
                    "use_cache=True, but the model was called without a cache: create one "
                    "tl.KVCache() before the loop and pass it at every step, model(tokens, cache=cache)"
                )
            if k == 0 and (len(cache) != 0 or L != self.prompt_len):
                raise _Mistake(
                    "the first call must feed the whole prompt into an empty cache (it fills the "
                    f"cache with the prompt's keys and values); received {L} tokens and a cache of "
                    f"{len(cache)}"
                )
            if k > 0 and (self.cache_id != id(cache) or len(cache) == 0):
                raise _Mistake(
                    "a new cache at every step: create the cache once, before the loop; a fresh "
                    "cache forgets the keys and values of the earlier tokens"
                )
            if k > 0 and L > 1:
                raise _Mistake(
                    "whole prompt re-fed each step with the cache (duplicated keys): the cache "
                    f"already holds the keys and values of the {len(cache)} earlier positions, so "
                    "feeding them again adds them twice; feed only the newest token, (B, 1)"
                )
            self.cache_id = id(cache)
        else:
            if cache is not None:
                raise _Mistake("use_cache=False, but a cache was passed to the model")
            if L != seen:
                raise _Mistake(
                    "without the cache, every step must feed the whole sequence so far: the model "
                    f"remembers nothing between calls (step {k}: expected {seen} tokens, received {L})"
                )
        logits = self.model(input_ids, cache=cache).logits  # the learner's model returns logits
        self.calls.append(logits.detach())
        return logits

    forward = __call__

    def __getattr__(self, name):  # .eval(), .training, .config, ... of the model itself
        return getattr(self.model, name)


def _run_generate(generate, model, prompt, n, **kwargs):
    try:
        with torch.no_grad():
            return generate(model, prompt.clone(), n, **kwargs)
    except _Mistake as exc:
        raise AssertionError(f"my_generate: {exc}") from None
    except NotImplementedError as exc:
        raise NotImplementedYet from exc
    except Exception as exc:
        raise AssertionError(
            f"your my_generate raised {type(exc).__name__} for a prompt of shape "
            f"{tuple(prompt.shape)} and max_new_tokens={n}: {exc}"
        ) from exc


def _check_generated(out, prompt, n, expected, case, spy=None) -> None:
    B, L = prompt.shape
    if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != B:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise AssertionError(
            f"{case}: expected the tokens (B, L + max_new_tokens) = {(B, L + n)}, received {got}"
        )
    if out.shape[1] in (L + n - 1, L + n + 1):
        raise AssertionError(
            f"{case}: expected {(B, L + n)}, received {tuple(out.shape)}. Likely mistake: off by one "
            "in the number of new tokens: generate exactly max_new_tokens tokens and return them "
            "after the prompt"
        )
    if out.shape[1] == n and n != L + n:
        raise AssertionError(
            f"{case}: expected {(B, L + n)}, received {tuple(out.shape)}: return the prompt followed "
            "by the new tokens"
        )
    checking.check_tensor(out, "generated tokens", (B, L + n), case)
    if not torch.equal(out[:, :L], prompt):
        raise AssertionError(f"{case}: the first L tokens returned must be the prompt itself")
    if torch.equal(out, expected):
        return
    if spy is not None and len(spy.calls) >= n and n > 0:
        first = torch.stack([logits[:, 0].argmax(-1) for logits in spy.calls[:n]], dim=1)
        if torch.equal(out[:, L:], first):
            raise AssertionError(
                f"{case}: wrong tokens. Likely mistake: sampling from the logits of the wrong "
                "position: the next token is predicted by the LAST position, logits[:, -1]"
            )
    raise AssertionError(
        f"{case}: the generated tokens differ from DecoderOnlyTransformer.generate's on the same "
        f"weights (first difference at step {int((out != expected).any(0).nonzero()[0]) - L}); pick "
        "each token with tl.sample_next_token(logits[:, -1], temperature, generator=generator)"
    )


def _cached_variant(ref, ids, past: list, mistake: str | None) -> Tensor:
    """The package GPT's logits for the new tokens ``ids`` after the cached ``past`` (per layer
    ``(k, v)``), computed by hand, or with one classic mistake; returns the logits only."""
    B, L = ids.shape
    start = past[0][0].shape[2] if past else 0
    first = 0 if mistake == "no offset" else start
    x = ref.token_embedding(ids) + ref.position_embedding.weight[first : first + L]
    for i, block in enumerate(ref.blocks):
        attn, H = block.self_attn, block.self_attn.n_heads
        h = block.norm1(x)

        def heads(t):  # (B, L, D) -> (B, H, L, d_head)
            return t.view(B, L, H, -1).transpose(1, 2)

        q, k, v = heads(attn.q_proj(h)), heads(attn.k_proj(h)), heads(attn.v_proj(h))
        if past and mistake != "cache not read":
            k = torch.cat([past[i][0], k], dim=2)
            v = torch.cat([past[i][1], v], dim=2)
        S = k.shape[2]
        mask = {
            "top-left": torch.ones(L, S, dtype=torch.bool).tril(),
            "no mask": None,
        }.get(mistake, causal_mask(L, S))
        out = scaled_dot_product_attention(q, k, v, attn_mask=mask)[0]  # (B, H, L, d_head)
        x = x + attn.out_proj(out.transpose(1, 2).reshape(B, L, -1))
        x = x + block.ff(block.norm2(x))
    return ref.lm_head(ref.final_norm(x))


_CACHE_MISTAKES = {
    "position ids not offset by the cache length: the new tokens sit at positions len(cache) .. "
    "len(cache) + L - 1, so add those rows of the position embedding": "no offset",
    "causal mask aligned top-left (as torch's is_causal=True): the new queries are the LAST L of "
    "the S positions, so use tl.causal_mask(L, S), which aligns bottom-right": "top-left",
    "no causal mask with the cache: a new token must not see the new tokens after it; use "
    "tl.causal_mask(L, S)": "no mask",
    "cache not read: attend to the cached keys and values too, torch.cat([past_k, k], dim=2)": "cache not read",
}


def _check_cached_forward(student, ref, g, case) -> None:
    """Feed the learner's model a sequence in chunks through a cache; each chunk's logits must be the
    rows of the full sequence's, and the cache must hold every position fed so far."""
    V, max_len = ref.config.vocab_size, ref.config.max_len
    ids = torch.randint(0, V, (2, 7), generator=g)
    with torch.no_grad():
        full = ref(ids).logits  # (2, 7, V)
    cache, ref_cache, a = KVCache(), KVCache(), 0
    for size in (3, 2, 1, 1):
        b = a + size
        chunk = ids[:, a:b]
        where = f"{case}: positions {a} .. {b - 1} fed after {a} cached"
        with torch.no_grad():
            logits = checking.call(student, chunk.clone(), cache=cache)
        checking.check_tensor(logits, "logits", (2, size, V), where)
        try:
            cached = len(cache)
        except Exception as exc:  # layers not (keys, values) pairs
            raise AssertionError(
                f"{where}: len(cache) failed ({exc}); cache.layers must hold one (keys, values) pair "
                "per layer, each (B, n_heads, positions, d_head)"
            ) from exc
        if len(cache.layers) != len(ref.blocks):
            raise AssertionError(
                f"{where}: cache.layers holds {len(cache.layers)} entries, expected one (keys, values) "
                f"pair per layer ({len(ref.blocks)}). Likely mistake: cache not extended"
            )
        if cached < b:
            raise AssertionError(
                f"{where}: the cache holds {cached} positions, expected {b}. Likely mistake: cache not "
                "extended: concatenate the new keys and values to the cached ones and store the "
                "result back, cache.layers[i] = (k, v)"
            )
        if cached > b:
            raise AssertionError(
                f"{where}: the cache holds {cached} positions, expected {b}: keys and values were "
                "stored twice (duplicated keys)"
            )
        expected = full[:, a:b]
        if not checking.close(logits, expected):
            with torch.no_grad():
                past = list(ref_cache.layers)
                variants = {
                    m: _cached_variant(ref, chunk, past, v) for m, v in _CACHE_MISTAKES.items()
                }
            raise checking.diagnose(logits, variants, where, "logits", expected)
        with torch.no_grad():
            ref(chunk, cache=ref_cache)
        a = b
    assert a <= max_len


@checking.checker("check_cached_generation")
def check_cached_generation(cls, generate: Callable) -> None:
    """Check ``cls``, a subclass of the learner's GPT whose ``forward(input_ids, cache=None)`` reads and
    extends a :class:`~transformer_lite.outputs.KVCache`, and
    ``generate(model, input_ids, max_new_tokens, temperature=0.0, use_cache=True, generator=None)``.

    First ``generate`` alone, with the package's model (which takes the same ``cache=`` argument)
    behind a spy that checks what each call feeds: the prompt once into an empty cache, then one token
    per step into the same cache; without the cache, the whole sequence. The tokens must be those of
    :meth:`DecoderOnlyTransformer.generate` at temperature 0 and, with the same seeded generator, at
    temperature 1. Then ``cls`` with the package's weights in float64: a sequence fed in chunks of 3,
    2, 1 and 1 tokens through a cache must give the rows of the logits of the whole sequence, the cache
    holding every position fed; and ``generate`` with the learner's model, cached and uncached, must
    give the package's tokens.

    Raises:
        AssertionError: naming the likely mistake (position ids not offset by the cache length, cache
            not extended, whole prompt re-fed each step with the cache, a new cache every step, off by
            one in the number of new tokens, sampling from the logits of the wrong position, the causal
            mask aligned top-left).
    """
    g = checking.gen(37)
    sizes = (11, 10, 8, 2, 2, 17)
    ref = _reference_gpt(sizes, g)
    for B, L, n in [(2, 3, 5), (1, 1, 4), (3, 4, 0)]:
        prompt = torch.randint(0, sizes[0], (B, L), generator=g)
        for use_cache in (True, False):
            case = (
                f"my_generate with the package's model, prompt {(B, L)}, max_new_tokens={n}, "
                f"temperature 0, use_cache={use_cache}"
            )
            spy = _Spy(ref, L, use_cache)
            out = _run_generate(generate, spy, prompt, n, temperature=0.0, use_cache=use_cache)
            _check_generated(
                out, prompt, n, ref.generate(prompt, n, temperature=0.0).tokens, case, spy
            )
        case = f"my_generate with the package's model, prompt {(B, L)}, max_new_tokens={n}, temperature 1"
        out = _run_generate(
            generate, _Spy(ref, L, True), prompt, n, temperature=1.0, use_cache=True,
            generator=torch.Generator().manual_seed(5),
        )  # fmt: skip
        expected = ref.generate(
            prompt, n, temperature=1.0, generator=torch.Generator().manual_seed(5)
        ).tokens
        if (
            n
            and torch.equal(out, ref.generate(prompt, n, temperature=0.0).tokens)
            and not torch.equal(out, expected)
        ):
            raise AssertionError(
                f"{case}: greedy tokens at temperature 1. Likely mistake: temperature ignored: pass "
                "temperature and generator on to tl.sample_next_token"
            )
        _check_generated(out, prompt, n, expected, case)

    name = getattr(cls, "__name__", "your module")
    case = f"{name}{sizes}"
    student = checking.build(cls, sizes, {"dropout": 0.2}, seed=3)
    _check_tied(student, case)
    checking.load_reference(student, ref, "check_cached_generation", _GPT_NAMES)
    student.eval()
    ids = torch.randint(0, sizes[0], (2, 6), generator=g)
    with torch.no_grad():
        if not checking.close(checking.call(student, ids.clone()), ref(ids).logits):
            raise AssertionError(
                f"{case}: without a cache your model's logits differ from the package's: make MyGPT "
                "pass check_gpt_module first (forward(input_ids, cache=None) calls MyGPT.forward)"
            )
    _check_cached_forward(student, ref, g, case)
    prompt = torch.randint(0, sizes[0], (2, 3), generator=g)
    expected = ref.generate(prompt, 6, temperature=0.0).tokens
    for use_cache in (True, False):
        out = _run_generate(generate, student, prompt, 6, temperature=0.0, use_cache=use_cache)
        _check_generated(
            out,
            prompt,
            6,
            expected,
            f"my_generate with {case}, use_cache={use_cache}, temperature 0",
        )


# --------------------------------------------------------------------------- the capstone


def unigram_loss(corpus) -> float:
    """The loss (nats per character) of the training text's character frequencies on the validation
    text, as chapter 8 computes it: the cross-entropy of the validation frequencies with them."""
    counts = Counter(corpus.train_text)
    n_train = len(corpus.train_text)
    val_counts = Counter(corpus.val_text)
    n_val = len(corpus.val_text)
    return -sum(n / n_val * math.log(counts[ch] / n_train) for ch, n in val_counts.items())


def unigram_window_loss(corpus, windows) -> float:
    """The unigram baseline of :func:`unigram_loss` scored on given ``(inputs, targets)`` windows
    (mean over the windows' targets), so that a model's loss on them can be compared like for like."""
    counts = torch.bincount(corpus.train_ids, minlength=len(corpus.vocab)).double()
    log_p = torch.log(counts / counts.sum())  # (V,)
    return sum(float(-log_p[y].mean()) for _, y in windows) / len(windows)


def _sizes_of(model: nn.Module) -> tuple:
    """``(V, max_len, d_model, n_heads, n_layers, d_ff)`` read off the learner's GPT."""
    try:
        V, D = model.token_embedding.weight.shape
        max_len = model.position_embedding.weight.shape[0]
        first = model.blocks[0]
        return (
            V,
            max_len,
            D,
            first.self_attn.n_heads,
            len(model.blocks),
            first.ff.linear1.out_features,
        )
    except (AttributeError, IndexError, TypeError) as exc:
        raise AssertionError(
            f"check_capstone: could not read the sizes of your model ({exc}); it must have the "
            f"submodules {_GPT_NAMES}, as MyGPT's stub, and self_attn.n_heads"
        ) from exc


def _validation_windows(val_ids: Tensor, context: int, n_batches: int = 10, batch_size: int = 32):
    """Fixed validation windows: the same ``n_batches`` batches of ``(inputs, targets)`` every call."""
    g = torch.Generator().manual_seed(1)
    return [random_batch(val_ids, batch_size, context, g) for _ in range(n_batches)]


@checking.checker("check_capstone")
def check_capstone(train_fn: Callable, generate: Callable, record: dict | None = None) -> None:
    """Check ``train_fn(corpus) -> (model, losses)``: the learner's GPT, built from their own modules,
    trained by their own loop on chapter 8's corpus (``load_shakespeare()``), and ``generate`` on it.

    The checker calls ``train_fn`` once (timing it), then verifies: the model is built from the learner's
    modules (no module of this package inside); its loss on fixed validation windows (10 batches of 32
    windows of ``max_len`` characters of the held-out plays) lies at least ``CAPSTONE_MARGIN`` nats per
    character below the unigram baseline of chapter 8; a
    :class:`~transformer_lite.models.decoder_only.DecoderOnlyTransformer` with the trained weights loaded
    gives the same logits (float64, on those windows); and greedy generation with the cache gives the
    same characters as without it and as the package's ``generate``. What it measured goes into
    ``record`` (a dict, if given): ``model``, ``losses``, ``seconds``, ``val_loss``, ``unigram_loss``
    (on all the held-out text), ``unigram_window_loss`` (on the same windows as ``val_loss``),
    ``n_parameters``, ``logit_difference``, ``greedy`` and ``sample`` (text, drawn at ``temperature``).

    Raises:
        AssertionError: naming what fails (a package module inside the model, a held-out loss not below
            the baseline by the margin, logits that differ from the package's with the same weights,
            cached generation that differs from uncached).
    """
    corpus = load_shakespeare()
    start = time.perf_counter()
    with torch.random.fork_rng():
        result = checking.call(train_fn, corpus)
    seconds = time.perf_counter() - start
    model, losses = result if isinstance(result, tuple) else (result, None)
    if not isinstance(model, nn.Module):
        raise AssertionError(
            f"check_capstone: train_my_gpt must return (model, losses), received {type(result).__name__}"
        )
    for where, module in model.named_modules():
        if type(module).__module__.startswith("transformer_lite."):
            raise AssertionError(
                f"check_capstone: your model contains the package's {type(module).__name__} "
                f"({where or 'the model itself'}); build it from your own modules: MyGPT with your "
                "MyBlock, MyMultiHeadAttention, MyLayerNorm and MyFeedForward"
            )
    sizes = _sizes_of(model)
    ref = DecoderOnlyTransformer(reference_config(*sizes))
    try:
        ref.load_state_dict(model.state_dict())
    except (RuntimeError, KeyError) as exc:
        raise AssertionError(
            f"check_capstone: the package's model could not load your weights ({str(exc).strip()}); "
            f"your model needs the submodules {_GPT_NAMES}"
        ) from exc
    was_training = model.training
    model.eval()
    ref.eval()
    windows = _validation_windows(corpus.val_ids, sizes[1])
    mine64, ref64 = copy.deepcopy(model).double(), ref.double()
    with torch.no_grad():
        val_loss = sum(float(lm_loss(model(x), y)) for x, y in windows) / len(windows)
        gap = max((mine64(x) - ref64(x).logits).abs().max().item() for x, _ in windows[:2])
    if gap > 1e-8:
        raise AssertionError(
            f"check_capstone: with your trained weights loaded, tl.DecoderOnlyTransformer's logits "
            f"differ from your model's by up to {gap:.3g} (float64): make MyGPT pass check_gpt_module"
        )
    baseline = unigram_loss(corpus)
    if not val_loss < baseline - CAPSTONE_MARGIN:
        raise AssertionError(
            f"check_capstone: held-out loss {val_loss:.3f} nats per character, not {CAPSTONE_MARGIN} "
            f"below the unigram baseline {baseline:.3f}. Train longer or at another learning rate, and "
            "check that MyGPT and my_train pass their checkers"
        )
    vocab = corpus.vocab
    prompt = vocab.encode("HAMLET\n")[None]  # (1, 7)
    n = sizes[1] - prompt.shape[1]  # up to the last position but one
    expected = ref64.generate(prompt, n, temperature=0.0).tokens
    outs = {
        use_cache: _run_generate(generate, mine64, prompt, n, temperature=0.0, use_cache=use_cache)
        for use_cache in (False, True)
    }
    case = "check_capstone: greedy generation with your trained model, use_cache={}"
    _check_generated(outs[False], prompt, n, expected, case.format(False))
    if not torch.equal(outs[True], expected):
        if isinstance(outs[True], Tensor) and outs[True].shape == expected.shape:
            raise AssertionError(
                "check_capstone: cached generation differs from uncached: with your trained model, "
                "my_generate(..., use_cache=True) gives other characters than use_cache=False and "
                "the package's generate; make MyCachedGPT and my_generate pass "
                "check_cached_generation"
            )
        _check_generated(outs[True], prompt, n, expected, case.format(True))
    sample = _run_generate(
        generate, model, prompt, n, temperature=SAMPLE_TEMPERATURE, use_cache=True,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    model.train(was_training)
    n_parameters = sum(p.numel() for p in model.parameters())
    print(
        f"check_capstone: {n_parameters:,} parameters trained in {seconds:.0f} s; held-out loss "
        f"{val_loss:.3f} nats per character (unigram baseline {baseline:.3f}); the package's model "
        f"with your weights: the same logits (largest difference {gap:.1e}); greedy generation with "
        "and without your cache: the same characters"
    )
    if record is not None:
        record.update(
            model=model,
            losses=losses,
            seconds=seconds,
            val_loss=val_loss,
            unigram_loss=baseline,
            unigram_window_loss=unigram_window_loss(corpus, windows),
            n_parameters=n_parameters,
            logit_difference=gap,
            greedy=vocab.decode(expected[0]),
            sample=vocab.decode(sample[0]),
            temperature=SAMPLE_TEMPERATURE,
        )

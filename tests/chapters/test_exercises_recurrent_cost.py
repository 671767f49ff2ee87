"""Tests for the checkers of chapters 6 and 7: check_rnn_step_jacobian and check_online_softmax_merge.

Oracles: learner-style reference solutions written here independently of the checkers (the RNN
Jacobian by ``torch.func.jacrev`` through one tanh step, and directly from the formula; the merge
from the formula), and one deliberately wrong implementation per classic mistake, each of which
must be rejected with a message naming *that* mistake. A stub raising NotImplementedError must
print "not implemented yet".
"""

import pytest
import torch

from tests.conftest import CheckerCases
from transformer_lite.chapters.exercises import check_online_softmax_merge, check_rnn_step_jacobian

CASES = CheckerCases()


# --------------------------------------------------------------------------- RNN step Jacobian


@CASES.passes(check_rnn_step_jacobian)
def jac_by_autograd(weight_hh, h):
    """Recover a_t = atanh(h_t), then differentiate tanh(a_t - W h_prev + W h) w.r.t. h at h_prev = 0."""
    out = []
    for b in range(h.shape[0]):
        a = torch.atanh(h[b])  # pre-activation with h_prev = 0 absorbed into the input term
        out.append(
            torch.func.jacrev(lambda hp: torch.tanh(a + weight_hh @ hp))(torch.zeros_like(h[b]))
        )
    return torch.stack(out)


@CASES.passes(check_rnn_step_jacobian)
def jac_formula(weight_hh, h):
    return torch.diag_embed(1 - h**2) @ weight_hh  # (B, H, H) @ (H, H)


@CASES.named(check_rnn_step_jacobian, "missing the tanh derivative")
def jac_missing_derivative(weight_hh, h):
    return weight_hh.expand(h.shape[0], -1, -1).clone()


@CASES.named(check_rnn_step_jacobian, "transposed W_hh")
def jac_transposed(weight_hh, h):
    return torch.diag_embed(1 - h**2) @ weight_hh.T


@CASES.named(check_rnn_step_jacobian, "1 - h instead of 1 - h**2")
def jac_one_minus_h(weight_hh, h):
    return torch.diag_embed(1 - h) @ weight_hh


@CASES.named(check_rnn_step_jacobian, "scaled the columns instead of the rows")
def jac_columns(weight_hh, h):
    return weight_hh @ torch.diag_embed(1 - h**2)


@CASES.named(check_rnn_step_jacobian, "as if it were the pre-activation")
def jac_tanh_of_h(weight_hh, h):
    return torch.diag_embed(1 - torch.tanh(h) ** 2) @ weight_hh


@CASES.named(check_rnn_step_jacobian, "expected shape (3, 5, 5)")
def jac_wrong_shape(weight_hh, h):
    return jac_formula(weight_hh, h)[0]


def test_rnn_jacobian_unknown_mistake_and_crash():
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_rnn_step_jacobian(lambda w, h: 2 * jac_formula(w, h))
    with pytest.raises(AssertionError, match="your function raised"):
        check_rnn_step_jacobian(lambda w, h: w @ h)  # (H, H) @ (B, H): a shape error


def test_rnn_jacobian_stub(capsys):
    def stub(w, h):
        raise NotImplementedError

    assert check_rnn_step_jacobian(stub) is None
    assert "not implemented yet" in capsys.readouterr().out


# --------------------------------------------------------------------------- online softmax merge


@CASES.passes(check_online_softmax_merge)
def merge(a, b):
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    m = torch.maximum(m_a, m_b)
    # <= 1: both sums moved to the new maximum
    scale_a, scale_b = (
        torch.exp(m_a - m),
        torch.exp(m_b - m),
    )
    return m, scale_a * l_a + scale_b * l_b, scale_a * acc_a + scale_b * acc_b


@CASES.passes(check_online_softmax_merge)
def merge_logsumexp(a, b):
    """Another correct route: through log-sum-exp of each block, then back to the running-max form."""
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    lse = torch.logaddexp(m_a + torch.log(l_a), m_b + torch.log(l_b))
    m = torch.maximum(m_a, m_b)
    l = torch.exp(lse - m)
    acc = acc_a * torch.exp(m_a - m) + acc_b * torch.exp(m_b - m)
    return m, l, acc


@CASES.named(check_online_softmax_merge, "no rescaling")
def merge_no_rescale(a, b):
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    return torch.maximum(m_a, m_b), l_a + l_b, acc_a + acc_b


@CASES.named(check_online_softmax_merge, "instead of exp(m_X - m)")
def merge_inverted_factor(a, b):
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    m = torch.maximum(m_a, m_b)
    up_a, up_b = torch.exp(m - m_a), torch.exp(m - m_b)  # >= 1: the factor upside down
    return m, up_a * l_a + up_b * l_b, up_a * acc_a + up_b * acc_b


@CASES.named(check_online_softmax_merge, "kept the first block's maximum")
def merge_first_max(a, b):
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    return m_a, l_a + torch.exp(m_b - m_a) * l_b, acc_a + torch.exp(m_b - m_a) * acc_b


@CASES.named(check_online_softmax_merge, "rescaled l but not acc")
def merge_l_only(a, b):
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    m = torch.maximum(m_a, m_b)
    return m, torch.exp(m_a - m) * l_a + torch.exp(m_b - m) * l_b, acc_a + acc_b


@CASES.named(check_online_softmax_merge, "returned the normalized output")
def merge_normalized(a, b):
    m, l, acc = merge(a, b)
    return m, l, acc / l


@CASES.named(check_online_softmax_merge, "expected a tuple (m, l, acc)")
def merge_list(a, b):
    return list(merge(a, b))


def test_merge_unknown_mistake_and_stub(capsys):
    with pytest.raises(AssertionError, match="matches none of the usual mistakes"):
        check_online_softmax_merge(lambda a, b: (lambda m, l, acc: (m, l, 2 * acc))(*merge(a, b)))

    def stub(a, b):
        raise NotImplementedError

    assert check_online_softmax_merge(stub) is None
    assert "not implemented yet" in capsys.readouterr().out


def test_merged_statistics_give_attention():
    """The reference merge, applied block after block, reproduces softmax attention (the checker's premise)."""
    g = torch.Generator().manual_seed(0)
    s = torch.randn(3, 10, generator=g, dtype=torch.float64) * 3
    v = torch.randn(10, 4, generator=g, dtype=torch.float64)

    def stats(cols):
        m = s[:, cols].amax(-1, keepdim=True)
        p = torch.exp(s[:, cols] - m)
        return m, p.sum(-1, keepdim=True), p @ v[cols]

    m, l, acc = merge(merge(stats(slice(0, 3)), stats(slice(3, 7))), stats(slice(7, 10)))
    torch.testing.assert_close(acc / l, torch.softmax(s, -1) @ v)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

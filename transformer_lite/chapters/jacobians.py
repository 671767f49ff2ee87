"""How far back a gradient reaches: Jacobians of a recurrence, and of self-attention.

In a recurrent network ``h_t = F(h_{t-1}, x_t)`` the chain rule gives, for
``s <= t``::

    dh_t/dh_s = J_t J_{t-1} ... J_{s+1},    J_k = dh_k/dh_{k-1}   (a product of t - s matrices)

For the Elman RNN ``h_k = tanh(a_k)``, ``a_k = W_ih x_k + b_ih + W_hh h_{k-1} + b_hh``,
each factor is ``J_k = diag(1 - h_k**2) W_hh`` (for ``relu``:
``diag(1[a_k > 0]) W_hh``). The norm of such a product typically shrinks or
grows geometrically with the lag ``t - s``: the vanishing and exploding
gradients of Bengio, Simard & Frasconi (1994), "Learning long-term
dependencies with gradient descent is difficult", and Pascanu, Mikolov &
Bengio (2013), "On the difficulty of training recurrent neural networks",
Sec. 2.1 (Eq. 5 is the product; their bounds use the largest singular value
of the recurrent matrix). Their network applies the nonlinearity before the
recurrent matrix, so their factors read ``W_rec^T diag(sigma'(x_{k-1}))``; the
structure, a fixed matrix times a diagonal of derivatives, is the same.
For PyTorch's GRU (:class:`~transformer_lite.nn.recurrent.GRU`) the factor is a
diagonal copy term plus terms through the candidate and the update gate,
``J_k = diag(z_k) + diag((1 - z_k)(1 - n_k**2)) [diag(r_k) W_hn + diag(g_k r_k (1 - r_k)) W_hr]
+ diag((h_{k-1} - n_k) z_k (1 - z_k)) W_hz`` (:func:`gru_step_jacobian_terms`).
In one self-attention layer output ``t`` depends on input ``s`` directly, with
no product over the positions in between (path length one).

Index convention (as in :mod:`transformer_lite.nn.recurrent`): ``h_0`` is the
initial state, ``h_1 .. h_L`` the states after each input; a Jacobian tensor
``J`` of shape ``(B, L, H, H)`` holds ``J[:, k - 1] = dh_k/dh_{k-1}``.
Matrix norms: ``"spectral"`` is the largest singular value (the most a
gradient vector can be stretched, so ``||dLoss/dh_s|| <= ||dh_t/dh_s||_2
||dLoss/dh_t||``); ``"fro"`` is the Frobenius norm (root of the sum of squares).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..nn.recurrent import GRU, RNN

__all__ = [
    "recurrent_weight",
    "rnn_step_jacobians",
    "autograd_step_jacobians",
    "jacobian_product",
    "gradient_norm_vs_lag",
    "attention_gradient_norm_vs_lag",
    "input_gradient_norm_vs_lag",
    "gru_step_jacobian_terms",
    "gru_step_jacobians",
]

_MATRIX_NORM_ORDERS = {"spectral": 2, "fro": "fro"}
# a sequence layer or model: (B, L, D) -> (B, L, D'), or a tuple whose first element is that
SequenceMap = Callable[[Tensor], Tensor | tuple]


def _matrix_norm(m: Tensor, norm: str) -> Tensor:
    if norm not in _MATRIX_NORM_ORDERS:
        raise ValueError(f"expected norm 'spectral' or 'fro', received {norm!r}")
    return torch.linalg.matrix_norm(m, ord=_MATRIX_NORM_ORDERS[norm])


def recurrent_weight(
    hidden_size: int, spectral_radius: float, seed: int = 0, dtype: torch.dtype = torch.float64
) -> Tensor:
    """A random ``(H, H)`` recurrent matrix with a chosen spectral radius: ``radius * Q``, Q orthogonal.

    ``Q`` is drawn from the Haar (uniform) distribution on orthogonal matrices
    by the QR decomposition of a standard Gaussian matrix, with the signs of
    R's diagonal folded into Q (Mezzadri, 2007, "How to generate random
    matrices from the classical compact groups", Notices of the AMS). Every eigenvalue of
    ``Q`` has modulus 1 and every singular value is 1, so the result has
    spectral radius **and** spectral norm equal to ``spectral_radius``, and
    ``||W^k||_2 = spectral_radius**k`` exactly (in exact arithmetic). This is
    the cleanest setting in which to see ``||dh_T/dh_s||`` against lag: in the
    linear regime of tanh it is exactly ``radius**(T - s)``.

    Args:
        hidden_size: H, a positive int.
        spectral_radius: the radius r >= 0 (finite).
        seed: seed of the private ``torch.Generator`` (the global RNG is untouched).
        dtype: floating dtype of the result.

    Returns:
        ``(H, H)`` tensor of ``dtype``; copy it into ``rnn.weight_hh``.

    Raises:
        ValueError: if ``hidden_size`` is not a positive int or the radius is negative or not finite.
    """
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
        raise ValueError(
            f"recurrent_weight: expected hidden_size to be a positive int, received {hidden_size!r}"
        )
    if not (0.0 <= float(spectral_radius) < float("inf")):
        raise ValueError(
            f"recurrent_weight: expected a finite spectral_radius >= 0, received {spectral_radius!r}"
        )
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(hidden_size, hidden_size, dtype=torch.float64, generator=gen)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r))  # scale column j by sign(R_jj): Haar-distributed Q
    return (spectral_radius * q).to(dtype)


def _states(model: RNN | GRU, x: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
    """Run ``model`` without autograd; return ``(h_prev, h)``, each ``(B, L, H)``: h_{k-1} and h_k for k = 1..L."""
    with torch.no_grad():
        all_hidden, _ = model(x, h0)  # (B, L, H); also validates x and h0
        first = h0 if h0 is not None else x.new_zeros(x.shape[0], model.hidden_size)
        h_prev = torch.cat([first[:, None], all_hidden[:, :-1]], dim=1)  # (B, L, H): h_0 .. h_{L-1}
    return h_prev, all_hidden


def rnn_step_jacobians(rnn: RNN, x: Tensor, h0: Tensor | None = None) -> Tensor:
    """Analytic step Jacobians ``J_k = dh_k/dh_{k-1}`` of an Elman :class:`~transformer_lite.nn.recurrent.RNN`.

    ``J_k = diag(phi'(a_k)) W_hh`` (differentiate ``h_k = phi(a_k)`` through
    ``a_k``; the factors of Pascanu et al., 2013, Eq. 5, written for this
    parametrization): for tanh ``phi'(a_k) = 1 - tanh(a_k)**2 = 1 - h_k**2``;
    for relu ``phi'(a_k) = 1`` where ``a_k > 0`` (equivalently ``h_k > 0``)
    and 0 elsewhere, the convention of ``torch.relu``'s backward at 0.

    Args:
        rnn: our :class:`RNN` (use ``RNN.from_torch`` for an ``nn.RNN``).
        x: ``(B, L, input_size)`` input sequence.
        h0: optional ``(B, H)`` initial state (zeros if omitted).

    Returns:
        ``(B, L, H, H)`` tensor with ``[:, k - 1] = dh_k/dh_{k-1}`` for
        ``k = 1 .. L``; row ``i``, column ``j`` is ``d h_k[i] / d h_{k-1}[j]``.
        Detached from autograd.

    Raises:
        ValueError: if ``rnn`` is not an :class:`RNN`, or ``x``/``h0`` have
            the wrong shape (see :meth:`RNN.forward`).
    """
    if not isinstance(rnn, RNN):
        raise ValueError(
            f"rnn_step_jacobians: expected a transformer_lite RNN, received {type(rnn).__name__} "
            "(use autograd_step_jacobians for a GRU)"
        )
    _, h = _states(rnn, x, h0)  # (B, L, H)
    with torch.no_grad():
        # (B, L, H): phi'(a_k)
        dphi = 1 - h**2 if rnn.nonlinearity == "tanh" else (h > 0).to(h.dtype)
        # (B, L, H, 1) * (H, H) -> (B, L, H, H): row i scaled by phi'_i
        return dphi[..., :, None] * rnn.weight_hh


def autograd_step_jacobians(model: RNN | GRU, x: Tensor, h0: Tensor | None = None) -> Tensor:
    """Step Jacobians ``dh_k/dh_{k-1}`` of any of our recurrent cells (e.g. a GRU), by automatic differentiation.

    For each step, ``torch.func.jacrev`` differentiates ``model.cell(x_k, h)``
    with respect to ``h`` at ``h = h_{k-1}``, vectorized over the batch with
    ``torch.func.vmap``. For an :class:`RNN` this equals
    :func:`rnn_step_jacobians`; for a :class:`GRU` it equals :func:`gru_step_jacobians`,
    whose formula is longer because the gates depend on ``h`` too.

    Args:
        model: our :class:`RNN` or :class:`GRU`.
        x: ``(B, L, input_size)``.
        h0: optional ``(B, H)`` initial state.

    Returns:
        ``(B, L, H, H)``, same layout as :func:`rnn_step_jacobians`, detached.

    Raises:
        ValueError: if ``model`` is not one of our recurrent modules, or on
            bad ``x``/``h0`` shapes.
    """
    if not isinstance(model, (RNN, GRU)):
        raise ValueError(
            f"autograd_step_jacobians: expected a transformer_lite RNN or GRU, received "
            f"{type(model).__name__}"
        )
    h_prev, _ = _states(model, x, h0)  # (B, L, H)
    # (B, in), (B, H) -> (B, H, H)
    step_jac = torch.func.vmap(torch.func.jacrev(model.cell, argnums=1))
    jacs = [step_jac(x[:, k], h_prev[:, k]) for k in range(x.shape[1])]
    if not jacs:
        return x.new_zeros(x.shape[0], 0, model.hidden_size, model.hidden_size)
    return torch.stack(jacs, dim=1).detach()  # (B, L, H, H)


def _check_jacobians(jacobians: Tensor, name: str) -> tuple[int, int, int]:
    if (
        not isinstance(jacobians, Tensor)
        or jacobians.dim() != 4
        or jacobians.shape[-1] != jacobians.shape[-2]
    ):
        got = tuple(jacobians.shape) if isinstance(jacobians, Tensor) else type(jacobians).__name__
        raise ValueError(f"{name}: expected jacobians of shape (B, L, H, H), received {got}")
    B, L, H, _ = jacobians.shape
    return B, L, H


def jacobian_product(jacobians: Tensor, s: int, t: int) -> Tensor:
    """``dh_t/dh_s = J_t J_{t-1} ... J_{s+1}``: the product of the ``t - s`` step Jacobians between ``s`` and ``t``.

    The chain rule through the recurrence (Pascanu et al., 2013, Eq. 5).
    Later steps multiply from the left.

    Args:
        jacobians: ``(B, L, H, H)`` with ``[:, k - 1] = dh_k/dh_{k-1}``.
        s: source position, ``0 <= s <= t`` (``s = 0`` is the initial state).
        t: target position, ``t <= L``.

    Returns:
        ``(B, H, H)``; the identity when ``s == t``.

    Raises:
        ValueError: if ``jacobians`` is not ``(B, L, H, H)`` or not ``0 <= s <= t <= L``.
    """
    B, L, H = _check_jacobians(jacobians, "jacobian_product")
    if not (isinstance(s, int) and isinstance(t, int) and 0 <= s <= t <= L):
        raise ValueError(
            f"jacobian_product: expected integers 0 <= s <= t <= L = {L}, received s={s!r}, t={t!r}"
        )
    prod = torch.eye(H, dtype=jacobians.dtype, device=jacobians.device).expand(B, H, H)  # (B, H, H)
    for k in range(s + 1, t + 1):
        prod = jacobians[:, k - 1] @ prod  # J_k (J_{k-1} ... J_{s+1})
    return prod


def gradient_norm_vs_lag(
    jacobians: Tensor, T: int | None = None, norm: str = "spectral"
) -> tuple[Tensor, Tensor]:
    """``||dh_T/dh_{T-k}||`` for every lag ``k = 0 .. T``: how much of a gradient at step T reaches step T - k.

    Builds the products from the end, ``P_0 = I``, ``P_k = P_{k-1} J_{T-k+1}``,
    so all lags cost ``T`` matrix products in total (the products of
    Pascanu et al., 2013, Eq. 5). In float64, values below about 1e-308 underflow to 0
    (plot on a log scale with that in mind).

    Args:
        jacobians: ``(B, L, H, H)`` from :func:`rnn_step_jacobians` or
            :func:`autograd_step_jacobians`.
        T: target position, ``0 <= T <= L``; defaults to ``L`` (the last state).
        norm: ``"spectral"`` (largest singular value, default) or ``"fro"`` (Frobenius).

    Returns:
        ``(lags, norms)``: ``lags`` is ``arange(T + 1)`` (int64, ``(T + 1,)``)
        and ``norms`` is ``(B, T + 1)`` with ``norms[:, k] = ||dh_T/dh_{T-k}||``
        (``norms[:, 0]`` is the norm of the identity: 1, or ``sqrt(H)`` for ``"fro"``).

    Raises:
        ValueError: if ``jacobians`` is not ``(B, L, H, H)``, ``T`` is out of
            range, or ``norm`` is unknown.
    """
    B, L, H = _check_jacobians(jacobians, "gradient_norm_vs_lag")
    T = L if T is None else T
    if isinstance(T, bool) or not isinstance(T, int) or not 0 <= T <= L:
        raise ValueError(
            f"gradient_norm_vs_lag: expected an int 0 <= T <= L = {L}, received T={T!r}"
        )
    if norm not in _MATRIX_NORM_ORDERS:
        raise ValueError(
            f"gradient_norm_vs_lag: expected norm 'spectral' or 'fro', received {norm!r}"
        )
    # P_0 = I, (B, H, H)
    prod = torch.eye(H, dtype=jacobians.dtype, device=jacobians.device).expand(B, H, H)
    norms = [_matrix_norm(prod, norm)]
    for k in range(1, T + 1):
        prod = prod @ jacobians[:, T - k]  # P_k = P_{k-1} J_{T-k+1}; index T - k holds J_{T-k+1}
        norms.append(_matrix_norm(prod, norm))
    return torch.arange(T + 1), torch.stack(norms, dim=1)  # (T + 1,), (B, T + 1)


def attention_gradient_norm_vs_lag(
    layer: SequenceMap, x: Tensor, t: int | None = None, norm: str = "spectral"
) -> tuple[Tensor, Tensor]:
    """``||dy_t/dx_s||`` for every input position ``s``, for a sequence layer such as self-attention.

    In a self-attention layer ``y_t = sum_s w_ts (x_s W_V) W_O`` (plus the
    dependence of the weights on ``x``), so ``x_s`` reaches ``y_t`` directly,
    whatever ``t - s``: the maximum path length is one (Vaswani et al., 2017,
    Sec. 4 and Table 1). Compare with :func:`gradient_norm_vs_lag`, where the
    path from ``h_s`` to ``h_t`` passes through ``t - s`` step Jacobians.

    Args:
        layer: maps ``(B, L, D)`` to ``(B, L, D')`` (a tuple's first element is
            used), treating examples independently; for our multi-head
            self-attention pass ``lambda x: mha(x, x, x, is_causal=True)``.
            Put a module with dropout in ``eval()`` mode first, or the
            Jacobian is that of one random dropout pattern.
        x: ``(B, L, D)`` input (e.g. float64 for exact comparisons).
        t: output position (0-based, as indices of ``x``), ``0 <= t < L``;
            defaults to ``L - 1``.
        norm: ``"spectral"`` or ``"fro"``, as in :func:`gradient_norm_vs_lag`.

    Returns:
        ``(lags, norms)``: ``lags = t - s`` for ``s = 0 .. L - 1`` (int64,
        ``(L,)``; negative lags are future inputs, whose Jacobian is exactly
        zero under a causal mask) and ``norms`` ``(B, L)`` with
        ``norms[:, s] = ||dy_t/dx_s||``, each Jacobian being ``(D', D)``.
        Computed with ``torch.func.jacrev``, one example at a time; detached.

    Raises:
        ValueError: if ``x`` is not ``(B, L, D)``, ``t`` is out of range, or
            ``norm`` is unknown.
    """
    if not isinstance(x, Tensor) or x.dim() != 3:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(
            f"attention_gradient_norm_vs_lag: expected x of shape (B, L, D), received {got}"
        )
    B, L, _ = x.shape
    t = L - 1 if t is None else t
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < L:
        raise ValueError(
            f"attention_gradient_norm_vs_lag: expected an int 0 <= t < L = {L}, received t={t!r}"
        )
    if norm not in _MATRIX_NORM_ORDERS:
        raise ValueError(
            f"attention_gradient_norm_vs_lag: expected norm 'spectral' or 'fro', received {norm!r}"
        )

    def output_at_t(x_b: Tensor) -> Tensor:  # (L, D) -> (D',)
        y = layer(x_b[None])  # (1, L, D) -> (1, L, D') or a tuple
        y = y[0] if isinstance(y, tuple) else y
        return y[0, t]

    rows = []
    for b in range(B):
        jac = torch.func.jacrev(output_at_t)(x[b])  # (D', L, D): d y_t[i] / d x_s[j]
        rows.append(_matrix_norm(jac.permute(1, 0, 2), norm))  # (L, D', D) -> (L,)
    return t - torch.arange(L), torch.stack(rows).detach()  # (L,), (B, L)


def input_gradient_norm_vs_lag(
    model: SequenceMap, x: Tensor, t: int | None = None, norm: str = "spectral"
) -> tuple[Tensor, Tensor]:
    """``||dy_t/dx_{t-k}||`` for every lag ``k = 0 .. t``, input to output, for any causal sequence model.

    The one quantity that can be compared across a recurrent network and self-attention:
    for our :class:`RNN` or :class:`GRU` the output at ``t`` is the state ``h_{t+1}``
    (states are numbered from 1, inputs from 0), so the norm is ``||dh_{t+1}/dx_{t-k}||``,
    by the chain rule ``(dh_{t+1}/dh_{s+1}) (dh_{s+1}/dx_s)`` with ``s = t - k``: a
    product of ``k`` step Jacobians (Pascanu et al., 2013, Eq. 5) times one input
    Jacobian. For one self-attention layer it is the direct path of
    :func:`attention_gradient_norm_vs_lag`, which computes the same norms by input position
    (this function reorders them by lag and drops the future inputs).

    Args:
        model: maps ``(B, L, D)`` to ``(B, L, D')`` (a tuple's first element is used, so our
            ``RNN`` and ``GRU`` can be passed as they are: their first output is every state),
            treating examples independently; in ``eval()`` mode if it has dropout.
        x: ``(B, L, D)`` input.
        t: output position (0-based), ``0 <= t < L``; defaults to ``L - 1`` (for a recurrent
            model: the last state ``h_L``).
        norm: ``"spectral"`` or ``"fro"``, as in :func:`gradient_norm_vs_lag`.

    Returns:
        ``(lags, norms)``: ``lags`` is ``arange(t + 1)`` (int64, ``(t + 1,)``) and ``norms``
        ``(B, t + 1)`` with ``norms[:, k] = ||dy_t/dx_{t-k}||``, each Jacobian ``(D', D)``;
        detached.

    Raises:
        ValueError: as :func:`attention_gradient_norm_vs_lag` (``x`` not ``(B, L, D)``,
            ``t`` out of range, unknown ``norm``).
    """
    by_position_lags, by_position = attention_gradient_norm_vs_lag(model, x, t=t, norm=norm)
    t = int(by_position_lags[0])  # lags t - s for s = 0 .. L - 1: the first is t
    # positions s = t, t - 1, ..., 0 are lags 0 .. t
    return torch.arange(t + 1), by_position[:, : t + 1].flip(1)  # (t + 1,), (B, t + 1)


def gru_step_jacobian_terms(gru: GRU, x: Tensor, h0: Tensor | None = None) -> dict[str, Tensor]:
    """The three terms of a :class:`~transformer_lite.nn.recurrent.GRU`'s step Jacobian ``dh_k/dh_{k-1}``, analytically.

    PyTorch's GRU (the equations of :class:`~transformer_lite.nn.recurrent.GRU`), with
    ``a^r_k = W_ir x_k + b_ir + W_hr h_{k-1} + b_hr``, ``r_k = sigma(a^r_k)``, ``z_k`` alike with
    ``W_iz, W_hz``, ``g_k = W_hn h_{k-1} + b_hn``, ``n_k = tanh(W_in x_k + b_in + r_k * g_k)`` and
    ``h_k = (1 - z_k) * n_k + z_k * h_{k-1}``. The product rule on ``h_k`` gives three terms,
    with ``sigma' = sigma (1 - sigma)`` and ``tanh' = 1 - tanh**2``::

        dh_k/dh_{k-1} = diag(z_k)                                            "copy"
                      + diag(1 - z_k) dn_k/dh_{k-1}                          "candidate"
                      + diag(h_{k-1} - n_k) dz_k/dh_{k-1}                    "update gate"

        dn_k/dh_{k-1} = diag(1 - n_k**2) [diag(r_k) W_hn + diag(g_k * r_k (1 - r_k)) W_hr]
        dz_k/dh_{k-1} = diag(z_k (1 - z_k)) W_hz

    The copy term is the only one without a weight matrix: where ``z_k`` is near 1 the unit
    passes its old value (and a gradient) through unchanged, as the Elman RNN's
    ``diag(1 - h_k**2) W_hh`` cannot. The update ``h_k`` is Cho et al.'s (2014) Eq. (7); the
    reset gate acts after ``W_hn`` as in ``nn.GRU`` (see the class docstring for how this
    differs from Cho et al.'s Eq. 8).

    Args:
        gru: our :class:`GRU` (use ``GRU.from_torch`` for an ``nn.GRU``); with or without biases.
        x: ``(B, L, input_size)`` input sequence.
        h0: optional ``(B, H)`` initial state (zeros if omitted).

    Returns:
        ``{"copy": ..., "candidate": ..., "update gate": ...}``, each ``(B, L, H, H)`` with
        ``[:, k - 1]`` the term of ``dh_k/dh_{k-1}`` (row ``i``, column ``j``:
        ``d h_k[i] / d h_{k-1}[j]``); their sum is :func:`gru_step_jacobians`. Detached.

    Raises:
        ValueError: if ``gru`` is not our :class:`GRU`, or ``x``/``h0`` have the wrong shape
            (see :meth:`GRU.forward`).
    """
    if not isinstance(gru, GRU):
        raise ValueError(
            f"gru_step_jacobian_terms: expected a transformer_lite GRU, received "
            f"{type(gru).__name__} (use rnn_step_jacobians for an RNN)"
        )
    h_prev, _ = _states(gru, x, h0)  # (B, L, H): h_{k-1}
    with torch.no_grad():
        H = gru.hidden_size
        gi = x @ gru.weight_ih.T  # (B, L, 3H)
        gh = h_prev @ gru.weight_hh.T  # (B, L, 3H)
        if gru.bias_ih is not None:
            gi, gh = gi + gru.bias_ih, gh + gru.bias_hh
        i_r, i_z, i_n = gi.chunk(3, dim=-1)  # 3 x (B, L, H)
        h_r, h_z, g = gh.chunk(3, dim=-1)  # 3 x (B, L, H); g = W_hn h_{k-1} + b_hn
        r = torch.sigmoid(i_r + h_r)  # (B, L, H)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * g)
        W_hr, W_hz, W_hn = gru.weight_hh.chunk(3, dim=0)  # 3 x (H, H)
        # row scalings (B, L, H, 1) times (H, H) -> (B, L, H, H)
        dn = (1 - n**2)[..., None] * (r[..., None] * W_hn + (g * r * (1 - r))[..., None] * W_hr)
        eye = torch.eye(H, dtype=x.dtype, device=x.device)
        return {
            "copy": z[..., None] * eye,  # diag(z_k)
            "candidate": (1 - z)[..., None] * dn,
            "update gate": ((h_prev - n) * z * (1 - z))[..., None] * W_hz,
        }


def gru_step_jacobians(gru: GRU, x: Tensor, h0: Tensor | None = None) -> Tensor:
    """Analytic step Jacobians ``J_k = dh_k/dh_{k-1}`` of our :class:`~transformer_lite.nn.recurrent.GRU`.

    The sum of the three terms of :func:`gru_step_jacobian_terms`; equal to
    :func:`autograd_step_jacobians` (up to float rounding) without differentiating anything.

    Args:
        gru: our :class:`GRU`.
        x: ``(B, L, input_size)``.
        h0: optional ``(B, H)`` initial state.

    Returns:
        ``(B, L, H, H)``, the layout of :func:`rnn_step_jacobians`, detached.

    Raises:
        ValueError: as :func:`gru_step_jacobian_terms`.
    """
    terms = gru_step_jacobian_terms(gru, x, h0)
    return terms["copy"] + terms["candidate"] + terms["update gate"]

"""Recurrent baselines: an Elman RNN and a GRU, written out one time step at a time.

A recurrent network keeps one state vector per example and updates it once
per position, ``h_t = F(h_{t-1}, x_t)``. The update at position ``t`` needs
the state from position ``t - 1``, so the loop over positions cannot be
parallelized; the examples of a batch are independent, so each step processes
the whole batch at once. Contrast with self-attention, where all positions of
a known sequence are computed together within a layer.

Sources:

* Elman (1990), "Finding Structure in Time", Cognitive Science 14: the simple
  recurrent network, here in PyTorch's form
  ``h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``.
* Cho et al. (2014), "Learning Phrase Representations using RNN
  Encoder-Decoder for Statistical Machine Translation", Sec. 2.3, Eqs. (5)-(8): the gated
  recurrent unit (GRU). We follow PyTorch's variant (see :class:`GRU`).

Index convention used here and in :mod:`transformer_lite.chapters.jacobians`: ``h_0``
is the initial state and ``h_1, ..., h_L`` are the states after reading
``x_1, ..., x_L``; in code ``all_hidden[:, t - 1]`` holds ``h_t``.

Parameter names and their initialisation, uniform on
``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``, are those of ``nn.RNN`` and
``nn.GRU`` (without the ``_l0`` suffix), so :meth:`RNN.from_torch` and
:meth:`GRU.from_torch` copy tensors one for one.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..checks import check_choice, check_positive_int, check_sequences, check_shape

__all__ = ["RNN", "GRU"]

_NONLINEARITIES = {"tanh": torch.tanh, "relu": torch.relu}


class _Recurrent(nn.Module):
    """Shared parts of :class:`RNN` and :class:`GRU`: parameters, input checks, the time loop."""

    n_gates = 1  # rows of weight_ih / weight_hh per hidden unit (GRU: 3)

    def __init__(self, input_size: int, hidden_size: int, bias: bool) -> None:
        super().__init__()
        for arg, n in (("input_size", input_size), ("hidden_size", hidden_size)):
            check_positive_int(self, arg, n)
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = self.n_gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))  # (G*H, input_size)
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))  # (G*H, H)
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(rows))  # (G*H,)
            self.bias_hh = nn.Parameter(torch.empty(rows))  # (G*H,)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def _affine(self, x_t: Tensor, h_prev: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``(W_ih x_t + b_ih, W_hh h_prev + b_hh)``, each ``(B, G*H)``."""
        gi = x_t @ self.weight_ih.T  # (B, input_size) @ (input_size, G*H) -> (B, G*H)
        gh = h_prev @ self.weight_hh.T  # (B, H) @ (H, G*H) -> (B, G*H)
        if self.bias_ih is not None:
            gi, gh = gi + self.bias_ih, gh + self.bias_hh
        return gi, gh

    def cell(self, x_t: Tensor, h_prev: Tensor) -> Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Run the recurrence over a batch of sequences.

        Args:
            x: ``(B, L, input_size)`` floating tensor, batch-first.
            h0: optional initial state ``h_0`` of shape ``(B, hidden_size)``,
                same dtype as ``x``; zeros if omitted. (``nn.RNN`` / ``nn.GRU``
                take ``(num_layers, B, hidden_size)`` instead.)

        Returns:
            ``(all_hidden, last)``: ``all_hidden`` is ``(B, L, hidden_size)``
            with ``all_hidden[:, t - 1] = h_t``, and ``last = h_L`` is
            ``(B, hidden_size)`` (equal to ``all_hidden[:, -1]``). For
            ``L = 0`` ``all_hidden`` is empty and ``last`` is ``h_0``.

        Raises:
            ValueError: for an ``x`` or ``h0`` of other shapes or dtypes.
        """
        check_sequences(self, self.input_size, x=x)
        B, L, _ = x.shape
        if h0 is None:
            h0 = x.new_zeros(B, self.hidden_size)
        check_shape(self, "h0", h0, (B, self.hidden_size), "(B, hidden_size)", like=x)
        # The loop is sequential across positions: step t needs h_{t-1} from step t - 1.
        # Each step is parallel across the batch: one matrix product handles all B examples.
        h, states = h0, []
        for t in range(L):
            h = self.cell(x[:, t], h)  # (B, input_size), (B, H) -> (B, H)
            states.append(h)
        # (B, L, H)
        all_hidden = torch.stack(states, dim=1) if states else x.new_zeros(B, 0, self.hidden_size)
        return all_hidden, h

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"


class RNN(_Recurrent):
    """Elman recurrent network (Elman, 1990), one layer, batch-first.

    ``h_t = phi(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` with ``phi = tanh``
    (or ``relu``), the update of ``nn.RNN``. The two biases are redundant (only
    their sum matters); both are kept so that ``nn.RNN`` weights copy one for one.

    Args:
        input_size: features per position of the input.
        hidden_size: width H of the state ``h_t``.
        nonlinearity: ``"tanh"`` (default) or ``"relu"``.
        bias: whether to use ``b_ih`` and ``b_hh``.

    Attributes:
        weight_ih: ``(H, input_size)``; weight_hh: ``(H, H)``; bias_ih, bias_hh:
            ``(H,)`` or ``None``.

    Raises:
        ValueError: for sizes or a ``nonlinearity`` other than the above.
    """

    def __init__(
        self, input_size: int, hidden_size: int, nonlinearity: str = "tanh", bias: bool = True
    ) -> None:
        check_choice(self, "nonlinearity", nonlinearity, tuple(_NONLINEARITIES))
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = nonlinearity

    def cell(self, x_t: Tensor, h_prev: Tensor) -> Tensor:
        """One step: ``x_t`` ``(B, input_size)``, ``h_prev`` ``(B, H)`` -> ``h_t`` ``(B, H)``."""
        gi, gh = self._affine(x_t, h_prev)  # (B, H) each
        return _NONLINEARITIES[self.nonlinearity](gi + gh)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, nonlinearity={self.nonlinearity!r}"

    @classmethod
    def from_torch(cls, m: nn.RNN) -> RNN:
        """Build an :class:`RNN` with the weights of a single-layer ``torch.nn.RNN``.

        Ours has one layer only, so its initial and final states are ``(B, hidden_size)``, where
        ``torch.nn.RNN`` adds a leading ``num_layers`` axis: ``(1, B, hidden_size)``.

        ``m.batch_first`` may be either value: our module is always batch-first,
        so feed it ``(B, L, input_size)``. Dtype and device follow ``m``.

        Raises:
            ValueError: for another module, or one of several layers or two directions.
        """
        from ..interop import rnn_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return rnn_from_torch(m, cls)


class GRU(_Recurrent):
    """Gated recurrent unit (Cho et al., 2014), one layer, batch-first, in PyTorch's form.

    With ``sigma`` the logistic sigmoid and ``*`` the elementwise product::

        r_t = sigma(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)          reset gate
        z_t = sigma(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)          update gate
        n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))   candidate state
        h_t = (1 - z_t) * n_t + z_t * h_{t-1}

    These are the equations of ``nn.GRU``. The published version of Cho et al.
    (2014, Sec. 2.3, Eq. 8) applies the reset gate *before* the recurrent
    matrix, ``tanh(W x_t + U (r_t * h_{t-1}))``; PyTorch (like cuDNN, and
    Keras with ``reset_after=True``) applies it *after*, ``r_t * (U h_{t-1} + b)``.
    The two are different functions; we follow PyTorch so that
    :meth:`from_torch` is exact. The update ``h_t`` is Cho et al.'s Eq. (7).
    When ``z_t`` is near 1 the state is copied almost unchanged, which is how
    the gate lets gradients survive many steps.

    Args:
        input_size: features per position of the input.
        hidden_size: width H of the state.
        bias: whether to use the biases.

    Attributes:
        weight_ih: ``(3H, input_size)``, rows ``[W_ir; W_iz; W_in]``;
        weight_hh: ``(3H, H)``, rows ``[W_hr; W_hz; W_hn]``; bias_ih, bias_hh:
            ``(3H,)`` (same row order) or ``None``. The layout of ``nn.GRU``.

    Raises:
        ValueError: for a size that is not a positive int.
    """

    n_gates = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True) -> None:
        super().__init__(input_size, hidden_size, bias)

    def cell(self, x_t: Tensor, h_prev: Tensor) -> Tensor:
        """One step: ``x_t`` ``(B, input_size)``, ``h_prev`` ``(B, H)`` -> ``h_t`` ``(B, H)``."""
        gi, gh = self._affine(x_t, h_prev)  # (B, 3H) each
        i_r, i_z, i_n = gi.chunk(3, dim=-1)  # (B, 3H) -> 3 x (B, H)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)  # (B, 3H) -> 3 x (B, H)
        r = torch.sigmoid(i_r + h_r)  # reset gate
        z = torch.sigmoid(i_z + h_z)  # update gate
        n = torch.tanh(i_n + r * h_n)  # candidate; r multiplies (W_hn h + b_hn)
        return (1 - z) * n + z * h_prev

    @classmethod
    def from_torch(cls, m: nn.GRU) -> GRU:
        """Build a :class:`GRU` with the weights of a single-layer ``torch.nn.GRU``.

        Ours has one layer only, so its initial and final states are ``(B, hidden_size)``, where
        ``torch.nn.GRU`` adds a leading ``num_layers`` axis: ``(1, B, hidden_size)``.

        ``m.batch_first`` may be either value: our module is always batch-first.
        Dtype and device follow ``m``.

        Raises:
            ValueError: for another module, or one of several layers or two directions.
        """
        from ..interop import gru_from_torch  # noqa: PLC0415 (interop imports nn: a cycle at top level)

        return gru_from_torch(m, cls)

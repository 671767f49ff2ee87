"""The options a model's configuration may take, written once as ``Literal`` types.

Each model has a frozen dataclass beside it (``DecoderOnlyConfig`` in ``models/decoder_only.py``,
``GRUConfig`` in ``models/recurrent_lm.py``, ...), handed whole to the model. A field typed with
one of the aliases below is checked against the alias's values by :func:`check_options`, which
every configuration calls on construction: the type is the list of options, so the two cannot
drift apart. Likewise a field typed ``int`` (a size: a width, a count of heads or layers, a
vocabulary) must be a positive int, checked by :func:`check_sizes`, the first check of every
configuration.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

from .checks import check_choice, check_positive_int

__all__ = ["Activation", "FFActivation", "Norm", "Positional", "check_sizes", "check_options"]

Activation = Literal["relu", "gelu", "swiglu"]  # swiglu: the gated network of Shazeer (2020)
FFActivation = Literal["relu", "gelu"]  # the position-wise network of Vaswani et al. (2017)
Norm = Literal["layernorm", "rmsnorm"]
Positional = Literal["learned", "sinusoidal", "rotary"]


def check_options(config) -> None:
    """Raise ``ValueError`` for a field typed ``Literal[...]`` whose value is not one of its options.

    The message names the configuration, the field, the options and the value received.
    """
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        kind = hints[field.name]
        if typing.get_origin(kind) is Literal:
            check_choice(config, field.name, getattr(config, field.name), typing.get_args(kind))


def check_sizes(config) -> None:
    """Raise ``ValueError`` for a field typed ``int`` that is not a positive int, or typed
    ``int | None`` that is neither ``None`` nor a positive int; the fields in their order.

    The message names the configuration, the field and the value received.
    """
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        kind, value = hints[field.name], getattr(config, field.name)
        if kind is int or (typing.get_args(kind) == (int, type(None)) and value is not None):
            check_positive_int(config, field.name, value)

"""The options a model's configuration may take, written once as ``Literal`` types.

Each model has a frozen dataclass beside it (``DecoderOnlyConfig`` in ``models/decoder_only.py``,
``GRUConfig`` in ``models/recurrent_lm.py``, ...), handed whole to the model. A field typed with
one of the aliases below is checked against the alias's values by :func:`check_options`, which
every configuration calls on construction: the type is the list of options, so the two cannot
drift apart.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

from .checks import check_choice

__all__ = ["Activation", "FFActivation", "Norm", "Positional", "check_options"]

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

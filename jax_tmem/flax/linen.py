"""Flax linen drop-ins: ``Dense`` and ``DenseGeneral`` with a ``recipe`` field (see ``jax_tmem.flax``)."""

from __future__ import annotations

import functools
from typing import Any

from flax import linen as _nn

from jax_tmem.api import dot_general_op
from jax_tmem.ops.recipes import get_recipe


@functools.lru_cache(maxsize=None)
def _filled_op(recipe, input_activation=None):
    """The op ``_resolve`` fills in for ``recipe``: a function of its own (not ``dot_general_op(recipe)`` itself),
    so that a jax_tmem op the user passes (``dot_general=jax_tmem.dot_general_op("mxfp8")``) is told apart from
    it and kept. One per recipe, so jit caches see the same object."""
    inner = dot_general_op(recipe, input_activation=input_activation)

    def op(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs):
        return inner(lhs, rhs, dimension_numbers, precision, preferred_element_type, **kwargs)
    op.__name__ = op.__qualname__ = inner.__name__
    op.jax_tmem_recipe = recipe
    op.jax_tmem_filled = True
    return op


def _resolve(module):
    """Validates ``recipe`` and fills ``dot_general`` with the recipe's op unless the user set one (a user's op,
    jax_tmem's or another, is kept; with a quantized recipe as well it is an error, as in the nnx drop-ins).
    Linen modules are frozen dataclasses; this runs in __post_init__, before Flax binds the module, and again in
    every clone, whose ``dot_general`` is then the op filled in before (re-filled: the clone may change ``recipe``)."""
    recipe = get_recipe(module.recipe)
    given = module.dot_general
    if module.dot_general_cls is None and (given is None or getattr(given, "jax_tmem_filled", False)):
        object.__setattr__(module, "dot_general", _filled_op(recipe, module.input_activation))
    elif module.input_activation is not None:
        raise ValueError(f"jax_tmem.flax.linen.{type(module).__name__}: input_activation= runs in jax_tmem's own "
                         "dot_general; it cannot be combined with a dot_general / dot_general_cls of yours")
    elif recipe.quantized:
        raise ValueError(f"jax_tmem.flax.linen.{type(module).__name__}: recipe={recipe.name!r} sets dot_general; "
                         "pass one of them, not both")


class Dense(_nn.Dense):
    """``flax.linen.Dense`` running on jax_tmem; ``recipe``: "bf16" (default), "fp8", "mxfp8", "nvfp4".
    ``input_activation`` ("relu", "gelu", "gelu_tanh" = ``nn.gelu``'s default, "silu"): the layer computes
    ``act(inputs) . kernel`` with the activation's backward inside its gradient GEMM (``jax_tmem.dot_general``'s
    ``input_activation``): ``Dense(d, input_activation="gelu_tanh")(z)`` for ``Dense(d)(nn.gelu(z))``, the same
    parameters."""
    recipe: Any = "bf16"
    input_activation: Any = None

    def __post_init__(self):
        _resolve(self)
        super().__post_init__()


class DenseGeneral(_nn.DenseGeneral):
    """``flax.linen.DenseGeneral`` running on jax_tmem; ``recipe`` and ``input_activation`` as for :class:`Dense`."""
    recipe: Any = "bf16"
    input_activation: Any = None

    def __post_init__(self):
        _resolve(self)
        super().__post_init__()

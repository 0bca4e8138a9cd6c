"""Flax linen drop-ins: ``Dense`` and ``DenseGeneral`` with a ``recipe`` field (see ``jax_tmem.flax``)."""

from __future__ import annotations

from typing import Any

from flax import linen as _nn

from jax_tmem.api import dot_general_op
from jax_tmem.ops.recipes import get_recipe


def _resolve(module):
    """Validates ``recipe`` and fills ``dot_general`` with the recipe's op unless the user set one
    (linen modules are frozen dataclasses; this runs in __post_init__, before Flax binds the module)."""
    recipe = get_recipe(module.recipe)
    ours = module.dot_general is None or getattr(module.dot_general, "jax_tmem_recipe", None) is not None
    if ours and module.dot_general_cls is None:  # unset, or a recipe's op (a clone, maybe with another recipe)
        object.__setattr__(module, "dot_general", dot_general_op(recipe))
    elif recipe.quantized:
        raise ValueError(f"jax_tmem.flax.linen.{type(module).__name__}: recipe={recipe.name!r} sets dot_general; "
                         "pass one of them, not both")


class Dense(_nn.Dense):
    """``flax.linen.Dense`` running on jax_tmem; ``recipe``: "bf16" (default), "fp8", "mxfp8", "nvfp4"."""
    recipe: Any = "bf16"

    def __post_init__(self):
        _resolve(self)
        super().__post_init__()


class DenseGeneral(_nn.DenseGeneral):
    """``flax.linen.DenseGeneral`` running on jax_tmem; ``recipe`` as for :class:`Dense`."""
    recipe: Any = "bf16"

    def __post_init__(self):
        _resolve(self)
        super().__post_init__()

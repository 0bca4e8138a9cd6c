"""Flax nnx drop-ins: ``Linear``, ``LinearGeneral`` and ``Einsum`` taking ``recipe=`` (see ``jax_tmem.flax``)."""

from __future__ import annotations

from flax import nnx as _nnx

from jax_tmem.api import dot_general_op, einsum_op as _einsum_op_for
from jax_tmem.ops.recipes import get_recipe


def _op(cls_name, recipe, given, make):
    """(the recipe the layer runs, its GEMM op): ``recipe``'s op, or the user's own (with the default recipe; a
    jax_tmem op names its recipe, so ``layer.recipe`` tells which)."""
    r = get_recipe(recipe)
    if given is None:
        return r, make(r)
    if r.quantized:
        raise ValueError(f"jax_tmem.flax.nnx.{cls_name}: recipe={r.name!r} sets the GEMM op; pass one of them, not both")
    return getattr(given, "jax_tmem_recipe", r), given


def _with_input_activation(cls_name, input_activation, given):
    """dot_general_op with ``input_activation`` bound (see jax_tmem.flax.linen.Dense); refused beside a user's op."""
    if input_activation is not None and given is not None:
        raise ValueError(f"jax_tmem.flax.nnx.{cls_name}: input_activation= runs in jax_tmem's own dot_general; it "
                         "cannot be combined with a dot_general of yours")
    return lambda r: dot_general_op(r, input_activation=input_activation)


class Linear(_nnx.Linear):
    """``flax.nnx.Linear`` running on jax_tmem; ``recipe``: "bf16" (default), "fp8", "mxfp8", "nvfp4";
    ``input_activation`` as for ``jax_tmem.flax.linen.Dense`` (``act(x) . kernel``, its backward fused)."""

    def __init__(self, in_features, out_features, *, recipe="bf16", dot_general=None, input_activation=None, **kwargs):
        make = _with_input_activation("Linear", input_activation, dot_general)
        r, op = _op("Linear", recipe, dot_general, make)
        super().__init__(in_features, out_features, dot_general=op, **kwargs)
        self.recipe = r.name


class LinearGeneral(_nnx.LinearGeneral):
    """``flax.nnx.LinearGeneral`` running on jax_tmem; ``recipe`` and ``input_activation`` as for :class:`Linear`."""

    def __init__(self, in_features, out_features, *, recipe="bf16", dot_general=None, input_activation=None,
                 **kwargs):
        make = _with_input_activation("LinearGeneral", input_activation, dot_general or kwargs.get("dot_general_cls"))
        if kwargs.get("dot_general_cls") is not None:  # the user's class runs the GEMM (as in the linen drop-ins)
            _op("LinearGeneral", recipe, kwargs["dot_general_cls"], dot_general_op)  # (refuses a quantized recipe too)
            super().__init__(in_features, out_features, **kwargs)
            self.recipe = None
            return
        r, op = _op("LinearGeneral", recipe, dot_general, make)
        super().__init__(in_features, out_features, dot_general=op, **kwargs)
        self.recipe = r.name


class Einsum(_nnx.Einsum):
    """``flax.nnx.Einsum`` whose contraction runs on jax_tmem (``jax_tmem.einsum``); ``recipe`` as for
    :class:`Linear`."""

    def __init__(self, einsum_str, kernel_shape, bias_shape=None, *, recipe="bf16", einsum_op=None, **kwargs):
        r, op = _op("Einsum", recipe, einsum_op, _einsum_op_for)
        super().__init__(einsum_str, kernel_shape, bias_shape, einsum_op=op, **kwargs)
        self.recipe = r.name

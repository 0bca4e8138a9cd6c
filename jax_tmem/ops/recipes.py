"""Training recipes: how the operands of one ``dot_general`` are quantized in its forward GEMM and in the
two GEMMs of its backward pass. Stateless: every scale is computed from the tensor it scales, inside the
step (current scaling), so nothing lives outside ``params`` and ``scan``, ``remat``, gradient
accumulation and checkpoints work unchanged.

- ``"bf16"`` (default): no quantization. The GEMMs run in the operands' dtype (Flax's ``dtype=``;
  bfloat16 for bf16 training) through :func:`jax_tmem.dot_general` and its custom VJP.
- ``"fp8"``: per-tensor current scaling (Transformer Engine's "Float8CurrentScaling"). Forward: x and w
  in float8_e4m3fn, each scaled by ``amax / 448``; backward: the cotangent in float8_e5m2 (``amax /
  57344``) times the *saved* e4m3 operands. The scales' product multiplies the f32 accumulator in the
  kernel's epilogue (the GEMM's ``scale`` operand), so no extra pass over the output. Residuals: the
  e4m3 operands and their scales (half the memory of bf16 residuals); this is exact for the recipe,
  whose backward differentiates the quantized product (straight-through for the rounding). Operands
  the tensor cores read K-major only are transposed by XLA first (fused into the quantization where XLA
  can; the backward's MN-major operands are such).
- ``"mxfp8"``: MXFP8 (e4m3, one UE8M0 scale per 32) along each GEMM's contraction: forward x and w along
  K, dgrad the cotangent and w along N, wgrad x and the cotangent along M (:func:`jax_tmem.quantize`, the
  fused kernel on the GPU). Every tensor is quantized from high precision (never re-quantized), so the
  residuals are the high-precision operands (as JAX's and TE's MXFP8 recipes keep them).
- ``"nvfp4"``: NVFP4 (e2m1, UE4M3 per 16) with per-tensor float32 global scales ``amax / (6 * 448)``,
  forward and backward, along each GEMM's contraction as for "mxfp8"; round to nearest.
  ``"nvfp4_sr"`` (``Recipe("nvfp4", stochastic_rounding=True)``) rounds the cotangent stochastically in
  both backward GEMMs (unbiased; the random numbers come from the cotangent's own bits and
  ``Recipe.seed``, so it stays stateless and repeatable); the forward rounds to nearest. No Hadamard
  transforms yet. On Hopper there is no 4-bit tensor-core instruction: the GEMMs run XLA's exact bf16
  dequantize + bf16 dot, the global scales multiplying the f32 product (the log says so).

Contracting sizes that are not a multiple of the block size are zero-padded (zeros change no sum and
no block's amax). ``precision`` does not apply to the quantized recipes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import jax
import jax.numpy as jnp
import ml_dtypes
from jax import lax
import numpy as np

from jax_tmem._core import arch as _arch
from jax_tmem.ops import gemm as _gemm, scaled_dot

E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


@dataclass(frozen=True)
class Recipe:
    """A training recipe (hashable, static). ``kind``: "bf16", "fp8", "mxfp8" or "nvfp4"; ``fwd_dtype`` /
    ``bwd_dtype``: the fp8 types of the forward operands and of the cotangent ("fp8" only);
    ``stochastic_rounding`` ("nvfp4" only): the cotangent rounded stochastically, with ``seed``."""
    kind: str
    fwd_dtype: Optional[np.dtype] = None
    bwd_dtype: Optional[np.dtype] = None
    stochastic_rounding: bool = False
    seed: int = 0

    @property
    def name(self) -> str:
        return self.kind + ("_sr" if self.stochastic_rounding else "")

    @property
    def quantized(self) -> bool:
        return self.kind != "bf16"


RECIPES = {r.name: r for r in (Recipe("bf16"), Recipe("fp8", E4M3, E5M2), Recipe("mxfp8"), Recipe("nvfp4"),
                               Recipe("nvfp4", stochastic_rounding=True))}


def get_recipe(recipe) -> Recipe:
    """A Recipe from itself or its name (None: "bf16"); ValueError naming the choices otherwise."""
    if recipe is None:
        return RECIPES["bf16"]
    if isinstance(recipe, Recipe):
        if recipe.kind not in RECIPES:
            raise ValueError(f"jax_tmem: Recipe kind {recipe.kind!r} is not one of {sorted(RECIPES)}")
        if recipe.stochastic_rounding and recipe.kind != "nvfp4":
            raise ValueError(f"jax_tmem: stochastic_rounding is for the nvfp4 recipe, not {recipe.kind!r}")
        if recipe.kind == "fp8" and (np.dtype(recipe.fwd_dtype) not in (E4M3, E5M2)
                                     or np.dtype(recipe.bwd_dtype) not in (E4M3, E5M2)):
            raise ValueError("jax_tmem: an fp8 Recipe takes float8_e4m3fn / float8_e5m2 fwd_dtype and bwd_dtype")
        return recipe
    if isinstance(recipe, str) and recipe in RECIPES:
        return RECIPES[recipe]
    raise ValueError(f"jax_tmem: recipe={recipe!r} is not a training recipe; use one of {sorted(RECIPES)} "
                     "or a jax_tmem.Recipe")


# ---- "fp8": per-tensor current scaling -------------------------------------------------------

def fp8_quantize(x, dtype):
    """(x / s) in fp8 ``dtype`` and the float32 scale ``s = amax(|x|) / max(dtype)`` (1 for an all-zero x)."""
    dmax = np.float32(ml_dtypes.finfo(dtype).max)
    xf = x.astype(jnp.float32)
    amax = jnp.max(jnp.abs(xf))
    s = jnp.where(amax > 0, amax / dmax, jnp.float32(1.0))
    return jnp.clip(xf / s, -dmax, dmax).astype(dtype), s


def _scaled_gemm(a, b, scale, dn, out_dtype, requested):
    """a . b (dimension numbers dn) times the float32 scalar ``scale`` (the GEMM's scale operand)."""
    return _gemm.bind_gemm(a, b, jnp.reshape(scale, (1,)).astype(jnp.float32), dimension_numbers=dn,
                           out_dtype=out_dtype, epilogue=_gemm.Epilogue(has_scale=True), requested=requested,
                           allow_tf32=True)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5, 6))
def fp8_dot_general(lhs, rhs, dn, out_dtype, requested, recipe, in_dtypes):
    """``in_dtypes``: (lhs, rhs) dtypes, the gradients' dtypes (the residuals are fp8)."""
    return _fp8_fwd(lhs, rhs, dn, out_dtype, requested, recipe, in_dtypes)[0]


def _fp8_fwd(lhs, rhs, dn, out_dtype, requested, recipe, in_dtypes):
    aq, sa = fp8_quantize(lhs, recipe.fwd_dtype)
    bq, sb = fp8_quantize(rhs, recipe.fwd_dtype)
    # The fp8 residuals travel as their bytes: under remat with a policy that saves them, JAX rounds every
    # floating residual with reduce_precision(exponent and mantissa bits of its type), which for float8_e4m3fn
    # (no infinities; its top exponent holds 256-448) made |x| >= 256 infinite, then NaN (2026-11-28).
    as_bytes = lambda t: lax.bitcast_convert_type(t, jnp.uint8)
    return _scaled_gemm(aq, bq, sa * sb, dn, out_dtype, requested), (as_bytes(aq), as_bytes(bq), sa, sb)


def _fp8_bwd(dn, out_dtype, requested, recipe, in_dtypes, res, g):
    aq, bq, sa, sb = res
    aq, bq = (lax.bitcast_convert_type(t, recipe.fwd_dtype) for t in (aq, bq))
    requested = "prefer" if requested == "kernel" else requested
    gq, sg = fp8_quantize(g, recipe.bwd_dtype)
    dn_l, perm_l, dn_r, perm_r = _gemm._grad_dims(aq.ndim, bq.ndim, dn)
    da = _scaled_gemm(gq, bq, sg * sb, dn_l, _gemm._grad_out_dtype(in_dtypes[0]), requested)
    db = _scaled_gemm(aq, gq, sa * sg, dn_r, _gemm._grad_out_dtype(in_dtypes[1]), requested)
    return jnp.transpose(da, perm_l).astype(in_dtypes[0]), jnp.transpose(db, perm_r).astype(in_dtypes[1])


fp8_dot_general.defvjp(_fp8_fwd, _fp8_bwd)


# ---- the entry --------------------------------------------------------------------------------

def recipe_dot_general(lhs, rhs, dn, out_dtype, recipe: Recipe, requested: str):
    """``dot_general(lhs, rhs, dn)`` under a quantized ``recipe`` (validated operands, float dtypes),
    output ``out_dtype``, differentiable with the recipe's backward pass."""
    if recipe.kind == "fp8":
        return fp8_dot_general(lhs, rhs, dn, np.dtype(out_dtype), requested, recipe,
                               (np.dtype(lhs.dtype), np.dtype(rhs.dtype)))
    if out_dtype not in _arch.OUT_TYPES:
        out_dtype = np.dtype("bfloat16")
    return scaled_dot.scaled_dot_general(lhs, rhs, dn, out_dtype, [recipe.kind] * 3, path=requested,
                                         per_tensor=True, sr_seed=recipe.seed if recipe.stochastic_rounding else None)

"""The public matmul API: ``matmul`` and ``dot_general`` (a drop-in for ``lax.dot_general``).

Both validate their inputs at trace time (a clear exception naming the argument), turn shapes and
broadcasting into dimension numbers, and call the differentiable GEMM op (``jax_tmem.ops.gemm``), which
decides the path (kernel or XLA, see ``_core.config``) and whose backward pass is two more GEMMs
through the same path.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from jax_tmem._checks import (_OUT_NAMES, SUPPORTED_DTYPES, _allow_tf32, _check_activation, _check_array,
                              _check_dims, _check_dtype, _check_out_dtype, _check_path, _check_precision, _promote_pair,
                              _quantize_configs, _symbolic_path)
from jax_tmem._core import arch as _arch, canon as _canon, config as _config
from jax_tmem.ops import act_dot as _act_dot, recipes as _recipes, scaled_dot, scaled_gemm
from jax_tmem._core.arch import common_dtype
from jax_tmem.ops.gemm import Epilogue, apply_activation, gemm


# ---- public API -------------------------------------------------------------------------------

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                path: Optional[str] = None, quantize=None, recipe=None, c=None, input_activation: Optional[str] = None,
                **kwargs: Any):
    """A drop-in for :func:`jax.lax.dot_general` that runs jax_tmem's kernels where they apply.

    Contracting and batch dims may sit anywhere: they become operand majorness (K-major or MN-major)
    and strides for the kernels, never a transpose in memory; layouts the kernels cannot read go to
    ``lax.dot_general`` (``JAX_TMEM_LOG=1`` says so). ``out_sharding`` (a ``NamedSharding``, or a
    ``PartitionSpec`` of the mesh in context) is the result's sharding, as for ``lax.dot_general``: under
    an explicit-axis mesh the result is resharded to it, otherwise it is a sharding constraint; under
    ``jit`` the GEMM partitions to produce it (a sharded contraction summed by a reduce-scatter when the
    output is wanted split over the contracting mesh axes; ops/partition.py).
    Operands of other dtypes (integers, float64, complex) go to ``lax.dot_general`` unchanged.

    ``quantize``: None, or a block-scaled format ("mxfp8", "mxfp8_e5m2", "mxfp4", "nvfp4", a
    ``jax.nn.BlockScaleConfig``, or ``[lhs, rhs(, grad)]``): both operands are quantized on the fly along
    the contraction and multiplied by :func:`scaled_dot_general` (its backward recipe too; ``precision``
    does not apply).

    ``c``: optional addend of the result's shape and dtype (BLAS's C with beta = 1): the result is
    ``dot + c``, summed in float32 in the kernel's epilogue and rounded once, with no separate XLA add (a
    residual connection costs no extra pass over the activations: a decode layer's ``x + o_proj(h)``);
    for more than 8 output rows XLA adds it to the float32 product instead (the same value; the epilogue
    measured slower there, ``JAX_TMEM_LOG=1`` says so). Its gradient is the output's. Not combined with
    ``quantize`` or ``recipe`` (add it after the call).

    ``input_activation`` ("relu", "gelu", "gelu_tanh", "silu"): ``dot_general(act(lhs), rhs)`` whose backward
    multiplies by ``act'(lhs)`` in the gradient GEMM's epilogue (ops/act_dot.py); not with ``quantize``, a
    quantizing ``recipe`` or ``c``.

    ``recipe``: a training recipe (``jax_tmem.RECIPES``: "bf16" (default, no quantization), "fp8"
    (per-tensor current scaling, e4m3 forward, e5m2 gradients), "mxfp8", "nvfp4"; or a
    ``jax_tmem.Recipe``): how the forward GEMM and the two backward GEMMs quantize their operands
    (``jax_tmem.ops.recipes`` documents each). Stateless (scales come from the tensors), so it works
    under scan, remat and gradient accumulation. The Flax drop-ins (``jax_tmem.flax``) take it as
    ``recipe=``.

    Example::

        y = jax_tmem.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())))
        nn.Dense(128, dot_general=jax_tmem.dot_general)
        y8 = jax_tmem.dot_general(x, w, (((1,), (0,)), ((), ())), quantize="mxfp8")
    """
    out_sharding = kwargs.pop("out_sharding", None)
    if out_sharding is not None:
        _out_sharding_mesh(out_sharding, "dot_general")
        y = dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, path=path, quantize=quantize,
                        recipe=recipe, c=c, input_activation=input_activation, **kwargs)
        return constrain(y, out_sharding, "dot_general")
    unknown = set(kwargs)
    if unknown:
        raise TypeError(f"jax_tmem.dot_general: unexpected keyword(s) {sorted(unknown)}")
    _check_path(path)
    lhs, rhs = _check_array(lhs, "lhs"), _check_array(rhs, "rhs")
    _check_precision(precision, "dot_general")
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        # (a bare int stands for a one-dim tuple, as lax.dot_general takes it)
        lc, rc, lb, rb = ((int(x),) if isinstance(x, (int, np.integer)) else tuple(int(d) for d in x)
                          for x in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise TypeError(f"jax_tmem.dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), each a tuple of ints, got {dimension_numbers!r}") from None
    dimension_numbers = ((lc, rc), (lb, rb))
    if input_activation is not None:
        return _act_dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, path, quantize, recipe,
                                c, input_activation)
    path = _symbolic_path(path, "dot_general", lhs, rhs, c)
    if c is not None:
        return _dot_general_plus_c(lhs, rhs, ((lc, rc), (lb, rb)), precision, preferred_element_type, path, quantize,
                                   recipe, c)
    rcp = _recipes.get_recipe(recipe)
    if quantize is not None:
        _quantize_configs(quantize, "dot_general")  # (checked before any fallback: a bad name is an error)
    if np.dtype(lhs.dtype) not in SUPPORTED_DTYPES or np.dtype(rhs.dtype) not in SUPPORTED_DTYPES:
        if rcp.quantized or quantize is not None:
            how = f"recipe {rcp.name!r}" if rcp.quantized else "quantize="
            raise TypeError(f"jax_tmem.dot_general: {how} quantizes bfloat16, float16 or float32 operands; got "
                            f"{lhs.dtype} x {rhs.dtype} (cast them, or drop {how.rstrip('=')} for an exact dot)")
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general",
                                        "dtype not handled by jax_tmem"))
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    _check_dims(lhs, rhs, lc, rc, lb, rb)
    if rcp.quantized:
        if quantize is not None:
            raise ValueError("jax_tmem.dot_general: pass quantize= or recipe=, not both")
        for x, name in ((lhs, "lhs"), (rhs, "rhs")):
            if not jnp.issubdtype(x.dtype, jnp.floating):
                raise TypeError(f"jax_tmem.dot_general: recipe {rcp.name!r} quantizes floating-point operands; "
                                f"{name} is {x.dtype}")
        if preferred_element_type is None:
            dt = common_dtype(lhs.dtype, rhs.dtype)
            out_dtype = dt if dt in _arch.OUT_TYPES else np.dtype("bfloat16")
        else:
            out_dtype = _check_out_dtype(preferred_element_type, "preferred_element_type")
        return checkpoint_name(_recipes.recipe_dot_general(lhs, rhs, ((lc, rc), (lb, rb)), out_dtype, rcp,
                                                           path or _config.current_path()), GEMM_NAME)
    if quantize is not None:
        if preferred_element_type is None:
            dt = common_dtype(lhs.dtype, rhs.dtype)
            preferred_element_type = dt if dt in _arch.OUT_TYPES else np.dtype("bfloat16")
        return scaled_dot_general(lhs, rhs, ((lc, rc), (lb, rb)), preferred_element_type,
                                  _quantize_configs(quantize, "dot_general"), path=path)
    if preferred_element_type is None:
        out_dtype = common_dtype(lhs.dtype, rhs.dtype)
        if out_dtype not in _arch.OUT_TYPES:  # fp8 result: what lax would give; kernels don't write fp8
            _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla",
                                            "lax.dot_general", f"{out_dtype} output (kernels write {_OUT_NAMES})"))
            return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision)
    elif (jnp.issubdtype(lhs.dtype, jnp.integer) and jnp.issubdtype(rhs.dtype, jnp.integer)
          and jnp.issubdtype(preferred_element_type, jnp.integer)):
        # e.g. int8 x int8 -> int32: the kernels write float outputs only.
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general",
                                        f"{np.dtype(preferred_element_type).name} output (kernels write {_OUT_NAMES})"))
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    elif np.dtype(preferred_element_type) not in _arch.OUT_TYPES:  # e.g. float64 (x64): what lax gives
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general",
                                        f"{np.dtype(preferred_element_type).name} output (kernels write {_OUT_NAMES})"))
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    else:
        out_dtype = _check_out_dtype(preferred_element_type, "preferred_element_type")
    requested = path or _config.current_path()
    lhs, rhs = _promote_pair(lhs, rhs, mix=(((lc, rc), (lb, rb)), out_dtype, requested))
    return checkpoint_name(gemm(lhs, rhs, None, None, ((lc, rc), (lb, rb)), out_dtype, Epilogue(), requested,
                                _allow_tf32(precision), -1), GEMM_NAME)


def _act_dot_general(lhs, rhs, dn, precision, preferred_element_type, path, quantize, recipe, c, activation):
    """dot_general(..., input_activation=activation): ops/act_dot.py."""
    _act_dot.check(lhs, rhs, activation, quantize is not None or _recipes.get_recipe(recipe).quantized or c is not None)
    (lc, rc), (lb, rb) = dn
    _check_dims(lhs, rhs, lc, rc, lb, rb)
    out_dtype = (np.dtype(lhs.dtype) if preferred_element_type is None
                 else _check_out_dtype(preferred_element_type, "preferred_element_type"))
    requested = _symbolic_path(path, "dot_general", lhs, rhs) or _config.current_path()
    y = _act_dot.act_dot_general(lhs, rhs, dn, activation, out_dtype, requested, _allow_tf32(precision))
    return checkpoint_name(y, GEMM_NAME)


def _dot_general_plus_c(lhs, rhs, dn, precision, preferred_element_type, path, quantize, recipe, c):
    """dot_general(..., c=c): the kernels add c in their epilogue; elsewhere the float32 product plus c."""
    if quantize is not None or recipe is not None:
        raise ValueError("jax_tmem.dot_general: c= is not combined with quantize= or recipe=; add c to the result")
    (lc, rc), (lb, rb) = dn
    _check_dims(lhs, rhs, lc, rc, lb, rb)
    c = _check_array(c, "c")
    want = _canon.output_shape(lhs.shape, rhs.shape, dn)
    floating = all(jnp.issubdtype(x.dtype, jnp.floating) for x in (lhs, rhs))
    if preferred_element_type is not None:
        out_dtype = np.dtype(preferred_element_type)
    else:
        out_dtype = common_dtype(lhs.dtype, rhs.dtype) if floating else np.dtype(jnp.result_type(lhs, rhs))
    if tuple(c.shape) != tuple(want) or np.dtype(c.dtype) != out_dtype:
        raise ValueError(f"jax_tmem.dot_general: c must have the result's shape {tuple(want)} and dtype "
                         f"{out_dtype.name}, got {tuple(c.shape)} {c.dtype}")
    kernel_ok = (floating and np.dtype(lhs.dtype) in SUPPORTED_DTYPES and np.dtype(rhs.dtype) in SUPPORTED_DTYPES
                 and out_dtype in _arch.OUT_TYPES)
    if not kernel_ok:  # what the kernels would compute: the product in float32 (integers: exactly), plus c
        acc = np.dtype("float32") if jnp.issubdtype(out_dtype, jnp.floating) else out_dtype
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general + c",
                                        f"{out_dtype.name} output with c (kernels write {_OUT_NAMES})"))
        y = lax.dot_general(lhs, rhs, dn, precision=precision, preferred_element_type=acc)
        return (y + c.astype(acc)).astype(out_dtype)
    requested = path or _config.current_path()
    lhs, rhs = _promote_pair(lhs, rhs, mix=(dn, out_dtype, requested))
    return _gemm_plus_c(lhs, rhs, None, c, dn, out_dtype, Epilogue(has_c=True), requested, _allow_tf32(precision),
                        "dot_general")


def _gemm_plus_c(lhs, rhs, bias, c, dn, out_dtype, epi, requested, tf32, fn: str):
    """gemm(...) with the addend c (or none): in the kernels' epilogue for M <= _C_IN_EPILOGUE_UP_TO output
    rows, else the float32 result of the rest of the epilogue plus c in XLA, rounded once (the same value)."""
    (lc, _), (lb, _) = dn
    m = math.prod(lhs.shape[d] for d in range(lhs.ndim) if d not in lc + lb)
    if c is None or (not _canon.symbolic((m,)) and m <= _C_IN_EPILOGUE_UP_TO):
        return checkpoint_name(gemm(lhs, rhs, bias, c, dn, out_dtype, epi, requested, tf32, -1), GEMM_NAME)
    # (the GEMM records its own path; this records where c goes)
    _config.record(_config.Decision(f"{fn} c", f"M = {m}", "xla" if requested == "xla" else "kernel",
                                    "float32 result, then XLA's add",
                                    f"c is added by XLA for M > {_C_IN_EPILOGUE_UP_TO} (the kernels' "
                                    "epilogue measured slower there)"))
    y = gemm(lhs, rhs, bias, None, dn, np.dtype("float32"), dataclasses.replace(epi, has_c=False), requested, tf32, -1)
    return checkpoint_name((y + c.astype(jnp.float32)).astype(out_dtype), GEMM_NAME)


# Every GEMM's output carries this name (jax.ad_checkpoint.checkpoint_name), so that remat policies can keep it:
# JAX's dots_saveable matches lax.dot_general only, which jax_tmem's GEMMs are not (custom calls inside custom_vjp).
GEMM_NAME = "jax_tmem_gemm"


class checkpoint_policies:  # noqa: N801 - a namespace, as jax.checkpoint_policies
    """Remat policies for programs of jax_tmem GEMMs (``jax.checkpoint(f, policy=...)``, ``nn.remat``, ``nnx.remat``).

    ``dots_saveable``: JAX's ``dots_saveable`` (which saves ``lax.dot_general`` outputs only) plus every jax_tmem
    GEMM's output; ``save_gemms``: jax_tmem's GEMM outputs only (``save_only_these_names("jax_tmem_gemm")``)."""
    save_gemms = staticmethod(jax.checkpoint_policies.save_only_these_names(GEMM_NAME))
    dots_saveable = staticmethod(jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.dots_saveable, jax.checkpoint_policies.save_only_these_names(GEMM_NAME)))


# c goes into the kernels' epilogue only for M <= this (the swap-AB decode GEMMs); above it XLA adds c after a
# float32 product, which measured faster everywhere we timed it (H200, docs/PERF.md "2026-11-27 07:44-"):
# decode steps M 16-256 (bench_decode.py --fused) and large GEMMs (7-20 % at 4096^3 .. 512x14336x4096).
_C_IN_EPILOGUE_UP_TO = 8


def einsum(subscripts, *operands, precision=None, preferred_element_type=None, out_sharding=None,
           recipe=None, path: Optional[str] = None, **kwargs):
    """:func:`jax.numpy.einsum` whose contractions run through :func:`jax_tmem.dot_general` (with its
    ``recipe`` and ``path``): a drop-in for ``nnx.Einsum(einsum_op=...)`` (see :func:`einsum_op`).
    ``out_sharding``: the result's sharding, as for :func:`dot_general`."""
    if out_sharding is not None:
        _out_sharding_mesh(out_sharding, "einsum")
    y = jnp.einsum(subscripts, *operands, precision=precision, preferred_element_type=preferred_element_type,
                   _dot_general=dot_general_op(recipe, path), **kwargs)
    return y if out_sharding is None else constrain(y, out_sharding, "einsum")


def _out_sharding_mesh(out_sharding, fn: str):
    """The mesh of a dot_general/einsum ``out_sharding``, or a clear error naming the argument."""
    if not isinstance(out_sharding, (jax.sharding.NamedSharding, jax.sharding.PartitionSpec)):
        raise TypeError(f"jax_tmem.{fn}: out_sharding must be a jax.sharding.NamedSharding or PartitionSpec, got "
                        f"{type(out_sharding).__name__}")
    mesh = (out_sharding.mesh if isinstance(out_sharding, jax.sharding.NamedSharding)
            else jax.sharding.get_abstract_mesh())
    if isinstance(out_sharding, jax.sharding.PartitionSpec) and (mesh is None or mesh.empty):
        raise ValueError(f"jax_tmem.{fn}: out_sharding={out_sharding} is a PartitionSpec but no mesh is set; "
                         "pass a NamedSharding or call it under jax.set_mesh(mesh)")
    return mesh


def constrain(y, out_sharding, fn: str):
    """``y`` with the sharding ``out_sharding`` (a NamedSharding, or a PartitionSpec of the mesh in context):
    ``jax.sharding.reshard`` where the mesh's axes are explicit, else ``lax.with_sharding_constraint``."""
    mesh = _out_sharding_mesh(out_sharding, fn)
    explicit = any(t == jax.sharding.AxisType.Explicit for t in getattr(mesh, "axis_types", ()))
    return jax.sharding.reshard(y, out_sharding) if explicit else lax.with_sharding_constraint(y, out_sharding)


@functools.lru_cache(maxsize=None)
def _dot_general_op(recipe, path, input_activation=None):
    def op(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs):
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, recipe=recipe,
                           path=path, input_activation=input_activation, **kwargs)
    op.__name__ = op.__qualname__ = (f"jax_tmem_dot_general_{recipe.name}"
                                     + (f"_{input_activation}_input" if input_activation else ""))
    op.jax_tmem_recipe = recipe
    return op


def dot_general_op(recipe=None, path: Optional[str] = None, input_activation: Optional[str] = None):
    """:func:`dot_general` with ``recipe``, ``path`` and ``input_activation`` bound: what Flax's ``dot_general=``
    hook takes (``nn.Dense(..., dot_general=jax_tmem.dot_general_op("fp8"))``). One function per (recipe, path,
    input_activation), so jit caches see the same object."""
    _check_path(path)
    r = _recipes.get_recipe(recipe)
    if input_activation is not None and (input_activation not in _act_dot.ACT_NAMES or r.quantized):
        raise ValueError(f"jax_tmem.dot_general_op: input_activation={input_activation!r} needs one of "
                         f"{list(_act_dot.ACT_NAMES)} and an unquantized recipe (got recipe {r.name!r})")
    return _dot_general_op(r, path, input_activation)


@functools.lru_cache(maxsize=None)
def _einsum_op(recipe, path):
    def op(subscripts, *operands, **kwargs):
        return einsum(subscripts, *operands, recipe=recipe, path=path, **kwargs)
    op.__name__ = op.__qualname__ = f"jax_tmem_einsum_{recipe.name}"
    op.jax_tmem_recipe = recipe
    return op


def einsum_op(recipe=None, path: Optional[str] = None):
    """:func:`einsum` with ``recipe`` and ``path`` bound: what ``nnx.Einsum(einsum_op=...)`` takes."""
    _check_path(path)
    return _einsum_op(_recipes.get_recipe(recipe), path)


def matmul(a, b, *, bias=None, activation: Optional[str] = None, out_dtype=None, alpha: float = 1.0,
           c=None, precision=None, path: Optional[str] = None, quantize=None):
    """``jnp.matmul`` with a fused epilogue: ``act(alpha * (a @ b) + bias) + c``.

    Shapes: ``(..., M, K) @ (K, N)``, ``(B, M, K) @ (B, K, N)`` (batch dims broadcast like jnp.matmul;
    a 2-D ``a`` against a batched ``b`` is read without copying ``a``), and 1-D operands as in jnp.matmul.

    Args:
      a, b: arrays of bfloat16, float16, float32 (tf32 tensor cores where ``precision`` allows),
        float8_e4m3fn or float8_e5m2 (any fp8 mix), or int8 x int8 (exact int32 accumulation; the
        epilogue converts it to float).
      bias: optional ``(N,)`` array, added before the activation.
      activation: None, "relu", "gelu", "gelu_tanh" or "silu".
      out_dtype: float32, bfloat16 or float16. Default: the input dtype (bfloat16 for fp8 inputs,
        float32 for int8).
      alpha: a Python float scaling the product (e.g. the product of per-tensor fp8 scales).
      c: optional array of the output's shape and dtype, added last (accumulate into an existing output):
        in the kernel's epilogue for M <= 8 rows, else by XLA to the float32 result (the same value, one
        rounding; the epilogue measured slower there).
      precision: as in ``jnp.matmul``; float32 runs as tf32 only for DEFAULT precision.
      path: "auto", "kernel" or "xla" for this call (default: see ``jax_tmem.use_path``).
      quantize: None, or a block-scaled format as in :func:`dot_general`: a and b are quantized on the fly
        along K and multiplied by :func:`scaled_dot_general` (f32 accumulation); the epilogue (alpha,
        bias, activation, c) then runs in XLA on the f32 product.

    Example::

        @jax.jit
        def loss(w, x):
            return jnp.sum(jax_tmem.matmul(x, w, activation="gelu") ** 2)
        g = jax.grad(loss)(w, x)
    """
    _check_path(path)
    a, b = _check_array(a, "a"), _check_array(b, "b")
    _check_dtype(a, "a")
    _check_dtype(b, "b")
    _check_precision(precision, "matmul")
    _check_activation(activation)
    path = _symbolic_path(path, "matmul", a, b, c)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise TypeError(f"jax_tmem.matmul: alpha must be a Python float, got {type(alpha).__name__}")
    for name, x in (("a", a), ("b", b)):
        if x.ndim == 0:
            raise ValueError(f"jax_tmem.matmul: {name} must have rank >= 1, got a scalar (shape {x.shape})")
    squeeze = []
    if a.ndim == 1:
        a = a[None, :]
        squeeze.append(-2)
    if b.ndim == 1:
        if bias is not None:
            raise ValueError("jax_tmem.matmul: bias needs a 2-D b (it has shape (N,))")
        b = b[:, None]
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"jax_tmem.matmul: contracting dims differ: a {a.shape} has K={a.shape[-1]}, "
                         f"b {b.shape} has K={b.shape[-2]}")
    n = b.shape[-1]
    if out_dtype is None:
        dt = common_dtype(a.dtype, b.dtype)
        # fp8 -> bfloat16 and int8 (int32 accumulation) -> float32: the kernels do not write 8-bit outputs.
        out_dtype = dt if dt in _arch.OUT_TYPES else np.dtype("float32" if dt == _arch.I8 else "bfloat16")
    out_dtype = _check_out_dtype(out_dtype, "out_dtype")
    if bias is not None:
        bias = _check_array(bias, "bias")
        if bias.shape != (n,):
            raise ValueError(f"jax_tmem.matmul: bias must have shape (N,) = ({n},), got {bias.shape}")
        if not jnp.issubdtype(bias.dtype, jnp.floating):
            raise TypeError(f"jax_tmem.matmul: bias must be floating point, got {bias.dtype}")
        bias = bias.astype(jnp.float32)
    # Batch handling, like jnp.matmul: a (..., M, K), b (..., K, N).
    if b.ndim == 2:
        dn = (((a.ndim - 1,), (0,)), ((), ()))
    else:
        ba, bb = a.shape[:-2], b.shape[:-2]
        bshape = tuple(jnp.broadcast_shapes(ba, bb))
        if a.ndim == 2:
            # b batched, a not: broadcast a over the batch without copying it.
            nbd = len(bshape)
            dn = (((1,), (nbd,)), ((None,) * nbd, tuple(range(nbd))))
        else:
            if ba != bshape:
                a = jnp.broadcast_to(a, bshape + a.shape[-2:])
            if bb != bshape:
                b = jnp.broadcast_to(b, bshape + b.shape[-2:])
            nbd = len(bshape)
            dn = (((nbd + 1,), (nbd,)), (tuple(range(nbd)), tuple(range(nbd))))
    if c is not None:
        c = _check_array(c, "c")
        result = tuple(_canon.output_shape(a.shape, b.shape, dn))  # then a 1-D operand's unit dim squeezed away
        for ax in squeeze:
            result = result[:len(result) + ax] + result[len(result) + ax + 1:]
        if tuple(c.shape) != result or np.dtype(c.dtype) != out_dtype:
            raise ValueError(f"jax_tmem.matmul: c must have the result's shape {result} and dtype {out_dtype}, "
                             f"got {c.shape} {c.dtype}")
        for ax in reversed(squeeze):  # c in the 2-D product's shape, as the kernels add it
            c = jnp.expand_dims(c, ax)
    if quantize is not None:
        if None in dn[1][0]:  # a 2-D a against a batched b: scaled_dot_general takes paired batch dims
            nbd = len(dn[1][0])
            a = jnp.broadcast_to(a, b.shape[:nbd] + a.shape)
            dn = (((nbd + 1,), (nbd,)), (tuple(range(nbd)), tuple(range(nbd))))
        y = scaled_dot_general(a, b, dn, jnp.float32, _quantize_configs(quantize, "matmul"), path=path)
        y = apply_activation(float(alpha) * y + (bias if bias is not None else 0.0), activation)
        y = (y if c is None else y + c.astype(jnp.float32)).astype(out_dtype)
        for ax in squeeze:
            y = jnp.squeeze(y, axis=ax)
        return y
    requested = path or _config.current_path()
    a, b = _promote_pair(a, b, "matmul", ("a", "b"), (dn, out_dtype, requested))
    epi = Epilogue(activation=activation, alpha=float(alpha), has_bias=bias is not None, has_c=c is not None)
    y = _gemm_plus_c(a, b, bias, c, dn, out_dtype, epi, requested, _allow_tf32(precision), "matmul")
    for ax in squeeze:
        y = jnp.squeeze(y, axis=ax)
    return y


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=jnp.float32, *, lhs_global_scale=None,
                  rhs_global_scale=None, path: Optional[str] = None):
    """A block-scaled matmul with the signature and layouts of :func:`jax.nn.scaled_matmul`.

    ``lhs (B, M, K)`` and ``rhs (B, N, K)`` (both K-last) hold MXFP8 (e4m3/e5m2), MXFP4 or NVFP4 data
    (:func:`jax_tmem.quantize`); ``lhs_scales (B, M, K / block)`` and ``rhs_scales (B, N, K / block)`` their
    plain scales, or the pre-swizzled ``(B, rows/128, K/block/4, 32, 16)`` of :func:`jax_tmem.swizzle_scales`.
    NVFP4 operands may carry their per-tensor float32 ``*_global_scale``. Returns ``(B, M, N)`` of
    ``preferred_element_type`` (float32, bfloat16 or float16), accumulated in float32.

    Weight-only (an extension of JAX's signature): ``lhs_scales=None`` with a bfloat16 / float16 /
    float32 ``lhs``: ``lhs @ dequantize(rhs).T`` (times ``rhs_global_scale``). With a bfloat16 lhs and
    mxfp4 / nvfp4 weights on a GPU, "auto" runs the weight-only 4-bit kernel up to 64 lhs rows (a
    decode step's GEMMs: the packed weights are read once and widened on chip), else XLA.

    ``path``: "auto" (default) and "xla" run the reference semantics through XLA (exact bf16
    dequantization, one dot with f32 accumulation); "kernel" runs the jax_tmem custom call with the
    scales as operands (mxfp8 / mxfp8_e5m2): the block-scaled wgmma kernel on an sm_90a GPU, the C++
    reference handler on the CPU. "auto" does not take the kernel yet: on the H200 it is still slower
    than the XLA path (docs/PERF.md). Which path ran, and why, is logged (``JAX_TMEM_LOG=1``).

    Example::

        xq, xs = jax_tmem.quantize(x, "mxfp8")     # x (B, M, K)
        wq, ws = jax_tmem.quantize(w, "mxfp8")     # w (B, N, K)
        y = jax_tmem.scaled_matmul(xq, wq, xs, ws, jnp.bfloat16)
        wq, ws = jax_tmem.quantize(w, "nvfp4")     # 4-bit weights, bf16 activations:
        y = jax_tmem.scaled_matmul(x, wq, None, ws, jnp.bfloat16)
    """
    lhs, rhs = _check_array(lhs, "lhs"), _check_array(rhs, "rhs")
    lhs_scales = None if lhs_scales is None else _check_array(lhs_scales, "lhs_scales")
    rhs_scales = _check_array(rhs_scales, "rhs_scales")
    _check_path(path)
    path = _symbolic_path(path, "scaled_matmul", lhs, rhs, lhs_scales, rhs_scales)
    out = np.dtype(jnp.float32 if preferred_element_type is None else preferred_element_type)
    return scaled_gemm.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, out,
                                     lhs_global_scale, rhs_global_scale, path=path or _config.current_path())


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=jnp.float32, configs=None, *,
                       path: Optional[str] = None):
    """``lax.dot_general`` with both operands quantized on the fly to a block-scaled format, with the
    signature of :func:`jax.nn.scaled_dot_general` and its recipe (forward and backward).

    ``configs``: ``[lhs, rhs]`` or ``[lhs, rhs, grad]``, each a ``jax.nn.BlockScaleConfig``
    (``jax.nn.get_scaled_dot_general_config("mxfp8")``) or a format name ("mxfp8", "mxfp8_e5m2", "mxfp4",
    "nvfp4"). Unlike JAX, ``configs=None`` is an error (JAX silently runs an unscaled dot). The
    contracting size must be a multiple of the block size. Gradients re-quantize the high-precision
    operands along each backward GEMM's contraction (``grad`` config for the cotangent); NVFP4 runs an
    unquantized backward, as JAX does. ``path``: as :func:`scaled_matmul` (each GEMM's decision is logged).

    Example::

        cfg = jax.nn.get_scaled_dot_general_config("mxfp8")
        y = jax_tmem.scaled_dot_general(x, w, (((1,), (0,)), ((), ())), jnp.bfloat16, configs=[cfg] * 3)
    """
    lhs, rhs = _check_array(lhs, "lhs"), _check_array(rhs, "rhs")
    for x, name in ((lhs, "lhs"), (rhs, "rhs")):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"jax_tmem.scaled_dot_general: {name} must be floating point (it is quantized), got {x.dtype}")
    if preferred_element_type is None:  # (np.dtype(None) is float64: the error would name a type nobody passed)
        preferred_element_type = jnp.float32
    _check_out_dtype(preferred_element_type, "preferred_element_type")
    _check_path(path)
    (lc, rc), (lb, rb) = dimension_numbers
    _check_dims(lhs, rhs, tuple(lc), tuple(rc), tuple(lb), tuple(rb))
    path = _symbolic_path(path, "scaled_dot_general", lhs, rhs)
    return checkpoint_name(scaled_dot.scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type, configs,
                                                         path=path or _config.current_path()), GEMM_NAME)

"""The ``jax_tmem_gemm`` primitive: one dot_general with a fused epilogue.

    out = act(alpha * dot_general(lhs, rhs, dn) + bias) + c

Its parameters are static (hashable); its lowering is chosen per platform from the ``path`` decided at
trace time (see ``ops.py``): the XLA FFI custom call ``jax_tmem_gemm`` (CUDA kernels, or the C++ CPU
reference handler), or plain XLA ops. The batching rule folds a vmapped axis into the batch (both
operands batched, or one of them broadcast over the batch without a copy) so vmap never loops.
The primitive has no JVP: differentiation goes through the ``custom_vjp`` in ``ops.py``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from jax_tmem import _canon, _config, _ext, _kernels

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}

gemm_p = Primitive("jax_tmem_gemm")


@dataclass(frozen=True)
class Epilogue:
    activation: Optional[str] = None
    alpha: float = 1.0
    has_bias: bool = False
    has_c: bool = False


def apply_activation(x, activation: Optional[str]):
    if activation is None:
        return x
    if activation == "relu":
        return jnp.maximum(x, 0)
    if activation == "gelu":
        return jax.nn.gelu(x, approximate=False)
    if activation == "gelu_tanh":
        return jax.nn.gelu(x, approximate=True)
    if activation == "silu":
        return jax.nn.silu(x)
    raise ValueError(f"activation={activation!r}")


# ---- abstract evaluation ----------------------------------------------------------------------

def _abstract_eval(lhs, rhs, *rest, dimension_numbers, out_dtype, **_):
    shape = _canon.output_shape(lhs.shape, rhs.shape, dimension_numbers)
    return jax.core.ShapedArray(shape, np.dtype(out_dtype))


gemm_p.def_abstract_eval(_abstract_eval)


@functools.lru_cache(maxsize=256)
def _jitted(items):
    params = dict(items)
    return jax.jit(lambda *a: gemm_p.bind(*a, **params))


def _impl(*args, **params):
    # Eager calls: one cached jitted wrapper per parameter set (params are hashable).
    return _jitted(tuple(sorted(params.items())))(*args)


gemm_p.def_impl(_impl)


# ---- the XLA lowering (fallback, and the semantics every kernel matches) ----------------------

def xla_reference(lhs, rhs, *rest, dimension_numbers, out_dtype, epilogue: Epilogue, allow_tf32=True):
    """The primitive written with lax ops; accumulates in f32."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_only = [l for l, r in zip(lb, rb) if r is None]
    rhs_only = [r for l, r in zip(lb, rb) if l is None]
    both_l = tuple(l for l, r in zip(lb, rb) if l is not None and r is not None)
    both_r = tuple(r for l, r in zip(lb, rb) if l is not None and r is not None)
    acc_t = jnp.float32
    lhs_c, rhs_c = lhs, rhs
    if lhs.dtype != rhs.dtype:
        fp8 = (np.dtype("float8_e4m3fn"), np.dtype("float8_e5m2"))
        if np.dtype(lhs.dtype) in fp8 or np.dtype(rhs.dtype) in fp8:
            common = jnp.bfloat16 if (np.dtype(lhs.dtype) in fp8 and np.dtype(rhs.dtype) in fp8) else \
                (rhs.dtype if np.dtype(lhs.dtype) in fp8 else lhs.dtype)
        else:
            common = jnp.promote_types(lhs.dtype, rhs.dtype)
        lhs_c, rhs_c = lhs.astype(common), rhs.astype(common)
    precision = lax.Precision.DEFAULT if allow_tf32 else lax.Precision.HIGHEST
    if jnp.issubdtype(lhs_c.dtype, jnp.integer):  # int8 x int8: exact int32 accumulation, then f32
        y = lax.dot_general(lhs_c, rhs_c, ((tuple(lc), tuple(rc)), (both_l, both_r)),
                            preferred_element_type=jnp.int32).astype(acc_t)
    else:
        y = lax.dot_general(lhs_c, rhs_c, ((tuple(lc), tuple(rc)), (both_l, both_r)),
                            precision=precision, preferred_element_type=acc_t)
    # lax order: [both batch] [lhs free incl. lhs-only batch] [rhs free incl. rhs-only batch];
    # ours: batch dims in dimension-number order, then lhs free, then rhs free.
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in both_l]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in both_r]
    lax_axes = [("b", i) for i in range(len(both_l))] + [("l", d) for d in lfree] + [("r", d) for d in rfree]
    want, bi = [], 0
    for l, r in zip(lb, rb):
        if l is not None and r is not None:
            want.append(("b", bi)); bi += 1
        elif r is None:
            want.append(("l", l))
        else:
            want.append(("r", r))
    want += [("l", d) for d in lfree if d not in lhs_only] + [("r", d) for d in rfree if d not in rhs_only]
    perm = [lax_axes.index(a) for a in want]
    if perm != list(range(len(perm))):
        y = jnp.transpose(y, perm)
    y = y * jnp.float32(epilogue.alpha) if epilogue.alpha != 1.0 else y
    rest = list(rest)
    if epilogue.has_bias:
        bias = rest.pop(0)
        nshape = tuple(rhs.shape[d] for d in rfree if d not in rhs_only)
        y = y + bias.astype(acc_t).reshape(nshape)
    y = apply_activation(y, epilogue.activation)
    if epilogue.has_c:
        y = y + rest.pop(0).astype(acc_t)
    return y.astype(out_dtype)


def _xla_lowering(ctx, *args, dimension_numbers, out_dtype, epilogue, allow_tf32, **_):
    fn = lambda *a: xla_reference(*a, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                                  epilogue=epilogue, allow_tf32=allow_tf32)
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


# ---- the FFI lowering -------------------------------------------------------------------------

def _ffi_call(*args, dimension_numbers, out_dtype, epilogue: Epilogue, config, canon: _canon.Canon, platform,
              a_dtype):
    # The CUDA plan (menu entry, K splits, workspace) is resolved now, with the launcher's own C++ code:
    # split-K / swap-AB plans need an f32 workspace, which XLA allocates as the call's second output
    # (so the handler never allocates and stays command-buffer compatible).
    if platform == "cuda":
        cfg, splits, ws = _kernels.lowering_plan(canon, a_dtype, config, out_dtype)
    else:
        (cfg, splits), ws = _kernels.split_config(config), 0
    out_types = (jax.ShapeDtypeStruct(canon.out_shape, np.dtype(out_dtype)),
                 jax.ShapeDtypeStruct((max(ws, 1),), np.float32))
    aliases = {len(args) - 1: 0} if epilogue.has_c else None
    call = jax.ffi.ffi_call("jax_tmem_gemm", out_types, input_output_aliases=aliases)
    attrs = {key: (np.bool_(v) if isinstance(v, bool) else np.int64(v)) for key, v in canon.attrs().items()}
    out, _workspace = call(*args, **attrs, activation=np.int32(ACTIVATIONS[epilogue.activation]),
                           alpha=np.float32(epilogue.alpha), has_bias=np.bool_(epilogue.has_bias),
                           has_c=np.bool_(epilogue.has_c), config=np.int32(cfg), splits=np.int32(splits))
    return out


def _make_lowering(platform: str):
    def rule(ctx, *args, dimension_numbers, out_dtype, epilogue, path, requested, problem, allow_tf32, config):
        if path == "kernel":
            ok, why = _ext.ensure_registered(platform)
            if not ok:  # decided at trace time for another platform; never silent
                _config.record(_config.Decision("gemm", problem, "xla", "lax.dot_general",
                                                f"lowering for {platform}: {why}"))
            else:
                lhs_aval, rhs_aval = ctx.avals_in[0], ctx.avals_in[1]
                canon = _canon.canonicalize(lhs_aval.shape, rhs_aval.shape, dimension_numbers)
                fn = lambda *a: _ffi_call(*a, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                                          epilogue=epilogue, config=config, canon=canon, platform=platform,
                                          a_dtype=lhs_aval.dtype)
                return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)
        return _xla_lowering(ctx, *args, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                             epilogue=epilogue, allow_tf32=allow_tf32)
    return rule


mlir.register_lowering(gemm_p, _make_lowering("cpu"), platform="cpu")
mlir.register_lowering(gemm_p, _make_lowering("cuda"), platform="cuda")
mlir.register_lowering(gemm_p, _xla_lowering)  # every other platform


# ---- batching ---------------------------------------------------------------------------------

def _at_front(x, bdim, size):
    """x with its vmapped axis first (broadcast along a new leading axis if it has none)."""
    if bdim is None:
        return jnp.broadcast_to(x, (size,) + x.shape)
    return jnp.moveaxis(x, bdim, 0)


def _shift(dims, at):
    """Renumbers dims after inserting a new axis at position ``at``."""
    return tuple(None if d is None else (d + 1 if d >= at else d) for d in dims)


def _batch_rule(args, bdims, *, dimension_numbers, out_dtype, epilogue, requested, allow_tf32, config, **_):
    from jax_tmem import ops  # the path decision lives there

    lhs, rhs, *rest = args
    lbd, rbd, *rest_bd = bdims
    (lc, rc), (lb, rb) = dimension_numbers
    size = next(a.shape[d] for a, d in zip(args, bdims) if d is not None)
    # The vmapped axis becomes a new leading batch pair; an unbatched operand is broadcast over it
    # (None), which the kernels read with batch stride 0 - no copy of the operand.
    nl = nr = None
    if lbd is not None:
        lc, lb, nl = _shift(lc, lbd), _shift(lb, lbd), lbd
    if rbd is not None:
        rc, rb, nr = _shift(rc, rbd), _shift(rb, rbd), rbd
    new_dn = ((lc, rc), ((nl,) + tuple(lb), (nr,) + tuple(rb)))
    kw = dict(dimension_numbers=new_dn, requested=requested, allow_tf32=allow_tf32, config=config)
    bias_bd = rest_bd[0] if epilogue.has_bias else None
    if bias_bd is None:
        rest = list(rest)
        if epilogue.has_c:
            rest[-1] = _at_front(rest[-1], rest_bd[-1], size)
        return ops.bind_gemm(lhs, rhs, *rest, out_dtype=out_dtype, epilogue=epilogue, **kw), 0
    # A batched bias cannot be fused (the kernels take one bias row per call): the GEMM runs with
    # alpha only and bias, activation and c are applied by XLA.
    y = ops.bind_gemm(lhs, rhs, out_dtype=jnp.float32, epilogue=Epilogue(alpha=epilogue.alpha), **kw)
    bias = jnp.moveaxis(rest[0], bias_bd, 0).astype(jnp.float32)
    n_free = rhs.ndim - len(rc) - sum(d is not None for d in new_dn[1][1])
    nshape = y.shape[y.ndim - n_free:]
    y = y + bias.reshape((size,) + (1,) * (y.ndim - 1 - n_free) + nshape)
    y = apply_activation(y, epilogue.activation)
    if epilogue.has_c:
        y = y + _at_front(rest[1], rest_bd[1], size).astype(jnp.float32)
    return y.astype(out_dtype), 0


batching.primitive_batchers[gemm_p] = _batch_rule

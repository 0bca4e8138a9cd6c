"""Trace-time checks of the public API's arguments (each error names the argument and the fix), and the
operand promotion rule shared by matmul and dot_general."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_tmem._core import arch as _arch, canon as _canon, config as _config, dtypes as _dtypes
from jax_tmem._core.arch import common_dtype
from jax_tmem.ops.epilogue import ACTIVATIONS

SUPPORTED_DTYPES = _dtypes.OPERAND_DTYPES  # the operand column of dtypes.def
_SUPPORTED_NAMES = ", ".join(d.name for d in SUPPORTED_DTYPES)
_OUT_NAMES = ", ".join(d.name for d in _dtypes.OUTPUT_DTYPES)


def _check_array(x, name: str):
    if not isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)) and not hasattr(x, "__jax_array__"):
        raise TypeError(f"jax_tmem: {name} must be a JAX or NumPy array, got {type(x).__name__}")
    return jnp.asarray(x)


def _check_dtype(x, name: str):
    if np.dtype(x.dtype) not in SUPPORTED_DTYPES:
        raise TypeError(f"jax_tmem: {name} has dtype {x.dtype}; supported: {_SUPPORTED_NAMES}")


def _check_out_dtype(dt, name: str):
    dt = np.dtype(dt)
    if dt not in _arch.OUT_TYPES:
        raise TypeError(f"jax_tmem: {name}={dt} is not supported; use one of {_OUT_NAMES}")
    return dt


def _check_path(path):
    if path is not None and path not in ("auto", "kernel", "xla"):
        raise ValueError(f"jax_tmem: path={path!r} is not supported; use 'auto', 'kernel' or 'xla' (or None)")


def _symbolic_path(path, fn: str, *arrays):
    """The path of a call whose operands may have symbolic dimensions (``jax.export`` shape polymorphism): the
    kernels are planned for concrete shapes at trace time, so such a call runs XLA's ops (logged), or raises for
    a forced "kernel" path. Concrete shapes keep ``path``."""
    if not _canon.symbolic(*(x.shape for x in arrays if x is not None)):
        return path
    shapes = " x ".join(f"{np.dtype(x.dtype).name}{list(x.shape)}" for x in arrays if x is not None)
    if (path or _config.current_path()) == "kernel":
        raise ValueError(f"jax_tmem.{fn}: path 'kernel' was forced but {shapes} has symbolic dimensions (jax.export "
                         "shape polymorphism); the kernels need concrete shapes: export with concrete shapes, or "
                         "use path 'auto'")
    _config.record(_config.Decision(fn, shapes, "xla", "XLA's ops", "symbolic dimensions (jax.export shape "
                                    "polymorphism): the kernels are planned for concrete shapes"))
    return "xla"


def _check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"jax_tmem: activation={activation!r} is not supported; use one of "
                         f"{[k for k in ACTIVATIONS]}")


def _check_precision(precision, fn: str):
    """A ``precision`` that lax.dot_general takes (None, a Precision or its name, a pair, a DotAlgorithmPreset), else
    ValueError naming it (an unknown value ran at full float32 before, silently)."""
    if precision is None:
        return
    try:
        from jax._src.lax.lax import canonicalize_precision  # (lax's own check; private, so optional)
    except ImportError:  # pragma: no cover
        return
    try:
        canonicalize_precision(precision)
    except (TypeError, ValueError) as e:
        raise ValueError(f"jax_tmem.{fn}: precision={precision!r} is not a JAX precision: {e}") from None


def _allow_tf32(precision) -> bool:
    """tf32 tensor cores are allowed where JAX's precision allows them (DEFAULT, or the config default)."""
    if precision is None:
        precision = jax.config.jax_default_matmul_precision
    if isinstance(precision, (tuple, list)):
        return all(_allow_tf32(p if p is not None else jax.config.jax_default_matmul_precision) for p in precision)
    if precision is None:
        return True
    if isinstance(precision, str):
        return precision.lower() in ("default", "bfloat16", "tensorfloat32", "fastest")
    return precision == lax.Precision.DEFAULT


def _quantize_configs(quantize, fn: str):
    """``quantize=`` of dot_general / matmul as scaled_dot_general's configs: a format name ("mxfp8", ...)
    or BlockScaleConfig for lhs, rhs and the gradient alike, or a list of 2-3 of them."""
    if isinstance(quantize, (list, tuple)):
        if len(quantize) not in (2, 3):
            raise ValueError(f"jax_tmem.{fn}: quantize must be a format name, a jax.nn.BlockScaleConfig, or a list of "
                             f"2-3 of them ([lhs, rhs] or [lhs, rhs, grad]), got {len(quantize)}")
        return list(quantize)
    return [quantize] * 3


def _check_dims(lhs, rhs, lc, rc, lb, rb):
    if len(lc) != len(rc):
        raise ValueError(f"jax_tmem: lhs has {len(lc)} contracting dims and rhs {len(rc)}; they must pair up")
    if len(lb) != len(rb):
        raise ValueError(f"jax_tmem: lhs has {len(lb)} batch dims and rhs {len(rb)}; they must pair up")
    for name, x, dims in (("lhs", lhs, lc + lb), ("rhs", rhs, rc + rb)):
        if any(d < 0 or d >= x.ndim for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"jax_tmem: {name} dims {dims} are out of range or repeated for shape {x.shape}")
    for l, r in zip(lc, rc):
        if lhs.shape[l] != rhs.shape[r]:
            raise ValueError(f"jax_tmem: contracting dim lhs[{l}]={lhs.shape[l]} != rhs[{r}]={rhs.shape[r]} "
                             f"(shapes {lhs.shape} and {rhs.shape})")
    for l, r in zip(lb, rb):
        if lhs.shape[l] != rhs.shape[r]:
            raise ValueError(f"jax_tmem: batch dim lhs[{l}]={lhs.shape[l]} != rhs[{r}]={rhs.shape[r]} "
                             f"(shapes {lhs.shape} and {rhs.shape})")


def _promote_pair(lhs, rhs, op: str = "dot_general", names=("lhs", "rhs"), mix=None):
    """Same-width float operands stay as they are; fp8 x fp8 mixes stay (the kernels take them). 16-bit x fp8
    (bf16 activations x fp8 weights; ``mix`` = (dimension numbers, output dtype, requested path)) stays as it
    is too: where a kernel reads it (sm_90a's decode entries: the fp8 weight in place, widened on chip,
    exactly), or else for XLA's dot, which widens the fp8 operand inside its GEMM (one read of it; measured
    faster than our 16-bit kernels after a widening pass, H200 2026-11-27); only a forced "kernel" path widens
    it first, in memory, for the 16-bit kernels. Other mixes are promoted like jnp.matmul (bf16 x f32 -> f32).
    The decision log names each choice for a 16-bit x fp8 pair, and why no kernel read it."""
    a, b = np.dtype(lhs.dtype), np.dtype(rhs.dtype)
    if a == b or (a in _arch.FP8 and b in _arch.FP8):
        return lhs, rhs
    why = ""
    if mix is not None and _arch.mixed_pair(a, b):
        from jax_tmem.ops.gemm import _target  # (the path decision of the problem as it is)
        dn, out_dtype, requested = mix
        target, why, _ = _target(lhs.shape, rhs.shape, a, b, dn, out_dtype, requested, False)
        if target:
            return lhs, rhs
        if requested != "kernel":
            _config.record(_config.Decision(
                f"{op} mix", f"{a.name} x {b.name}", "xla", "XLA's dot of the pair as it is",
                f"no kernel reads this problem ({why}); XLA widens the fp8 {names[1]} inside its GEMM (one read of "
                f"it); jax_tmem's kernels read the mix on sm_90a for a K-major {names[0]} times an fp8 "
                f"(K, N) {names[1]} (<= 8 rows; 9-32 where N / 64 is >= 90 % of the SMs)"))
            return lhs, rhs
    common = common_dtype(a, b)
    for x, name in ((a, names[0]), (b, names[1])):
        if x in _arch.FP8:
            no_kernel = (f"no kernel reads this {a.name} x {b.name} problem ({why})" if why else
                         f"no {a.name} x {b.name} kernel")
            _config.record(_config.Decision(
                f"{op} widen", f"{a.name} x {b.name}", "xla", f"{name} converted to {common.name}",
                f"{no_kernel}: XLA widens the {x.name} {name} in memory on every call, then the "
                f"{common.name} GEMM reads it at {common.itemsize} bytes per element; for fp8 speed pass both operands "
                f"in fp8 (e.g. {names[0] if name == names[1] else names[1]}.astype({x.name}))"))
    return lhs.astype(common), rhs.astype(common)

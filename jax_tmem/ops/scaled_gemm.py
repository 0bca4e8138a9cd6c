"""The block-scaled GEMM op: ``out[b, m, n] = sum_k (lhs[b, m, k] * lhs_scales[b, m, k / bs]) *
(rhs[b, n, k] * rhs_scales[b, n, k / bs])`` times NVFP4's global scales, accumulated in float32, with
the operand layout of ``jax.nn.scaled_matmul`` (both operands K-last).

Paths: "xla" (and "auto", today) run the reference semantics through XLA (dequantize to float32, one
f32 dot). "kernel" runs the jax_tmem GEMM custom call with the block scales as operand roles (sfa, sfb in
cpp/include/jax_tmem/operands.def, ``sf_vec`` = 32): the C++ CPU handler computes it (the reference the
GPU kernels will be tested against); the CUDA handler returns a clear error until the block-scaled
kernels exist (tcgen05 ``kind::mxf8f6f4`` / ``mxf4`` / ``mxf4nvf4`` on sm_100a, wgmma with per-block
promotion on sm_90a: issue 14's remaining work). Only the byte-per-element MX formats (mxfp8,
mxfp8_e5m2) take the kernel path; the 4-bit formats run XLA. Each call records its decision with the
reason (``JAX_TMEM_LOG=1``, ``jax_tmem.decisions()``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_tmem._core import config as _config, ext as _ext
from jax_tmem.ops import block_scale

KERNEL_FORMATS = ("mxfp8", "mxfp8_e5m2")  # whole-byte elements: what the custom call takes today


def plan(lhs_shape, rhs_shape, lhs_dtype, rhs_dtype, lhs_scales, rhs_scales, out_dtype):
    """Validates a scaled_matmul call at trace time (ValueError/TypeError naming the argument and the
    fix) and returns ``(lhs format, rhs format, lhs scales, rhs scales)`` with the scales in the plain
    ``(B, rows, K / block)`` layout (pre-swizzled ones are unswizzled)."""
    if len(lhs_shape) != 3 or len(rhs_shape) != 3:
        raise ValueError(f"jax_tmem.scaled_matmul: lhs and rhs must be (B, M, K) and (B, N, K), got {lhs_shape} "
                         f"and {rhs_shape}")
    (b, m, k), (b2, n, k2) = lhs_shape, rhs_shape
    if b != b2 or k != k2:
        raise ValueError(f"jax_tmem.scaled_matmul: lhs {lhs_shape} and rhs {rhs_shape} must agree on B and on K "
                         "(both operands K-last, as jax.nn.scaled_matmul)")
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype("float32"), np.dtype("bfloat16"), np.dtype("float16")):
        raise TypeError(f"jax_tmem.scaled_matmul: preferred_element_type={out_dtype} must be float32, bfloat16 "
                        "or float16")
    fmts, plain = [], []
    for name, rows, dt, sc in (("lhs", m, lhs_dtype, lhs_scales), ("rhs", n, rhs_dtype, rhs_scales)):
        sc_shape = tuple(sc.shape)
        if len(sc_shape) == 5:  # pre-swizzled (B, rows/128, cols/4, 32, 16): the column count from K
            cands = [f for f in block_scale.FORMATS.values()
                     if f.data == np.dtype(dt) and f.scale == np.dtype(sc.dtype) and k % f.block == 0]
            if not cands:
                raise ValueError(f"jax_tmem.scaled_matmul: {name} ({np.dtype(dt).name}) with pre-swizzled "
                                 f"{np.dtype(sc.dtype).name} scales is no block-scaled format with K = {k}")
            f = cands[0]
            sc = block_scale.unswizzle_scales(sc, rows, k // f.block)
            sc_shape = tuple(sc.shape)
        if len(sc_shape) != 3 or sc_shape[:2] != (b, rows) or sc_shape[2] < 1 or k % sc_shape[2]:
            raise ValueError(f"jax_tmem.scaled_matmul: {name}_scales has shape {sc_shape}; expected ({b}, {rows}, "
                             f"K / block) with K = {k} a multiple of the block size (or the pre-swizzled "
                             "(B, rows/128, K/block/4, 32, 16))")
        f = block_scale.format_of(dt, sc.dtype, k // sc_shape[2])
        fmts.append(f)
        plain.append(sc)
    return fmts[0], fmts[1], plain[0], plain[1]


def scaled_matmul_xla(lhs, rhs, lhs_scales, rhs_scales, out_dtype, lhs_global_scale=None, rhs_global_scale=None):
    """The reference semantics: dequantize both operands to float32 and one f32 dot (HIGHEST)."""
    a = block_scale.dequantize(lhs, lhs_scales, global_scale=lhs_global_scale)
    b = block_scale.dequantize(rhs, rhs_scales, global_scale=rhs_global_scale)
    y = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))), precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
    return y.astype(out_dtype)


def scaled_matmul_ffi(lhs, rhs, lhs_scales, rhs_scales, out_dtype, block: int, layout: int = 0):
    """The jax_tmem GEMM custom call with block scales: (B, M, K) x (B, N, K), both K-major, scales plain
    (B, rows, K / block) (``layout`` 0) or in the 128x4 tiles of ``swizzle_scales`` (``layout`` 1), in role
    order a, b, sfa, sfb."""
    b, m, k = lhs.shape
    n = rhs.shape[1]
    for platform in ("cpu", "cuda"):
        _ext.ensure_registered(platform)  # the CUDA handler refuses block scales with a clear error
    out_types = (jax.ShapeDtypeStruct((b, m, n), np.dtype(out_dtype)), jax.ShapeDtypeStruct((1,), np.float32))
    call = jax.ffi.ffi_call("jax_tmem_gemm", out_types)
    attrs = _ext.gemm_attrs(["a", "b", "sfa", "sfb"], batch=b, m=m, n=n, k=k, a_mn_major=False, b_mn_major=False,
                            lda=k, ldb=k, stride_a=m * k if b > 1 else 0, stride_b=n * k if b > 1 else 0,
                            sf_vec=block, sf_layout=layout)
    out, _ = call(lhs, rhs, lhs_scales, rhs_scales, **attrs)
    return out


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, out_dtype, lhs_global_scale=None, rhs_global_scale=None,
                  path="auto"):
    fa, fb, sa, sb = plan(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, lhs_scales, rhs_scales, out_dtype)
    for f, g, name in ((fa, lhs_global_scale, "lhs"), (fb, rhs_global_scale, "rhs")):
        if g is not None and not f.global_scale:
            raise ValueError(f"jax_tmem.scaled_matmul: {name}_global_scale is for nvfp4 operands, not {f.name}")
    problem = (f"{fa.name}{list(lhs.shape)} x {fb.name}{list(rhs.shape)} -> {np.dtype(out_dtype).name}")
    if path == "kernel":
        ok, why = _ext.ensure_registered("cpu")
        if fa.name not in KERNEL_FORMATS or fb.name not in KERNEL_FORMATS:
            ok, why = False, f"the custom call takes {' and '.join(KERNEL_FORMATS)} operands, not {fa.name} x {fb.name}"
        if not ok:
            raise ValueError(f'jax_tmem.scaled_matmul: path="kernel": {why}; use path="auto" (XLA)')
        _config.record(_config.Decision("scaled_matmul", problem, "kernel", "jax_tmem_gemm custom call, sfa/sfb roles",
                                        'path "kernel" (the C++ CPU handler; no block-scaled CUDA kernel yet)'))
        if lhs_scales.ndim == 5 or rhs_scales.ndim == 5:  # pre-swizzled scales go to the call as they are
            sw = lambda given, plain: given if given.ndim == 5 else block_scale.swizzle_scales(plain)
            return scaled_matmul_ffi(lhs, rhs, sw(lhs_scales, sa), sw(rhs_scales, sb), out_dtype, fa.block, layout=1)
        return scaled_matmul_ffi(lhs, rhs, sa, sb, out_dtype, fa.block)
    reason = "no block-scaled kernel yet: the reference semantics run through XLA" if path == "auto" else 'path "xla"'
    _config.record(_config.Decision("scaled_matmul", problem, "xla", "dequantize + lax.dot_general (f32)", reason))
    return scaled_matmul_xla(lhs, rhs, sa, sb, out_dtype, lhs_global_scale, rhs_global_scale)

"""``scaled_dot_general``: a ``lax.dot_general`` whose operands are quantized to a block-scaled format on
the fly (the recipe of ``jax.nn.scaled_dot_general``), with its backward pass.

Forward: batch dimensions first and the contracting dimensions last on both sides (free reshapes and
transposes in XLA), both operands quantized along K with ``configs[0]`` / ``configs[1]``, one
``scaled_gemm.scaled_matmul`` (whose path decision is logged), and the output in ``lax.dot_general``'s
dimension order. Backward (``jax.custom_vjp``, residuals = the high-precision operands, as JAX's):
dlhs = scaled_matmul(g quantized along N with ``configs[2]``, rhs quantized along N with ``configs[1]``),
drhs = scaled_matmul(g^T quantized along M with ``configs[2]``, lhs quantized along M with
``configs[0]``): every tensor is re-quantized from high precision along the axis its GEMM contracts.
NVFP4 follows JAX: its configs' float32 global scales (traced or not) divide the operands before they are
quantized and multiply the f32 product; a ``configs[2]`` of NVFP4 gives an unquantized backward whose
gradients are zero where the forward clipped (|x| above the operand's global scale x 6 x 448, JAX's
straight-through estimator). The backward GEMMs contract over N and M, zero-padded to the block size where
needed.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from jax_tmem.ops import block_scale, scaled_gemm


def config_format(cfg, name: str):
    """Our Format of a ``jax.nn.BlockScaleConfig`` (duck-typed: ``block_size``, ``data_type``,
    ``scale_type``, ``global_scale``) or of a format name ("mxfp8", ...); its global scale:
    :func:`config_global_scale`."""
    if isinstance(cfg, (str, block_scale.Format)):
        return block_scale.get_format(cfg)
    try:
        f = block_scale.format_of(cfg.data_type, cfg.scale_type, int(cfg.block_size))
    except AttributeError:
        raise TypeError(f"jax_tmem.scaled_dot_general: {name} must be a jax.nn.BlockScaleConfig "
                        f"(jax.nn.get_scaled_dot_general_config) or a format name {sorted(block_scale.FORMATS)}, "
                        f"got {type(cfg).__name__}") from None
    return f


def config_global_scale(cfg, f, name: str):
    """The float32 global scale of an NVFP4 ``cfg`` as a scalar array (traced or not: the default config made
    inside jit holds a traced ``jnp.ones((1,))``), or None where there is none or it is a concrete 1.0."""
    g = getattr(cfg, "global_scale", None)
    if g is None or not f.global_scale:
        return None
    try:
        if bool(np.all(np.asarray(g, np.float32) == 1.0)):
            return None
    except jax.errors.TracerArrayConversionError:
        pass
    if jnp.size(g) != 1:
        raise ValueError(f"jax_tmem.scaled_dot_general: {name}.global_scale must be one float32 value, got shape "
                         f"{jnp.shape(g)}")
    return jnp.asarray(g, jnp.float32).reshape(())


def _to_bmk(x, batch, contract):
    """x as (B, rows, K): its batch dims first, its free dims, then its contracting dims, flattened."""
    free = [d for d in range(x.ndim) if d not in batch and d not in contract]
    xt = jnp.transpose(x, tuple(batch) + tuple(free) + tuple(contract))
    b = math.prod(x.shape[d] for d in batch)
    rows = math.prod(x.shape[d] for d in free)
    k = math.prod(x.shape[d] for d in contract)
    return xt.reshape(b, rows, k), [x.shape[d] for d in free]


def _pad_k(x, block):
    """x (B, rows, K) with K zero-padded to a multiple of `block` (zeros add nothing to the sums and do
    not raise any block's amax)."""
    pad = -x.shape[2] % block
    return jnp.pad(x, ((0, 0), (0, 0), (0, pad))) if pad else x


def global_scale(x, f):
    """NVFP4's per-tensor float32 scale from x itself: amax / (6 * 448), so that the largest block's
    UE4M3 scale is 448 (1 for an all-zero x); None for formats without one."""
    if not f.global_scale:
        return None
    amax = jnp.max(jnp.abs(x.astype(jnp.float32)))
    return jnp.where(amax > 0, amax / np.float32(6.0 * 448.0), jnp.float32(1.0))


def _qmm(x, w, fx, fw, out_dtype, path, per_tensor=False, sr_key=None, gx=None, gw=None):
    """scaled_matmul of x (B, M, K) and w (B, N, K), both quantized along K (NVFP4 with the global scales
    ``gx`` / ``gw`` (None: 1), or with per-tensor global scales computed from x and w when ``per_tensor``).
    ``sr_key``: x (a cotangent) rounded stochastically with this PRNG key."""
    block = max(fx.block, fw.block)
    x, w = _pad_k(x, block), _pad_k(w, block)
    where, why = scaled_gemm.route(fx, fw, x.dtype, x.shape[2])  # scaled_matmul's own decision
    # (_qdq_mm takes MXFP8 only, which has no global scale: the recipes' per_tensor calls take it too)
    y = _qdq_mm(x, w, fx, fw, out_dtype, path, where, why) if sr_key is None else None
    if y is not None:
        return y
    if per_tensor:
        gx, gw = global_scale(x, fx), global_scale(w, fw)
    # where the block-scaled kernel takes the product, the scales in the layout it reads, written by the quantize
    layout = scaled_gemm.kernel_scale_layout(where, x.shape[2], block) if scaled_gemm.takes_kernel(where, path) else "plain"
    qpath = "xla" if path == "xla" else None  # (path "xla": XLA's quantizer too, no jax_tmem custom call)
    xq, xs = block_scale.quantize(x, fx, global_scale=gx, stochastic_rounding=sr_key, scale_layout=layout, path=qpath)
    wq, ws = block_scale.quantize(w, fw, global_scale=gw, scale_layout=layout, path=qpath)
    return scaled_gemm.scaled_matmul(xq, wq, xs, ws, out_dtype, lhs_global_scale=gx, rhs_global_scale=gw, path=path)


def _qdq_mm(x, w, fx, fw, out_dtype, path, where, why):
    """Where scaled_matmul would run XLA's path (exact bf16 dequantize + bf16 dot: a GPU whose tensor cores
    take no MX operands, e.g. sm_90a) for MXFP8 operands quantized here from high precision: each operand's
    dequantize(quantize(.)) in one pass of the fused kernel (block_scale.quantize_dequantize: the same bf16
    values, without writing the fp8 codes and reading them back) and the same bf16 dot. None otherwise."""
    from jax_tmem._core import config as _config
    if path != "auto" or fx.name not in block_scale.QDQ_FORMATS or fw.name not in block_scale.QDQ_FORMATS:
        return None
    if scaled_gemm.takes_kernel(where, path):  # (where, why: scaled_matmul's own decision)
        return None  # the block-scaled kernel takes it (a trusted tcgen05 build)
    xd = block_scale.quantize_dequantize(x, fx)
    wd = block_scale.quantize_dequantize(w, fw) if xd is not None else None
    if wd is None:
        return None
    problem = f"{fx.name}{list(x.shape)} x {fw.name}{list(w.shape)} -> {np.dtype(out_dtype).name}"
    _config.record(_config.Decision("scaled_matmul", problem, "xla",
                                    "fused quantize-dequantize (jax_tmem_quantize, bf16) + lax.dot_general (f32 "
                                    "accumulation)", scaled_gemm.xla_reason(why, path)))
    y = lax.dot_general(xd, wd, (((2,), (2,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    return y.astype(out_dtype)


@partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7, 8, 9, 10))
def _sdg(a, b, ga, gb, fa, fb, fg, out_dtype, path, per_tensor, sr_seed):
    return _qmm(a, b, fa, fb, out_dtype, path, per_tensor, gx=ga, gw=gb)


def _sdg_fwd(a, b, ga, gb, fa, fb, fg, out_dtype, path, per_tensor, sr_seed):
    return _qmm(a, b, fa, fb, out_dtype, path, per_tensor, gx=ga, gw=gb), (a, b, ga, gb)


def _clipped_to_zero(d, x, f, g):
    """JAX's straight-through estimator for NVFP4: d where |x| <= (global scale g) x 6 x 448, else 0 (x was
    clipped in the forward quantization)."""
    if not f.global_scale:
        return d
    lim = np.float32(ml_dtypes.finfo(f.data).max) * np.float32(ml_dtypes.finfo(f.scale).max)
    return jnp.where(jnp.abs(x.astype(jnp.float32)) <= lim * (1.0 if g is None else g), d, 0)


def _sdg_bwd(fa, fb, fg, out_dtype, path, per_tensor, sr_seed, res, g):
    a, b, ga, gb = res  # (B, M, K), (B, N, K), high precision; the configs' global scales (or None)
    g = g.astype(jnp.float32)
    no_g = (None if ga is None else jnp.zeros_like(ga), None if gb is None else jnp.zeros_like(gb))
    if fg.global_scale and not per_tensor:  # an NVFP4 cotangent config, as JAX: an unquantized backward
        da = jnp.einsum("bmn,bnk->bmk", g, b.astype(jnp.float32), precision=lax.Precision.HIGHEST)
        db = jnp.einsum("bmn,bmk->bnk", g, a.astype(jnp.float32), precision=lax.Precision.HIGHEST)
        da, db = _clipped_to_zero(da, a, fa, ga), _clipped_to_zero(db, b, fb, gb)
        return (da.astype(a.dtype), db.astype(b.dtype)) + no_g
    bt, at, gt = jnp.swapaxes(b, 1, 2), jnp.swapaxes(a, 1, 2), jnp.swapaxes(g, 1, 2)
    # (path "kernel": a backward GEMM whose format pair (fg with fb / fa) the custom call does not take here
    # runs the logged default instead)
    gp = path
    if path == "kernel" and not all(scaled_gemm.kernel_target(fg, f)[0] for f in (fa, fb)):
        gp = "auto"
    # stochastic rounding: one key from the cotangent's bits (one pass over g), a stream per backward GEMM
    ka, kb = (None, None) if sr_seed is None else jax.random.split(block_scale.content_key(g, sr_seed))
    da = _qmm(g, bt, fg, fb, jnp.float32, gp, per_tensor, ka)   # (B, M, N) x (B, K, N) -> (B, M, K), over N
    db = _qmm(gt, at, fg, fa, jnp.float32, gp, per_tensor, kb)  # (B, N, M) x (B, K, M) -> (B, N, K), over M
    return (da.astype(a.dtype), db.astype(b.dtype)) + no_g


_sdg.defvjp(_sdg_fwd, _sdg_bwd)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type, configs, path="auto", per_tensor=False,
                       sr_seed=None):
    """``per_tensor`` (the training recipes): NVFP4 operands get per-tensor global scales computed from
    themselves and a quantized backward; a contracting size off the block size is zero-padded.
    ``sr_seed`` (an int; 4-bit gradient formats): the cotangent is rounded stochastically in both
    backward GEMMs (random numbers from its bits and the seed: stateless)."""
    if sr_seed is not None and not per_tensor:
        raise ValueError("jax_tmem.scaled_dot_general: stochastic rounding of the gradient belongs to the training "
                         "recipes (per_tensor=True)")
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in x) for x in (lc, rc, lb, rb))
    if configs is None or len(configs) not in (2, 3):
        raise ValueError("jax_tmem.scaled_dot_general: configs must be [lhs, rhs] or [lhs, rhs, grad] block-scale "
                         "configs (jax.nn.get_scaled_dot_general_config('mxfp8'), or format names); for an "
                         "unscaled product use jax_tmem.dot_general")
    fa, fb = config_format(configs[0], "configs[0]"), config_format(configs[1], "configs[1]")
    fg = config_format(configs[2] if len(configs) == 3 else configs[1], "configs[2]")
    ga, gb = (None, None) if per_tensor else (config_global_scale(configs[0], fa, "configs[0]"),
                                              config_global_scale(configs[1], fb, "configs[1]"))
    out_dtype = np.dtype(preferred_element_type)
    a, a_free = _to_bmk(lhs, lb, lc)
    b, b_free = _to_bmk(rhs, rb, rc)
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        raise ValueError(f"jax_tmem.scaled_dot_general: lhs {lhs.shape} and rhs {rhs.shape} disagree on the batch "
                         f"or contracting sizes of {dimension_numbers}")
    k = a.shape[2]
    for f, name in ((fa, "lhs"), (fb, "rhs")):
        if k % f.block and not per_tensor:
            raise ValueError(f"jax_tmem.scaled_dot_general: the contracting size {k} is not a multiple of {name}'s "
                             f"{f.name} block size {f.block}; pad K")
    if sr_seed is not None and fg.data != block_scale.FORMATS["nvfp4"].data:
        raise ValueError(f"jax_tmem.scaled_dot_general: stochastic rounding is for 4-bit gradients, not {fg.name}")
    y = _sdg(a, b, ga, gb, fa, fb, fg, out_dtype, path, bool(per_tensor), sr_seed)
    batch = [lhs.shape[d] for d in lb]
    return y.reshape(tuple(batch) + tuple(a_free) + tuple(b_free))

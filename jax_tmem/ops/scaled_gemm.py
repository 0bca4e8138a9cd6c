"""The block-scaled GEMM op: ``out[b, m, n] = sum_k (lhs[b, m, k] * lhs_scales[b, m, k / bs]) *
(rhs[b, n, k] * rhs_scales[b, n, k / bs])`` times NVFP4's global scales, accumulated in float32, with
the operand layout of ``jax.nn.scaled_matmul`` (both operands K-last).

Paths: "kernel" runs the jax_tmem GEMM custom call with the block scales as operand roles (sfa, sfb in
cpp/include/jax_tmem/operands.def, ``sf_vec`` = 32): on an sm_90a GPU the block-scaled wgmma kernel
(kernels/sm90_block_scaled.cuh: FP8 wgmma per 32-K block, promoted into f32 with the scales; where 128x256
tiles fill the GPU, the data widened to bf16 with its scales in shared memory and bf16 wgmma,
kernels/sm90_mx_widen.cuh); on
sm_100a/sm_103a the tcgen05 kernel (kind::mxf8f6f4, scales staged SMEM -> TMEM by tcgen05.cp; compiled
and SASS-checked, NEVER RUN on Blackwell); on the CPU the C++ reference handler (the semantics the GPU
kernels are tested against). "xla" runs the reference semantics through XLA (``scaled_matmul_xla``:
exact bf16 dequantization and a bf16 dot with f32 accumulation, as jax.nn.scaled_matmul on Hopper).
"auto" takes XLA today, with the reason recorded: on the H200 our block-scaled kernel is still slower
than that XLA path (``AUTO_PREFERS_XLA``; docs/PERF.md), and the Blackwell kernel is taken only with
JAX_TMEM_ENABLE_SM100=1. MXFP4 x MXFP4 and NVFP4 x NVFP4 (``FP4_FORMATS``, packed e2m1 on both sides)
take the kernel path on sm_100a/sm_103a (kind::mxf4 / kind::mxf4nvf4, NVFP4's two global scales
multiplied into the ``scale`` operand and applied in the epilogue; compiled and SASS-checked, NEVER RUN on
Blackwell) and on the CPU reference handler; Hopper has no tensor-core instruction for them, so there
they run XLA. Each call records its decision with the reason (``JAX_TMEM_LOG=1``,
``jax_tmem.decisions()``).

Weight-only (``lhs_scales=None``): a high-precision lhs times a block-scaled rhs (the decode GEMM of a
model served with MXFP4 / NVFP4 weights): ``out = lhs @ dequantize(rhs).T * rhs_global_scale``. With a
bfloat16 lhs and mxfp4 / nvfp4 weights the custom call runs the weight-only 4-bit kernel
(kernels/w4_gemm.cuh: the packed weights read once, widened to bf16 on chip; up to 16 rows fed by TMA,
w4_tma.cuh; 17-64 rows of large weights by 128-row CTAs splitting K over a cluster, w4_wide.cuh with
mma.sync and, on sm_90a, w4_wgmma.cuh with the widened weights as wgmma's register operand; every built
arch, the sm_100a/sm_103a build never run) with the roles a, b, sfb (and scale: the global scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_tmem._core import arch as _arch, config as _config, ext as _ext
from jax_tmem.ops import block_scale, part_call as _part_call, partition as _partition

KERNEL_FORMATS = ("mxfp8", "mxfp8_e5m2")  # whole-byte elements: every kernel path (CPU, sm_90a, sm_100a)
FP4_FORMATS = ("mxfp4", "nvfp4")  # x the same format: the CPU handler and the sm_100a/sm_103a kernel
W4_FORMATS = FP4_FORMATS  # weight-only (lhs_scales=None) with a bfloat16 lhs: kernels/w4_gemm.cuh
# "auto" takes the weight-only kernel up to this many lhs rows: H200, 2026-11-23 (docs/PERF.md): 1.85-6.5x
# XLA's dequantize + bf16 GEMM at M <= 64, 0.55-0.59x at M = 256 (the kernel re-reads the weights per 32
# tokens; the many-token kernels of 2026-11-25 re-read them per 64, not measured beyond 64)
W4_AUTO_MAX_M = 64
# Why "auto" does not take the sm_90a block-scaled kernel yet: measured slower than XLA's path.
AUTO_PREFERS_XLA = ("the sm_90a block-scaled kernel (path='kernel') is slower than XLA's bf16 GEMM of the exactly "
                    "dequantized operands (H100, 2026-11-26: 380 vs 637 TFLOP/s at 8192^3; the promotion and the "
                    "widened schedules are bound by instruction issue and shared-memory bandwidth, docs/PERF.md)")


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
        if sc is None:  # weight-only: a high-precision lhs
            if name == "rhs":
                raise ValueError("jax_tmem.scaled_matmul: rhs_scales is None; the rhs must be block-scaled")
            if not jnp.issubdtype(dt, jnp.floating) or np.dtype(dt).itemsize < 2:
                raise TypeError(f"jax_tmem.scaled_matmul: lhs_scales=None (weight-only) takes a bfloat16, float16 or "
                                f"float32 lhs, got {np.dtype(dt).name}; quantized lhs data needs its lhs_scales")
            fmts.append(None)
            plain.append(None)
            continue
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
    """The reference semantics through XLA: both operands dequantized and one dot accumulated in float32.
    Every block-dequantized value (a <= 4-significant-bit element times a power of two, or an e2m1 element
    times a UE4M3 scale: <= 6 bits) is exact in bfloat16 (f32's exponent range), so the operands are
    dequantized to bfloat16 and multiplied by the tensor cores with f32 accumulation, as
    jax.nn.scaled_matmul does on Hopper. NVFP4's global scales (arbitrary float32) multiply the float32
    product once instead of every element (the same sum up to the rounding of those products: within
    accumulation tolerance of dequantizing in float32; that took a float32 HIGHEST dot, ~7x slower on
    Hopper). Only a weight-only call whose activations are not bfloat16 runs in float32 (HIGHEST)."""
    weight_only = lhs_scales is None
    exact_bf16 = not weight_only or np.dtype(lhs.dtype) == np.dtype(jnp.bfloat16)
    dt = jnp.bfloat16 if exact_bf16 else jnp.float32
    # NOTE: the quantized data must be what is multiplied: when the quantization is in the same program
    # (scaled_dot_general), XLA's excess-precision simplification may fold x -> f8 -> f32 into x, which
    # multiplies the unquantized values (seen on the H200, 2026-11-23: 3.7 % off the quantized product).
    lhs, rhs = lax.optimization_barrier((lhs, rhs))
    g_lhs, g_rhs = (None, None) if exact_bf16 else (lhs_global_scale, rhs_global_scale)
    a = lhs.astype(dt) if weight_only else block_scale.dequantize(lhs, lhs_scales, global_scale=g_lhs, dtype=dt)
    b = block_scale.dequantize(rhs, rhs_scales, global_scale=g_rhs, dtype=dt)
    y = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))),
                        precision=lax.Precision.DEFAULT if exact_bf16 else lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
    gs = [jnp.asarray(g, jnp.float32).reshape(()) for g in (lhs_global_scale, rhs_global_scale) if g is not None]
    if exact_bf16 and gs:  # one product of the scales, as the kernels' `scale` operand multiplies
        y = y * (gs[0] * gs[1] if len(gs) == 2 else gs[0])
    return y.astype(out_dtype)


def scaled_matmul_ffi(lhs, rhs, lhs_scales, rhs_scales, out_dtype, block: int, layout: int = 0, config: int = -1,
                      global_scale=None):
    """The jax_tmem GEMM custom call with block scales: (B, M, K) x (B, N, K), both K-major, scales plain
    (B, rows, K / block) (``layout`` 0) or in the 128x4 tiles of ``swizzle_scales`` (``layout`` 1), in role
    order a, b, sfa, sfb, scale. ``lhs_scales=None``: the weight-only GEMM (no sfa). ``global_scale``: a
    float32 scalar multiplying the product (NVFP4's global scales, lhs's times rhs's). ``config``
    (private, benchmarks): the sm_90a kernel's configuration (cpp/src/sm90_block_scaled.cu), -1 its
    heuristic. Under jit with sharded operands the call partitions (:class:`ScaledCall`'s rule)."""
    gs = None if global_scale is None else jnp.asarray(global_scale, jnp.float32).reshape(1)
    inputs = [(r, v) for r, v in (("a", lhs), ("b", rhs), ("sfa", lhs_scales), ("sfb", rhs_scales), ("scale", gs))
              if v is not None]  # in role order (operands.def)
    spec = ScaledCall(np.dtype(out_dtype), int(block), int(layout), int(config), tuple(r for r, _ in inputs))
    (out,) = _part_call.bind(spec, *[v for _, v in inputs])
    return out


@dataclass(frozen=True)
class ScaledCall:
    """The block-scaled GEMM custom call as a partitionable call (ops/partition.py). Its sharding rule:
    ``b m (kb q), b n (kb q), b m kb, b n kb, g -> b m n`` for plain scales (q = the block: K splits in
    whole blocks, the scales follow; ``kb`` is summed over the devices); with the 128x4 tiles, M and N in
    whole 128-row tiles and K in whole 4-block tile columns (``b (mt r) (kt q4)``, scales ``b mt kt u v``),
    and a tiled dim whose tiles are padded (rows not a multiple of 128, K / block not of 4) stays whole."""
    out_dtype: np.dtype
    block: int
    layout: int
    config: int
    roles: tuple  # the operand roles present, in order: a, b, [sfa], sfb, [scale]
    name = "scaled_matmul"

    def out_avals(self, lhs, rhs, *_):
        return [jax.core.ShapedArray((lhs.shape[0], lhs.shape[1], rhs.shape[1]), self.out_dtype)]

    def local(self, *args, partial=False):
        lhs, rhs = args[0], args[1]
        b, m, k = lhs.shape
        n = rhs.shape[1]
        for platform in ("cpu", "cuda"):
            _ext.ensure_registered(platform)
        odt = _partition.partial_dtype(self.out_dtype) if partial else self.out_dtype
        call = jax.ffi.ffi_call("jax_tmem_gemm", (jax.ShapeDtypeStruct((b, m, n), odt),
                                                  jax.ShapeDtypeStruct((1,), np.float32)))
        attrs = _ext.gemm_attrs(list(self.roles), batch=b, m=m, n=n, k=k, a_mn_major=False, b_mn_major=False,
                                lda=k, ldb=k, stride_a=m * k if b > 1 else 0, stride_b=n * k if b > 1 else 0,
                                sf_vec=self.block, sf_layout=self.layout, config=self.config)
        out, _ = call(*args, **attrs)
        return [out]

    def rule(self, shapes) -> _partition.Rule:
        (_, m, k), (_, n, _) = shapes[0], shapes[1]
        q, split = self.block, _partition.split_dim
        sizes, replicate = {}, ["g"]
        if self.layout == 0:
            kdim = split("kb", "q", k, q, sizes, replicate, "kx")
            sdims = {"a": ["b", "m", "kb"], "b": ["b", "n", "kb"]}
            mdim, ndim = "m", "n"
        else:  # 128x4 tiles: whole tiles only, padded tiles not at all
            mdim, kdim, sa = _partition.scale_tile_dims(m, k, q, sizes, replicate, "m")
            ndim, _, sb = _partition.scale_tile_dims(n, k, q, sizes, replicate, "n")
            sdims = {"a": ["b"] + sa, "b": ["b"] + sb}
        dims = {"a": ["b", mdim, kdim], "b": ["b", ndim, kdim], "sfa": sdims["a"], "sfb": sdims["b"], "scale": ["g"]}
        red = kdim[0] if isinstance(kdim, tuple) else "kb" if self.layout == 0 else "kt"
        return _partition.Rule(dims=tuple(tuple(dims[r]) for r in self.roles), out=(("b", mdim, ndim),),
                               sizes=tuple(sorted(sizes.items())), reduction=() if red in replicate else (red,),
                               replicate=tuple(dict.fromkeys(replicate)), priority="bmkn",
                               why=tuple((f, _partition.SPLIT_WHY) for f in replicate))

    def batch(self, args, dims):
        return _part_call.map_batch(self, args, dims)


def kernel_target(fa, fb, lhs_dtype=None, k=None) -> tuple[str, str]:
    """Where the custom call would run a (fa x fb) block-scaled GEMM in this process: ("cuda <arch>", "") on
    a GPU with a block-scaled kernel (sm_90a wgmma; sm_100a/sm_103a tcgen05, never run on Blackwell),
    ("cpu reference handler", why "auto" does not take it) without a GPU, or ("", why not). ``fa`` None:
    the weight-only GEMM (a ``lhs_dtype`` lhs times fb weights)."""
    if fa is None:
        if fb.name not in W4_FORMATS or np.dtype(lhs_dtype) != np.dtype(jnp.bfloat16):
            return "", (f"the weight-only kernel takes a bfloat16 lhs and {' or '.join(W4_FORMATS)} weights, not "
                        f"{np.dtype(lhs_dtype).name} x {fb.name}")
        if k is not None and k % 32:
            return "", f"the weight-only kernel needs K a multiple of 32 (K = {k})"
    elif fa.name in FP4_FORMATS or fb.name in FP4_FORMATS:
        if fa.name != fb.name:
            return "", (f"the 4-bit block-scaled GEMM multiplies {' or '.join(FP4_FORMATS)} by the same format, not "
                        f"{fa.name} x {fb.name}")
    elif fa.name not in KERNEL_FORMATS or fb.name not in KERNEL_FORMATS:
        return "", (f"the custom call takes {' or '.join(KERNEL_FORMATS)} operands, or mxfp4 x mxfp4 and nvfp4 x nvfp4, "
                    f"not {fa.name} x {fb.name}")
    if jax.default_backend() == "gpu":
        cc, why = _arch.device_cc()
        arch, why = _arch.arch_target(cc) if cc >= 0 else ("", why)
        if not arch:
            return "", why
        if fa is not None and fa.name in FP4_FORMATS:
            if not arch.startswith("sm_10"):
                return "", (f"{fa.name} x {fb.name}: no {arch} kernel (Hopper's tensor cores take no 4-bit operands; "
                            "the sm_100a/sm_103a kind::mxf4 kernels only); XLA's dequantize + bf16 GEMM runs it")
            if k is not None and k % 32:
                return "", f"the sm_100a 4-bit kernel needs K a multiple of 32 (16-byte TMA rows), K = {k}"
        ok, why = _ext.ensure_registered("cuda")
        return (f"cuda {arch}", "") if ok else ("", why)
    ok, why = _ext.ensure_registered("cpu")
    if not ok:
        return "", why
    return "cpu reference handler", "no GPU: the reference semantics run through XLA (the C++ CPU handler is a slow reference)"


def route(fa, fb, lhs_dtype=None, k=None) -> tuple[str, str]:
    """kernel_target with the Blackwell rule: (where the custom call would run, why "auto" does not take it
    there: "" where it does). scaled_matmul decides by it, and so does whatever must know its decision
    beforehand (scaled_dot's fused quantize-dequantize)."""
    where, why = kernel_target(fa, fb, lhs_dtype, k)
    if where.startswith("cuda sm_10") and not _arch.sm100_trusted():
        why = ("jax_tmem's sm_100a/sm_103a build has never run on a Blackwell GPU: path='kernel' or "
               "JAX_TMEM_ENABLE_SM100=1 takes it")
    return where, why


def kernel_scale_layout(where: str, k: int, block: int) -> str:
    """The scale layout the custom call at ``where`` reads for K = ``k``: "swizzled" (the 128x4 tiles) on
    sm_100a / sm_103a (what tcgen05.cp copies) and on sm_90a where K / block is not a multiple of 4 (its
    kernel reads plain scales a word per 4 columns), else "plain". Quantizing with this layout lets the
    fused quantize kernel write what the GEMM reads (no swizzle op in between)."""
    return "swizzled" if where.startswith("cuda sm_10") or (where.startswith("cuda") and (k // block) % 4) else "plain"


def takes_kernel(where: str, path: str) -> bool:
    """Whether a two-operand (both block-scaled) scaled_matmul runs the custom call (else XLA's path):
    path "kernel", or "auto" on a trusted Blackwell build (on Hopper XLA's path is faster: AUTO_PREFERS_XLA)."""
    return path == "kernel" or (path == "auto" and where.startswith("cuda sm_10") and _arch.sm100_trusted())


def xla_reason(why: str, path: str) -> str:
    """The logged reason of a scaled_matmul that runs XLA's path."""
    return 'path "xla"' if path != "auto" else why or AUTO_PREFERS_XLA


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, out_dtype, lhs_global_scale=None, rhs_global_scale=None,
                  path="auto"):
    fa, fb, sa, sb = plan(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, lhs_scales, rhs_scales, out_dtype)
    for f, g, name in ((fa, lhs_global_scale, "lhs"), (fb, rhs_global_scale, "rhs")):
        if g is not None and (f is None or not f.global_scale):
            raise ValueError(f"jax_tmem.scaled_matmul: {name}_global_scale is for nvfp4 operands, not "
                             f"{f.name if f else 'an unscaled lhs (lhs_scales=None)'}")
    lhs_name = fa.name if fa else np.dtype(lhs.dtype).name
    problem = (f"{lhs_name}{list(lhs.shape)} x {fb.name}{list(rhs.shape)} -> {np.dtype(out_dtype).name}")
    where, why = route(fa, fb, lhs.dtype, lhs.shape[2])
    if path == "kernel" and not where:
        raise ValueError(f'jax_tmem.scaled_matmul: path="kernel": {why}; use path="auto" (XLA)')
    if fa is None:  # weight-only: the 4-bit kernel (every arch), "auto" up to W4_AUTO_MAX_M rows
        if path == "auto" and where.startswith("cuda") and not why and lhs.shape[1] > W4_AUTO_MAX_M:
            why = (f"M = {lhs.shape[1]} > {W4_AUTO_MAX_M}: the weight-only kernel re-reads the weights per 32 rows; "
                   "XLA's bf16 GEMM of the dequantized weights is faster there")
        if path == "kernel" or (path == "auto" and where.startswith("cuda") and not why):
            _config.record(_config.Decision("scaled_matmul", problem, "kernel", f"{where}, jax_tmem_gemm weight-only 4-bit "
                                            "(a, b, sfb)", f'path "{path}"'))
            return scaled_matmul_ffi(lhs, rhs, None, sb, out_dtype, fb.block, global_scale=rhs_global_scale)
    elif takes_kernel(where, path):
        _config.record(_config.Decision("scaled_matmul", problem, "kernel", f"{where}, jax_tmem_gemm with sfa/sfb",
                                        f'path "{path}"'))
        gs = None  # NVFP4's global scales (plan() admits them for nvfp4 only) as one product: the `scale` role
        for g in (lhs_global_scale, rhs_global_scale):
            if g is not None:
                g = jnp.asarray(g, jnp.float32).reshape(())
                gs = g if gs is None else gs * g
        # Pre-swizzled scales go to the call as they are, unless K / block leaves padding columns: the sm_100a
        # 4-bit MMAs read a whole 64-K step's scales, past K, so those go as the re-swizzled plain scales of plan()
        # (zero padding; a NaN padding byte from elsewhere would turn valid outputs NaN). The sm_100a kernel
        # reads the 128x4 layout only (its 512-byte blocks are what tcgen05.cp copies); the sm_90a kernel reads
        # plain scales a word per 4 columns, so with K / 32 not a multiple of 4 it takes the 128x4 layout too (a
        # small XLA op).
        if lhs_scales.ndim == 5 or rhs_scales.ndim == 5 or kernel_scale_layout(where, lhs.shape[2], fa.block) == "swizzled":
            padded = (lhs.shape[2] // fa.block) % 4 != 0
            sw = lambda given, plain: given if given.ndim == 5 and not padded else block_scale.swizzle_scales(plain)
            return scaled_matmul_ffi(lhs, rhs, sw(lhs_scales, sa), sw(rhs_scales, sb),
                                     out_dtype, fa.block, layout=1, global_scale=gs)
        return scaled_matmul_ffi(lhs, rhs, sa, sb, out_dtype, fa.block, global_scale=gs)
    reason = xla_reason(why, path)
    target = "exact bf16 dequantize + lax.dot_general (f32 accumulation)" + (
        "" if lhs_global_scale is None and rhs_global_scale is None else ", the global scales times the f32 product")
    _config.record(_config.Decision("scaled_matmul", problem, "xla", target, reason))
    return scaled_matmul_xla(lhs, rhs, sa, sb, out_dtype, lhs_global_scale, rhs_global_scale)

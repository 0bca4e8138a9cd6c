"""Block-scaled formats: quantization, dequantization and the 128x4 scale layout (the reference
semantics every block-scaled kernel is tested against; plain JAX, any backend), and the way into the
fused CUDA quantize kernel (``quantize(..., path="kernel")``, kernels/mx_quantize.cuh).

Formats (``FORMATS``): MXFP8 (e4m3 data, or e5m2 for ``"mxfp8_e5m2"``, one UE8M0 scale per 32 values
along the quantized axis), MXFP4 (e2m1 data, UE8M0 per 32) and NVFP4 (e2m1 data, UE4M3 per 16, plus a
per-tensor float32 ``global_scale``).

``quantize`` follows JAX's own quantizer (``jax._src.cudnn.scaled_matmul_stablehlo.quantize``) bit for
bit where JAX has the format (mxfp8, nvfp4): per block, ``amax / max(data type)``; MX scales are that
rounded *up* to a power of two (UE8M0), so no value clips; NVFP4 divides by ``global_scale`` first and
rounds the scale to UE4M3. MXFP4 and e5m2 MXFP8 use the MX recipe with their data type.

``swizzle_scales`` lays plain ``(..., rows, cols)`` scales out as cuBLAS / CUTLASS / tcgen05 read them
from global memory: rows padded to 128, columns to 4, and the row-major flattening of the result
``(..., rows/128, cols/4, 32, 16)`` holds ``scales[r, c]`` at
``((r // 128) * (cols / 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from jax_tmem.ops import part_call as _part_call, partition as _partition


@dataclass(frozen=True)
class Format:
    name: str
    data: np.dtype
    scale: np.dtype
    block: int
    global_scale: bool  # has a per-tensor float32 scale (NVFP4)


FORMATS = {f.name: f for f in (
    Format("mxfp8", np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e8m0fnu), 32, False),
    Format("mxfp8_e5m2", np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.float8_e8m0fnu), 32, False),
    Format("mxfp4", np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.float8_e8m0fnu), 32, False),
    Format("nvfp4", np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.float8_e4m3fn), 16, True),
)}


def get_format(fmt) -> Format:
    if isinstance(fmt, Format):
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"jax_tmem: fmt={fmt!r} is not a block-scaled format; use one of {sorted(FORMATS)}")
    return FORMATS[fmt]


def format_of(data_dtype, scale_dtype, block: int) -> Format:
    """The format of a (data, scales) pair, or ValueError naming what does not match."""
    data_dtype, scale_dtype = np.dtype(data_dtype), np.dtype(scale_dtype)
    for f in FORMATS.values():
        if f.data == data_dtype and f.scale == scale_dtype and f.block == block:
            return f
    known = "; ".join(f"{f.name}: {f.data.name} data, {f.scale.name} scales, block {f.block}" for f in FORMATS.values())
    raise ValueError(f"jax_tmem: {data_dtype.name} data with {scale_dtype.name} scales and block {block} is not a "
                     f"block-scaled format ({known})")


def _e8m0_round_up(x):
    """UE8M0 bytes of positive f32 x rounded up to a power of two (JAX's cast_to_e8m0_with_rounding_up)."""
    bits = lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    exp, mant = bits >> 23, bits & 0x7FFFFF
    round_up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
    return jnp.where(round_up, exp + 1, exp).astype(jnp.uint8)


def _e8m0_value(q, dtype):
    """The value of UE8M0 bytes as `dtype`, 0 read as the smallest positive (JAX's e8m0_to_dtype)."""
    v = lax.bitcast_convert_type(q.astype(jnp.uint32) << 23, jnp.float32)
    tiny = 2.0**-15 if np.dtype(dtype) == np.float16 else 2.0**-127
    return jnp.where(v == 0, jnp.float32(tiny), v).astype(dtype)


def _quantize_kernel_target(f: Format, x) -> str:
    """"" when the fused CUDA quantize kernel (cpp/include/jax_tmem/kernels/mx_quantize.cuh) takes this
    call, else why not."""
    from jax_tmem._core import ext as _ext  # ops -> _core (the reference code above needs no extension)
    if np.dtype(x.dtype) not in (np.dtype(jnp.bfloat16), np.dtype(jnp.float16), np.dtype(jnp.float32)):
        return f"the fused quantize kernel reads bfloat16, float16 or float32, not {np.dtype(x.dtype).name}"
    from jax_tmem._core import canon as _canon
    if _canon.symbolic(x.shape):
        return "symbolic dimensions (jax.export shape polymorphism): the kernel is planned for concrete shapes"
    if jax.default_backend() != "gpu":
        return "no GPU (the fused quantize kernel is CUDA only)"
    ok, why = _ext.ensure_registered("cuda")
    return "" if ok else why


def _quantize_kernel_form(x, axis: int) -> str:
    """How the fused kernel takes ``axis``: "rowwise" (the last axis), "colwise" (the second-to-last, with
    the last a multiple of 16 bytes), or "moved" (XLA moves the axis last first: a transpose in memory)."""
    if axis == x.ndim - 1:
        return "rowwise"
    if axis == x.ndim - 2 and (x.shape[-1] * np.dtype(x.dtype).itemsize) % 16 == 0:
        return "colwise"
    return "moved"


def _quantize_ffi(x, f: Format, axis: int, swizzled: bool, global_scale=None, impl: str = "ffi"):
    """The fused CUDA quantize kernel along ``axis``: the last axis (rowwise) or the second-to-last
    (colwise) in place; any other axis is moved last and back by XLA. Swizzled scales come out in the
    128x4 tiles with the axis next to the quantized one as rows (see :func:`quantize`). NVFP4's
    ``global_scale`` (a float32 scalar) is the call's second input: x is divided by it in the kernel.
    Under jit with sharded operands the call partitions (:class:`QuantizeCall`'s rule). ``impl="xla"``
    (tests only) runs the same partitionable call with XLA's quantizer as each device's local code."""
    form = _quantize_kernel_form(x, axis)
    xin = jnp.moveaxis(x, axis, -1) if form == "moved" else x
    gs = () if global_scale is None else (jnp.asarray(global_scale, jnp.float32).reshape(1),)
    spec = QuantizeCall(f.name, form == "colwise", bool(swizzled), bool(gs), impl)
    data, scales = _part_call.bind(spec, xin, *gs)
    if form == "moved":
        data = jnp.moveaxis(data, -1, axis)
        scales = scales if swizzled else jnp.moveaxis(scales, -1, axis)
    return data, scales


@dataclass(frozen=True)
class QuantizeCall:
    """The fused quantize custom call as a partitionable call (ops/partition.py). Every dim of x passes
    through; the quantized axis splits in whole blocks (``(kb q)``, the scales' ``kb``); swizzled scales
    split in whole 128x4 tiles (rows ``(rt 128)``, K ``(kt 4*block)``), and a dim whose tiles are padded
    stays whole. The global scale is replicated. No communication."""
    fmt: str
    colwise: bool
    swizzled: bool
    has_global_scale: bool
    impl: str = "ffi"  # "xla": tests of the partitioning on machines without the CUDA kernel
    dequant: bool = False  # MXFP8 rowwise: data is dequantize(quantize(x)) as bfloat16 (quantize_dequantize)
    name = "quantize"

    def _shapes(self, xshape):
        f = FORMATS[self.fmt]
        k = xshape[-2] if self.colwise else xshape[-1]
        rows = xshape[-1] if self.colwise else (xshape[-2] if len(xshape) >= 2 else 1)
        if self.swizzled:
            return xshape[:-2] + (-(-rows // 128), -(-(k // f.block) // 4), 32, 16)
        if self.colwise:
            return xshape[:-2] + (k // f.block, rows)
        return xshape[:-1] + (k // f.block,)

    def _data_dtype(self):
        return np.dtype(jnp.bfloat16) if self.dequant else FORMATS[self.fmt].data

    def out_avals(self, x, *_):
        f = FORMATS[self.fmt]
        return [jax.core.ShapedArray(x.shape, self._data_dtype()), jax.core.ShapedArray(self._shapes(x.shape), f.scale)]

    def local(self, x, *gs, partial=False):
        del partial  # nothing to sum
        f = FORMATS[self.fmt]
        if self.impl == "xla":
            axis = x.ndim - 2 if self.colwise else x.ndim - 1
            data, scales = quantize(x, f, axis=axis, global_scale=gs[0] if gs else None, path="xla",
                                    scale_layout="swizzled" if self.swizzled else "plain")
            if self.dequant:
                data = dequantize(*lax.optimization_barrier((data, scales)), axis=axis, dtype=jnp.bfloat16)
            return [data, scales]
        call = jax.ffi.ffi_call("jax_tmem_quantize", (jax.ShapeDtypeStruct(x.shape, self._data_dtype()),
                                                       jax.ShapeDtypeStruct(self._shapes(x.shape), f.scale)))
        code = 0 if not self.dequant else 1 if f.data == np.dtype(ml_dtypes.float8_e4m3fn) else 2
        return list(call(x, *gs, colwise=self.colwise, swizzled=self.swizzled, dequant=code))

    def rule(self, shapes):
        f, split = FORMATS[self.fmt], _partition.split_dim
        xs = shapes[0]
        lead = [f"d{i}" for i in range(len(xs) - (2 if (self.colwise or self.swizzled) else 1))]
        sizes, replicate = {}, ["g"]
        k = xs[-2] if self.colwise else xs[-1]
        if not self.swizzled:
            kd = split("kb", "q", k, f.block, sizes, replicate, "kx")
            x = lead + ([kd, "n"] if self.colwise else [kd])
            sc = lead + (["kb", "n"] if self.colwise else ["kb"])
        else:
            rows = xs[-1] if self.colwise else xs[-2]
            rd, kd, tiles = _partition.scale_tile_dims(rows, k, f.block, sizes, replicate, "r")
            x = lead + ([kd, rd] if self.colwise else [rd, kd])
            sc = lead + tiles
        dims = (tuple(x),) + ((("g",),) if self.has_global_scale else ())
        return _partition.Rule(dims=dims, out=(tuple(x), tuple(sc)), sizes=tuple(sorted(sizes.items())),
                               replicate=tuple(dict.fromkeys(replicate)), priority="d",
                               why=tuple((f, _partition.SPLIT_WHY) for f in replicate))

    def batch(self, args, dims):
        if len(args) == 1 or dims[1] is None:  # leading dims are more rows: one call
            x = jnp.moveaxis(args[0], dims[0], 0)
            return _part_call.bind(self, x, *args[1:]), [0, 0]
        return _part_call.map_batch(self, args, dims)  # a global scale per example: one call each


QDQ_FORMATS = ("mxfp8", "mxfp8_e5m2")  # the fused quantize-dequantize (kernels/mx_quantize.cuh, kDq)


def quantize_dequantize(x, fmt, impl: str = "ffi"):
    """``dequantize(*quantize(x, fmt), dtype=bfloat16)`` along the last axis in one pass of the fused
    CUDA kernel (MXFP8: each block's fp8 codes times its scale, as bfloat16, bit for bit what the two
    steps give), or None where that kernel does not run (another format, no GPU kernel): the bf16 operand
    of the MXFP8 product on GPUs whose tensor cores take no MX operands (sm_90a: ``scaled_dot_general``).
    ``impl="xla"``: the same partitionable call with XLA's two steps as its local code (tests)."""
    from jax_tmem._core import config as _config
    f = get_format(fmt)
    x = jnp.asarray(x)
    if f.name not in QDQ_FORMATS or x.ndim < 1 or x.shape[-1] % f.block or (impl == "ffi" and _quantize_kernel_target(f, x)):
        return None
    _config.record(_config.Decision("quantize", f"{np.dtype(x.dtype).name}{list(x.shape)} -> {f.name} along axis "
                                    f"{x.ndim - 1}", "kernel", "cuda, jax_tmem_quantize (rowwise, dequantized to bf16)",
                                    "quantize_dequantize"))
    return _part_call.bind(QuantizeCall(f.name, False, False, False, impl, dequant=True), x)[0]


def e2m1_stochastic_round(v, key):
    """``v`` (already scaled into e2m1's range [-6, 6]) rounded to a neighbouring e2m1 value at random, up
    with probability (|v| - lo) / (hi - lo): unbiased, E[round(v)] = v. The grid steps are 0.5 below 2, 1
    below 4 and 2 up to 6."""
    a = jnp.abs(v.astype(jnp.float32))
    step = jnp.where(a < 2, 0.5, jnp.where(a < 4, 1.0, 2.0)).astype(jnp.float32)
    lo = jnp.floor(a / step) * step
    u = jax.random.uniform(key, a.shape, jnp.float32)
    q = jnp.minimum(jnp.where(u < (a - lo) / step, lo + step, lo), 6.0)
    return jnp.sign(v.astype(jnp.float32)) * q


def content_key(x, seed: int = 0):
    """A PRNG key from a tensor's bits (a wrapping sum of its 32-bit words) and ``seed``: stateless random
    numbers that differ from one tensor to the next (a new gradient, a new draw) and repeat for the same
    one, so a recipe needs no RNG state outside ``params``."""
    bits = lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    h = jnp.sum(bits * jnp.uint32(2654435761), dtype=jnp.uint32)
    return jax.random.fold_in(jax.random.key(seed), h)


def quantize(x, fmt, *, axis: int = -1, global_scale=None, path=None, scale_layout: str = "plain",
             stochastic_rounding=None):
    """Quantizes ``x`` in blocks along ``axis``: returns ``(data, scales)`` with ``data`` of x's shape in
    the format's data type and ``scales`` of x's shape with ``axis`` divided by the block size (plain
    layout; :func:`swizzle_scales` gives the kernels' layout).

    fmt: "mxfp8" (e4m3), "mxfp8_e5m2", "mxfp4" or "nvfp4". global_scale: NVFP4's per-tensor float32
    scale (default 1.0, as ``jax.nn.get_scaled_dot_general_config("nvfp4")``); x is divided by it first.
    path: None (the path in force, ``jax_tmem.use_path`` / ``$JAX_TMEM_PATH``: "xla" there is "xla" here, else
    "auto"), "auto" (the fused CUDA kernel where it runs, else XLA: on the H200 it is bit-identical to
    JAX's jitted quantizer and 2.1-2.3x faster for mxfp8, docs/PERF.md), "xla", or "kernel": the fused
    CUDA kernel (every format, bf16/f16/f32 x, one read of x; GPU only; bit-identical to JAX's quantizer
    as XLA compiles it on the GPU, including its float32 division (div.full.f32) and its rewrite of
    NVFP4's (x / g) / s into x / (g * s), for a traced global scale g: a constant one XLA may fold into a
    multiplication by its reciprocal). The decision is logged. The kernel quantizes the last axis (rowwise)
    and the second-to-last (colwise: a (K, N) weight, the backward pass's layout) in place; any other
    axis is moved last by XLA first.
    scale_layout: "plain" (above) or "swizzled": the scales in the 128x4 tiles the GEMM kernels read,
    ``swizzle_scales(moveaxis(plain_scales, axis, -1))`` (the rows are the axis after the quantized one
    for colwise, the one before for rowwise), written directly by the kernel.
    stochastic_rounding: None (round to nearest even), or a PRNG key: the 4-bit formats' elements are
    rounded up or down at random, unbiased (:func:`e2m1_stochastic_round`; the scales are as without it).
    XLA's quantizer runs it (the fused kernel rounds to nearest), logged.
    """
    from jax_tmem._core import config as _config
    if path not in (None, "auto", "kernel", "xla"):
        raise ValueError(f"jax_tmem.quantize: path={path!r} is not supported; use 'auto', 'kernel' or 'xla' (or None)")
    if path is None:  # the path in force (jax_tmem.use_path, $JAX_TMEM_PATH): "xla" is XLA's quantizer, else "auto"
        path = "xla" if _config.current_path() == "xla" else "auto"
    f = get_format(fmt)
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"jax_tmem.quantize: x must be floating point, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("jax_tmem.quantize: x must have rank >= 1")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"jax_tmem.quantize: axis={axis} is out of range for x of shape {tuple(x.shape)}")
    axis = axis % x.ndim
    k = x.shape[axis]
    if k % f.block:
        raise ValueError(f"jax_tmem.quantize: x.shape[{axis}] = {k} is not a multiple of {f.name}'s block size "
                         f"{f.block}; pad the quantized axis to a multiple of {f.block}")
    if global_scale is not None and not f.global_scale:
        raise ValueError(f"jax_tmem.quantize: global_scale is for nvfp4 only, not {f.name}")
    if scale_layout not in ("plain", "swizzled"):
        raise ValueError(f"jax_tmem.quantize: scale_layout={scale_layout!r}; use 'plain' or 'swizzled'")
    swizzled = scale_layout == "swizzled"
    if swizzled and x.ndim < 2:
        raise ValueError("jax_tmem.quantize: scale_layout='swizzled' needs x of rank >= 2 (rows and the quantized axis)")
    problem = f"{np.dtype(x.dtype).name}{list(x.shape)} -> {f.name} along axis {axis}"
    why = _quantize_kernel_target(f, x)
    if stochastic_rounding is not None:
        if f.data != np.dtype(ml_dtypes.float4_e2m1fn):
            raise ValueError(f"jax_tmem.quantize: stochastic_rounding is for the 4-bit formats (mxfp4, nvfp4), not "
                             f"{f.name}")
        if path == "kernel":
            raise ValueError('jax_tmem.quantize: path="kernel" rounds to nearest; stochastic_rounding runs on '
                             'path="auto" or "xla"')
        why = "stochastic rounding (XLA's quantizer with random rounding; the fused kernel rounds to nearest)"
    if path == "kernel" or (path in (None, "auto") and not why):
        if why:
            raise ValueError(f'jax_tmem.quantize: path="kernel": {why}; use path="auto" (XLA)')
        _config.record(_config.Decision("quantize", problem, "kernel",
                                        f"cuda, jax_tmem_quantize ({_quantize_kernel_form(x, axis)})",
                                        f'path "{path or "auto"}"'))
        if f.global_scale and global_scale is not None and jnp.size(global_scale) != 1:
            raise ValueError(f"jax_tmem.quantize: global_scale must be one float32 value, got shape "
                             f"{jnp.shape(global_scale)}")
        return _quantize_ffi(x, f, axis, swizzled, global_scale if f.global_scale else None)
    _config.record(_config.Decision("quantize", problem, "xla", "jnp ops (JAX's quantizer)",
                                    'path "xla"' if path == "xla" else why))
    xm = jnp.moveaxis(x, axis, -1)
    shape = xm.shape
    xb = xm.reshape(shape[:-1] + (k // f.block, f.block))
    dmax = np.asarray(ml_dtypes.finfo(f.data).max, np.float32)
    if f.global_scale:
        gs = jnp.asarray(1.0 if global_scale is None else global_scale, jnp.float32)
        if gs.size != 1:
            raise ValueError(f"jax_tmem.quantize: global_scale must be one float32 value, got shape {gs.shape}")
        xb = xb / gs.reshape(())
        smax = np.asarray(ml_dtypes.finfo(f.scale).max, np.float32)
        amax = jnp.max(jnp.abs(xb), axis=-1, keepdims=True) / dmax.astype(xb.dtype)
        scales = lax.optimization_barrier(jnp.clip(amax, 0, smax.astype(xb.dtype)).astype(f.scale))
        scaled = xb / scales.astype(jnp.float32)
    else:
        amax = jnp.max(jnp.abs(xb), axis=-1, keepdims=True) / dmax.astype(xb.dtype)
        q = _e8m0_round_up(amax)
        # An all-zero block has scale byte 0, read as the smallest positive value (2^-127 in float32, which XLA:CPU
        # flushes to zero: 0 / 0 would be NaN there). Dividing by it is multiplying by its reciprocal, a normal
        # number: the same exact products, also where subnormals are flushed.
        inv_tiny = np.asarray(2.0**15 if np.dtype(xb.dtype) == np.float16 else 2.0**127, np.float32).astype(xb.dtype)
        scaled = jnp.where(q == 0, xb * inv_tiny, xb / _e8m0_value(q, xb.dtype))
        scales = lax.bitcast_convert_type(q, f.scale)
    lim = dmax.astype(scaled.dtype)
    scaled = jnp.clip(scaled, -lim, lim)
    if stochastic_rounding is not None:  # onto the e2m1 grid at random: the cast below is then exact
        scaled = e2m1_stochastic_round(scaled, stochastic_rounding)
    data = scaled.astype(f.data).reshape(shape)
    scales = scales.reshape(shape[:-1] + (k // f.block,))
    if swizzled:  # scales of the moved x: the quantized axis last, its neighbour the rows
        return jnp.moveaxis(data, -1, axis), swizzle_scales(scales)
    return jnp.moveaxis(data, -1, axis), jnp.moveaxis(scales, -1, axis)


def dequantize(data, scales, *, axis: int = -1, global_scale=None, dtype=jnp.float32):
    """``data * scales`` (each scale repeated over its block along ``axis``) ``* global_scale``, as
    ``dtype``: the value a block-scaled GEMM multiplies."""
    data, scales = jnp.asarray(data), jnp.asarray(scales)
    if not -data.ndim <= axis < data.ndim:
        raise ValueError(f"jax_tmem.dequantize: axis={axis} is out of range for data of shape {tuple(data.shape)}")
    axis = axis % data.ndim
    if scales.ndim != data.ndim or data.shape[axis] % max(scales.shape[axis], 1) or any(
            s != d for i, (s, d) in enumerate(zip(scales.shape, data.shape)) if i != axis):
        raise ValueError(f"jax_tmem.dequantize: scales {scales.shape} do not match data {data.shape} "
                         f"blocked along axis {axis}")
    block = data.shape[axis] // scales.shape[axis]
    s = jnp.repeat(scales.astype(jnp.float32), block, axis=axis)
    y = data.astype(jnp.float32) * s
    if global_scale is not None:
        y = y * jnp.asarray(global_scale, jnp.float32).reshape(())
    return y.astype(dtype)


def _as_bytes(s):
    return lax.bitcast_convert_type(s, jnp.uint8) if np.dtype(s.dtype).itemsize == 1 else s


def swizzle_scales(scales):
    """Plain ``(..., rows, cols)`` scales -> the 128x4 blocked layout ``(..., ceil(rows/128), ceil(cols/4),
    32, 16)`` (rows padded to 128 and columns to 4 with zero bytes). See the module docstring."""
    scales = jnp.asarray(scales)
    if scales.ndim < 2:
        raise ValueError(f"jax_tmem.swizzle_scales: scales must have rank >= 2 (..., rows, cols), got {scales.shape}")
    dt = scales.dtype
    b = _as_bytes(scales)
    *lead, rows, cols = b.shape
    rb, cb = -(-rows // 128), -(-cols // 4)
    b = jnp.pad(b, [(0, 0)] * len(lead) + [(0, rb * 128 - rows), (0, cb * 4 - cols)])
    b = b.reshape(*lead, rb, 4, 32, cb, 4)
    n = len(lead)
    b = jnp.transpose(b, tuple(range(n)) + (n, n + 3, n + 2, n + 1, n + 4)).reshape(*lead, rb, cb, 32, 16)
    return lax.bitcast_convert_type(b, dt) if b.dtype != dt else b


def unswizzle_scales(swizzled, rows: int, cols: int):
    """The inverse of :func:`swizzle_scales`: ``(..., rows/128, cols/4, 32, 16)`` -> ``(..., rows, cols)``."""
    swizzled = jnp.asarray(swizzled)
    rb, cb = -(-rows // 128), -(-cols // 4)
    if swizzled.ndim < 4 or swizzled.shape[-4:] != (rb, cb, 32, 16):
        raise ValueError(f"jax_tmem.unswizzle_scales: expected shape (..., {rb}, {cb}, 32, 16) for {rows} x {cols} "
                         f"scales, got {swizzled.shape}")
    dt = swizzled.dtype
    b = _as_bytes(swizzled)
    lead = b.shape[:-4]
    n = len(lead)
    b = b.reshape(*lead, rb, cb, 32, 4, 4)
    b = jnp.transpose(b, tuple(range(n)) + (n, n + 3, n + 2, n + 1, n + 4)).reshape(*lead, rb * 128, cb * 4)
    b = b[..., :rows, :cols]
    return lax.bitcast_convert_type(b, dt) if b.dtype != dt else b


__all__ = ["FORMATS", "Format", "quantize", "dequantize", "swizzle_scales", "unswizzle_scales"]

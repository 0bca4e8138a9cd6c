"""Block-scaled formats (jax_tmem/ops/block_scale.py, ops/scaled_gemm.py): quantization bit-identical to
JAX's quantizer, the 128x4 scale layout against its documented formula (padding included), round
trips, and scaled_matmul against a float64 product of the dequantized operands, with the errors a
user gets for bad input. Reference semantics; they run on every backend."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_tmem
from jax_tmem.ops import block_scale

from conftest import seed_of

FMTS = ["mxfp8", "mxfp8_e5m2", "mxfp4", "nvfp4"]


def _rand(seed, shape, dtype=jnp.bfloat16, scale=1.0):
    rng = np.random.default_rng(seed)
    # a spread of magnitudes per block, so scales differ from block to block
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape[:-1] + (1,))) * scale
    return jnp.asarray(x.astype(np.float32)).astype(dtype)


def _bytes(a):
    # (numpy holds one 4-bit float per byte, so a view; XLA cannot bitcast a packed 4-bit array to bytes)
    return np.asarray(a).view(np.uint8) if np.dtype(a.dtype).itemsize == 1 else np.asarray(a)


def _jax_quantizer():
    try:
        from jax._src.cudnn import scaled_matmul_stablehlo as sms
    except ImportError:  # pragma: no cover
        pytest.skip("this jax has no scaled_matmul_stablehlo.quantize")
    return sms


@pytest.mark.parametrize("in_dtype", [jnp.bfloat16, jnp.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("mode,global_scale", [("mxfp8", None), ("nvfp4", None), ("nvfp4", 0.37)])
def test_quantize_is_bit_identical_to_jax(mode, global_scale, in_dtype):
    sms = _jax_quantizer()
    x = _rand(seed_of("q", mode, global_scale, str(in_dtype)), (3, 40, 256), in_dtype)
    gs = None if global_scale is None else jnp.asarray([global_scale], jnp.float32)
    cfg = jax.nn.get_scaled_dot_general_config(mode, global_scale=gs)
    # Both inside jit, as models run them: JAX's quantizer executed op by op divides amax by the format's
    # max, while XLA compiles that division into a multiplication by the reciprocal rounded to x's type
    # (GPU; ~0.6 % of bf16 blocks get another scale). jax_tmem matches the compiled quantizer. The global
    # scale is an argument (traced), as a model's is: a constant one XLA may fold into a multiplication by
    # its reciprocal (GPU), which the kernel does not copy (jax_tmem.quantize's docstring).
    q_jax = lambda v, g: sms.quantize(v, jax.nn.get_scaled_dot_general_config(mode, global_scale=g))
    want_q, want_s = jax.jit(q_jax)(x, gs)
    got_q, got_s = jax.jit(lambda v, g: jax_tmem.quantize(v, mode, global_scale=g))(x, gs)
    assert got_q.dtype == want_q.dtype and got_s.dtype == want_s.dtype
    assert got_q.shape == x.shape and got_s.shape == want_s.shape == (3, 40, 256 // cfg.block_size)
    np.testing.assert_array_equal(np.asarray(got_q.astype(jnp.float32)), np.asarray(want_q.astype(jnp.float32)))
    np.testing.assert_array_equal(_bytes(got_s), _bytes(want_s))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_all_zero_blocks_are_zeros(fmt, dtype, jit):
    """Blocks of zeros (dead ReLU units, padding, masked tokens) quantize to zero data, never NaN, on every path,
    eager and jitted, and the other blocks as usual. An MX block of zeros gets scale byte 0, read as the smallest
    positive value (2^-127 in float32), which XLA:CPU flushes to zero: x / scale was 0 / 0 = NaN there, and the
    mxfp8 recipe's gradients NaN (found 2026-11-28)."""
    # (float16 rows scaled up: blocks of max |x| below ~2^-9 x the format's max get a scale that float16 cannot
    # hold, where JAX's quantizer, and so this one, divides by 2^-15 but stores the byte of 2^-127)
    x = _rand(seed_of("zero-blocks", fmt, str(dtype)), (4, 128), dtype, scale=64.0 if dtype == jnp.float16 else 1.0)
    x = x.at[:, 32:64].set(0).at[2].set(0)
    f = lambda v: jax_tmem.quantize(v, fmt, path=path)
    paths = ["xla"] + (["kernel"] if jax.default_backend() == "gpu" else [])
    for path in paths:
        data, scales = (jax.jit(f) if jit else f)(x)
        d = np.asarray(data.astype(jnp.float32))
        assert not np.isnan(d).any(), (path, d)
        assert (d[:, 32:64] == 0).all() and (d[2] == 0).all(), path
        back = np.asarray(block_scale.dequantize(data, scales), np.float64)
        xf = np.asarray(x.astype(jnp.float32), np.float64)
        tol = {"mxfp8": 0.07, "mxfp8_e5m2": 0.13}.get(fmt, 0.26)  # half a step of the format, of the block's max
        assert (np.abs(back - xf) <= tol * np.abs(xf).max(axis=-1, keepdims=True)).all(), path


@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_any_axis_and_round_trip(fmt):
    f = block_scale.FORMATS[fmt]
    x = _rand(seed_of("axis", fmt), (64, 6, 96), jnp.float32)
    q0, s0 = jax_tmem.quantize(x, fmt, axis=0)
    assert q0.shape == x.shape and s0.shape == (64 // f.block, 6, 96)
    q2, s2 = jax_tmem.quantize(jnp.moveaxis(x, 0, -1), fmt)
    np.testing.assert_array_equal(_bytes(jnp.moveaxis(s2, -1, 0)), _bytes(s0))
    # dequantized values are within the data type's relative step of x (MX scales never clip; NVFP4
    # scales round to e4m3, so allow one more step)
    y = jax_tmem.dequantize(q0, s0, axis=0)
    eps = float(ml_dtypes.finfo(f.data).eps)
    blocks = np.abs(np.asarray(x)).reshape(64 // f.block, f.block, 6, 96).max(axis=1)
    err = np.abs(np.asarray(y) - np.asarray(x)).reshape(64 // f.block, f.block, 6, 96).max(axis=1)
    assert (err <= (2 if f.global_scale else 1) * eps * blocks + 1e-30).all()
    # MX: the dequantized values survive a second quantization exactly (power-of-two scales can only
    # shrink, which scales the data up by powers of two); NVFP4's e4m3 scales need not
    if not f.global_scale:
        q3, s3 = jax_tmem.quantize(y, fmt, axis=0)
        np.testing.assert_array_equal(np.asarray(jax_tmem.dequantize(q3, s3, axis=0)), np.asarray(y))


def _formula(r, c, cols):
    ncb = -(-cols // 4)
    return ((r // 128) * ncb + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


@pytest.mark.parametrize("rows,cols,lead", [(128, 8, ()), (200, 7, ()), (1, 1, ()), (300, 12, (2,)), (257, 5, (2, 3))])
def test_swizzle_layout_is_the_documented_formula(rows, cols, lead):
    rng = np.random.default_rng(seed_of("sw", rows, cols, lead))
    plain = rng.integers(1, 255, lead + (rows, cols)).astype(np.uint8)
    s = jax.lax.bitcast_convert_type(jnp.asarray(plain), jnp.float8_e8m0fnu)
    sw = jax_tmem.swizzle_scales(s)
    rb, cb = -(-rows // 128), -(-cols // 4)
    assert sw.shape == lead + (rb, cb, 32, 16) and sw.dtype == s.dtype
    flat = _bytes(sw).reshape(lead + (-1,))
    expect = np.zeros(lead + (rb * cb * 512,), np.uint8)  # padding: zero bytes
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    expect[..., _formula(r, c, cols)] = plain
    np.testing.assert_array_equal(flat, expect)
    back = jax_tmem.unswizzle_scales(sw, rows, cols)
    np.testing.assert_array_equal(_bytes(back), plain)


def _nan_padded(plain):
    """Plain scales -> the 128x4 tiles with 0xFF (NaN) bytes as padding instead of swizzle_scales' zeros."""
    ones = jax.lax.bitcast_convert_type(jnp.ones(plain.shape, jnp.uint8), plain.dtype)
    valid = jax.lax.bitcast_convert_type(jax_tmem.swizzle_scales(ones), jnp.uint8) != 0
    b = jax.lax.bitcast_convert_type(jax_tmem.swizzle_scales(plain), jnp.uint8)
    return jax.lax.bitcast_convert_type(jnp.where(valid, b, jnp.uint8(0xFF)), plain.dtype)


def test_swizzle_matches_nvmath_examples():
    """NVFP4 M = K = 128 (8 scale columns): (row 5, K-group 2) -> byte 82, (row 5, K-group 5) -> 593."""
    plain = np.zeros((128, 8), np.uint8)
    plain[5, 2], plain[5, 5] = 11, 22
    flat = _bytes(jax_tmem.swizzle_scales(jax.lax.bitcast_convert_type(jnp.asarray(plain), jnp.float8_e4m3fn)))
    assert flat.reshape(-1)[82] == 11 and flat.reshape(-1)[593] == 22


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("b,m,n,k", [(1, 128, 128, 128), (2, 200, 136, 256), (1, 1, 33, 64), (3, 17, 260, 96)])
def test_scaled_matmul_matches_dequantized_float64(fmt, b, m, n, k):
    f = block_scale.FORMATS[fmt]
    if k % f.block:
        pytest.skip("K not a multiple of the block")
    s = seed_of("smm", fmt, b, m, n, k)
    x, w = _rand(s, (b, m, k)), _rand(s + 1, (b, n, k))
    gx, gw = (jnp.float32(0.5), jnp.float32(3.0)) if f.global_scale else (None, None)
    xq, xs = jax_tmem.quantize(x, fmt, global_scale=gx)
    wq, ws = jax_tmem.quantize(w, fmt, global_scale=gw)
    jax_tmem.clear_decisions()
    fn = jax.jit(lambda *a: jax_tmem.scaled_matmul(*a, lhs_global_scale=gx, rhs_global_scale=gw))
    out = np.asarray(fn(xq, wq, xs, ws), np.float64)
    d = jax_tmem.decisions()[-1]
    from jax_tmem.ops import scaled_gemm
    from jax_tmem._core import arch as _arch
    where, why = scaled_gemm.kernel_target(f, f)  # "auto" runs XLA (faster than our kernel today), saying why
    if where.startswith("cuda sm_10"):  # Blackwell: the (never run) kernel only when trusted
        assert d.path == ("kernel" if _arch.sm100_trusted() else "xla"), d
    else:
        assert d.op == "scaled_matmul" and d.path == "xla" and d.reason == (why or scaled_gemm.AUTO_PREFERS_XLA), d
    a64 = np.asarray(jax_tmem.dequantize(xq, xs, global_scale=gx), np.float64)
    b64 = np.asarray(jax_tmem.dequantize(wq, ws, global_scale=gw), np.float64)
    ref = np.einsum("bmk,bnk->bmn", a64, b64)
    assert out.shape == (b, m, n)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max() + 1e-30  # f32 accumulation
    # pre-swizzled scales give the same result
    out2 = np.asarray(fn(xq, wq, jax_tmem.swizzle_scales(xs), jax_tmem.swizzle_scales(ws)), np.float64)
    np.testing.assert_array_equal(out, out2)
    # and against the unquantized product, the format's error level
    true = np.einsum("bmk,bnk->bmn", np.asarray(x, np.float64), np.asarray(w, np.float64))
    bound = {"mxfp8": 0.1, "mxfp8_e5m2": 0.2, "mxfp4": 0.4, "nvfp4": 0.4}[fmt]
    assert np.abs(out - true).max() <= bound * np.abs(true).max()


def test_bad_input_raises_with_the_fix():
    x = _rand(1, (1, 16, 48), jnp.float32)
    with pytest.raises(ValueError, match=r"x.shape\[2\] = 48 is not a multiple of mxfp8's block size 32"):
        jax_tmem.quantize(x, "mxfp8")
    with pytest.raises(ValueError, match="fmt='fp8' is not a block-scaled format"):
        jax_tmem.quantize(x, "fp8")
    with pytest.raises(ValueError, match="global_scale is for nvfp4 only"):
        jax_tmem.quantize(x[..., :32], "mxfp4", global_scale=2.0)
    with pytest.raises(TypeError, match="floating point"):
        jax_tmem.quantize(jnp.ones((4, 32), jnp.int32), "mxfp8")
    xq, xs = jax_tmem.quantize(_rand(2, (1, 16, 64)), "mxfp8")
    wq, ws = jax_tmem.quantize(_rand(3, (1, 8, 64)), "mxfp8")
    with pytest.raises(ValueError, match=r"rhs_scales has shape \(1, 8, 3\)"):
        jax_tmem.scaled_matmul(xq, wq, xs, jnp.concatenate([ws, ws[..., :1]], axis=-1))
    with pytest.raises(ValueError, match=r"lhs_scales has shape \(1, 15, 2\)"):
        jax_tmem.scaled_matmul(xq, wq, xs[:, :15], ws)
    with pytest.raises(ValueError, match="float8_e4m3fn data with float8_e4m3fn scales and block 32 is not"):
        jax_tmem.scaled_matmul(xq, wq, xs.astype(jnp.float32).astype(jnp.float8_e4m3fn), ws)
    with pytest.raises(ValueError, match="must agree on B and on K"):
        jax_tmem.scaled_matmul(xq, wq[..., :32], xs, ws[..., :1])
    with pytest.raises(ValueError, match="lhs_global_scale is for nvfp4 operands"):
        jax_tmem.scaled_matmul(xq, wq, xs, ws, lhs_global_scale=2.0)
    with pytest.raises(TypeError, match="preferred_element_type=int32"):
        jax_tmem.scaled_matmul(xq, wq, xs, ws, jnp.int32)


# ---- the kernel path: the GEMM custom call with the block scales as operand roles (sfa, sfb) ----------

def _require_kernel_path(fa, fb):
    from jax_tmem.ops import block_scale, scaled_gemm
    where, why = scaled_gemm.kernel_target(block_scale.get_format(fa), block_scale.get_format(fb))
    if not where:
        pytest.skip(f"no block-scaled kernel path here: {why}")
    return where


def _spread(x, seed):
    """x with every 32-block along K multiplied by its own power of two in [2^-6, 2^6]: the block scales
    of its quantization then differ from block to block (and row to row), as real activations' do."""
    k = x.shape[-1]
    e = np.random.default_rng(seed).integers(-6, 7, size=x.shape[:-1] + (k // 32, 1))
    return x * jnp.asarray(np.repeat(np.exp2(e), 32, axis=-1).reshape(x.shape), x.dtype)


KERNEL_SHAPES = [(1, 128, 128, 128), (2, 200, 136, 256), (1, 1, 33, 64), (3, 17, 260, 96)]
# On a GPU also a shape with >= 132 128x128 tiles (the wide tile's configuration) and K tails of every kind;
# on sm_100a/sm_103a the first and last take the CTA-pair kernel (block_scaled_pair: >= SMs / 2 tiles of
# 256x128), the last with a pair whose second CTA's rows lie wholly past M (no scale row block there).
GPU_KERNEL_SHAPES = [(1, 2048, 1200, 544), (1, 300, 4100, 4128), (2, 129, 65, 4064), (1, 2056, 1160, 288)]


@pytest.mark.parametrize("fmt_a,fmt_b", [("mxfp8", "mxfp8"), ("mxfp8_e5m2", "mxfp8"), ("mxfp8", "mxfp8_e5m2"),
                                         ("mxfp8_e5m2", "mxfp8_e5m2"), ("mxfp4", "mxfp4"), ("nvfp4", "nvfp4")])
@pytest.mark.parametrize("b,m,n,k", KERNEL_SHAPES + [pytest.param(*s, marks=pytest.mark.gpu) for s in GPU_KERNEL_SHAPES])
@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_scaled_matmul_kernel_path_matches_float64(fmt_a, fmt_b, b, m, n, k, out_dtype):
    """path="kernel" (the CPU reference handler; the block-scaled kernel on an sm_90a GPU for MXFP8; on
    sm_100a/sm_103a the tcgen05 kernels: kind::mxf8f6f4, kind::mxf4 for MXFP4, kind::mxf4nvf4 for NVFP4
    with its two global scales) applies every block scale (sfa/sfb roles, sf_vec 32 or 16) and agrees
    with float64 of the dequantized operands to f32 accumulation, and with the XLA path; the output
    buffer starts poisoned (NaN) and a second run is bitwise identical."""
    where = _require_kernel_path(fmt_a, fmt_b)
    s = seed_of("smm-ffi", fmt_a, fmt_b, b, m, n, k)
    nv = fmt_a == "nvfp4"
    gx, gw = (jnp.float32(0.37), jnp.float32(2.5)) if nv else (None, None)  # arbitrary f32 global scales
    xq, xs = jax_tmem.quantize(_spread(_rand(s, (b, m, k)) * 3.0, s), fmt_a, global_scale=gx)
    wq, ws = jax_tmem.quantize(_spread(_rand(s + 1, (b, n, k)) / 5.0, s + 1), fmt_b, global_scale=gw)
    g = dict(lhs_global_scale=gx, rhs_global_scale=gw) if nv else {}
    assert len(np.unique(np.asarray(xs.astype(jnp.float32)))) >= min(3, xs.size)  # the scales really vary
    jax_tmem.clear_decisions()

    def poisoned(poison, *a):  # the donated NaN buffer is the one XLA hands the call as its output
        del poison
        return jax_tmem.scaled_matmul(*a, out_dtype, path="kernel", **g)
    f = jax.jit(poisoned, donate_argnums=0)
    run = lambda: np.asarray(f(jnp.full((b, m, n), jnp.nan, out_dtype), xq, wq, xs, ws).astype(jnp.float32), np.float64)
    out = run()
    d = jax_tmem.decisions()[-1]
    assert d.op == "scaled_matmul" and d.path == "kernel" and "sfa/sfb" in d.target, d
    assert d.target.startswith(where), d
    a64 = np.asarray(jax_tmem.dequantize(xq, xs, global_scale=gx), np.float64)
    b64 = np.asarray(jax_tmem.dequantize(wq, ws, global_scale=gw), np.float64)
    ref = a64 @ b64.transpose(0, 2, 1)
    # f32: accumulation error only, relative to the products' magnitudes (sum_k |a||b|) per output; the
    # GPU's fp8 wgmma sums each 32-K block on the tensor cores before the f32 promotion.
    mag = np.abs(a64) @ np.abs(b64).transpose(0, 2, 1)
    # Hopper's fp8 wgmma sums a 32-product block with ~2^-14 relative precision before our f32 promotion
    # (the DeepSeek-V3 report; measured 2026-11-23 on the H200: up to ~6e-5 of the block's magnitude).
    tol = (1e-6 if where.startswith("cpu") else 2e-4) if out_dtype == jnp.float32 else 8e-3
    assert out.shape == (b, m, n) and np.isfinite(out).all()
    err = np.abs(out - ref) / np.maximum(mag, 1e-30) if out_dtype == jnp.float32 else np.abs(out - ref) / np.abs(ref).max()
    assert err.max() <= tol, f"max error {err.max():.3g} > {tol}"
    np.testing.assert_array_equal(run(), out)  # a moving result is a race
    xla = np.asarray(jax_tmem.scaled_matmul(xq, wq, xs, ws, out_dtype, path="xla", **g), np.float64)
    if out_dtype == jnp.float32:
        assert (np.abs(out - xla) / np.maximum(mag, 1e-30)).max() <= 2 * tol
    else:
        assert np.abs(out - xla).max() <= 2 * tol * np.abs(ref).max()
    # pre-swizzled scales (one or both) go to the call in the 128x4 layout: the same result, bit for bit, also
    # when their padding holds NaN bytes (padding rows feed only outputs that are not stored; where K / block is
    # not a multiple of 4 the padding columns are what the sm_100a 4-bit MMAs read past K: re-swizzled)
    for sx, sw in ((jax_tmem.swizzle_scales(xs), jax_tmem.swizzle_scales(ws)), (xs, jax_tmem.swizzle_scales(ws)),
                   (_nan_padded(xs), _nan_padded(ws))):
        jax_tmem.clear_decisions()
        out_sw = np.asarray(jax_tmem.scaled_matmul(xq, wq, sx, sw, out_dtype, path="kernel", **g), np.float64)
        np.testing.assert_array_equal(out_sw, out)
    # the scales really were applied: doubling one block's scale changes that block's contribution
    xs2 = xs.at[0, 0, 0].set(jnp.asarray(2.0 * np.asarray(xs[0, 0, 0], np.float32), xs.dtype))
    out2 = np.asarray(jax_tmem.scaled_matmul(xq, wq, xs2, ws, out_dtype, path="kernel", **g), np.float64)
    assert not np.allclose(out2[0, 0], out[0, 0]) and np.array_equal(out2[:, 1:], out[:, 1:])


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="calls the CPU handler")
def test_block_scale_roles_are_validated_by_the_handler():
    """The handler checks the sfa/sfb roles from operands.def: both present, UE8M0 (UE4M3 for sf_vec 16),
    (batch, rows, K/32) elements, K a multiple of 32, 8-bit float operands or float4_e2m1fn on both, the
    global scale with 4-bit operands only; an error, never a crash."""
    from jax_tmem._core import ext as _ext
    from jax_tmem.ops import scaled_gemm
    assert _ext.ensure_registered("cpu")[0]
    xq, xs = jax_tmem.quantize(_rand(5, (1, 16, 64)), "mxfp8")
    wq, ws = jax_tmem.quantize(_rand(6, (1, 8, 64)), "mxfp8")
    run = lambda *a, block=32, layout=0: jax.block_until_ready(
        scaled_gemm.scaled_matmul_ffi(*a, np.dtype("float32"), block, layout))
    with pytest.raises(RuntimeError, match="sfa has 16 elements, expected 32"):
        run(xq, wq, xs[..., :1], ws)
    with pytest.raises(RuntimeError, match="sfb must be float8_e8m0fnu, got float8_e4m3fn"):
        run(xq, wq, xs, ws.astype(jnp.float32).astype(jnp.float8_e4m3fn))
    with pytest.raises(RuntimeError, match=r"sf_vec 16 \(NVFP4 scales\) takes float4_e2m1fn operands"):
        run(xq, wq, xs, ws, block=16)
    with pytest.raises(RuntimeError, match=r"sfa has 32 elements, expected 512"):  # plain scales, layout 1
        run(xq, wq, xs, ws, layout=1)
    with pytest.raises(RuntimeError, match="sf_layout must be 0 .* or 1"):
        run(xq, wq, xs, ws, layout=2)
    with pytest.raises(RuntimeError, match="block scales on both operands take 8-bit floats"):
        run(xq.astype(jnp.bfloat16), wq, xs, ws)
    aq, as_ = jax_tmem.quantize(_rand(7, (1, 16, 64)), "mxfp4")
    with pytest.raises(RuntimeError, match=r"float8_e4m3fn x float4_e2m1fn \(float4_e2m1fn: block-scaled b of a "
                                           "bfloat16 a, or block-scaled on both operands"):
        run(xq, aq[:, :8], xs, as_[:, :8])  # e4m3 x e2m1: mixed widths
    with pytest.raises(ValueError, match='path="kernel": the 4-bit block-scaled GEMM multiplies mxfp4 or nvfp4 by '
                                         'the same format, not mxfp8 x mxfp4'):
        jax_tmem.scaled_matmul(xq, aq[:, :8], xs, as_[:, :8], path="kernel")
    out = run(xq, wq, xs, ws)  # and the process is fine afterwards
    assert np.isfinite(np.asarray(out)).all()


def _block_scaled_menu():
    """The sm_90a block-scaled kernel's configurations (cpp/include/jax_tmem/sm90_block_scaled_configs.def)."""
    try:
        from jax_tmem import isa
        return isa.block_scaled_menu("sm_90a")
    except RuntimeError:  # no extension: nothing to run anyway
        return []


SM90_BLOCK_SCALED_CONFIGS = [e["config"] for e in _block_scaled_menu()]


@pytest.mark.gpu
@pytest.mark.parametrize("config", SM90_BLOCK_SCALED_CONFIGS)
@pytest.mark.parametrize("b,m,n,k,layout", [(1, 1000, 776, 1024, 0), (2, 257, 130, 4000, 1), (1, 4096, 4096, 512, 0)])
def test_every_sm90_block_scaled_config(config, b, m, n, k, layout):
    """Each sm_90a block-scaled configuration, forced, against float64 of the dequantized operands, with
    tails, both scale layouts, a NaN-poisoned output and a bitwise-equal second run (a moving result is
    a race; the turn-taking configuration adds named-barrier handshakes between the warpgroups, the
    pipelined one two temporaries in flight per warpgroup)."""
    from jax_tmem.ops import scaled_gemm
    if not _require_kernel_path("mxfp8", "mxfp8").startswith("cuda sm_90a"):
        pytest.skip("the sm_90a block-scaled configurations")
    s = seed_of("sm90-bs-config", config, b, m, n, k, layout)
    xq, xs = jax_tmem.quantize(_spread(_rand(s, (b, m, k)), s), "mxfp8")
    wq, ws = jax_tmem.quantize(_spread(_rand(s + 1, (b, n, k)), s + 1), "mxfp8_e5m2")
    if layout:
        xs, ws = jax_tmem.swizzle_scales(xs), jax_tmem.swizzle_scales(ws)

    def poisoned(poison, *a):
        del poison
        return scaled_gemm.scaled_matmul_ffi(*a, np.dtype("float32"), 32, layout=layout, config=config)
    f = jax.jit(poisoned, donate_argnums=0)
    run = lambda: np.asarray(f(jnp.full((b, m, n), jnp.nan, jnp.float32), xq, wq, xs, ws), np.float64)
    out = run()
    sx = jax_tmem.unswizzle_scales(xs, m, k // 32) if layout else xs
    sw = jax_tmem.unswizzle_scales(ws, n, k // 32) if layout else ws
    a64 = np.asarray(jax_tmem.dequantize(xq, sx), np.float64)
    b64 = np.asarray(jax_tmem.dequantize(wq, sw), np.float64)
    ref = a64 @ b64.transpose(0, 2, 1)
    mag = np.abs(a64) @ np.abs(b64).transpose(0, 2, 1)
    err = np.abs(out - ref) / np.maximum(mag, 1e-30)
    assert np.isfinite(out).all() and err.max() <= 2e-4, f"config {config}: max error {err.max():.3g}"
    np.testing.assert_array_equal(run(), out)


def test_quantize_dequantize_call_and_its_formats():
    """The quantize-dequantize as a partitionable call (its XLA local code here): bf16 dequantize(quantize(x))
    for MXFP8; None for the formats the fused kernel does not dequantize and for a K that is not whole blocks."""
    s = seed_of("qdq-xla")
    x = _spread(_rand(s, (2, 40, 128)), s)
    got = jax.jit(lambda v: block_scale.quantize_dequantize(v, "mxfp8_e5m2", impl="xla"))(x)
    q, sc = jax_tmem.quantize(x, "mxfp8_e5m2", path="xla")
    assert got.dtype == jnp.bfloat16 and got.shape == x.shape
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(jax_tmem.dequantize(q, sc, dtype=jnp.bfloat16), np.float32))
    assert block_scale.quantize_dequantize(x, "nvfp4", impl="xla") is None
    assert block_scale.quantize_dequantize(x[..., :100], "mxfp8", impl="xla") is None


def test_scaled_dot_general_quantize_dequantize_wiring(monkeypatch):
    """scaled_dot_general's fused quantize-dequantize path on any machine: with the call's XLA local code
    standing in for the CUDA kernel, MXFP8 operands take it (logged), the product equals the two-step one
    (quantize, then scaled_matmul's XLA path), and a format it does not dequantize keeps the two steps."""
    from jax_tmem.ops import scaled_dot, scaled_gemm
    real = block_scale.quantize_dequantize
    monkeypatch.setattr(block_scale, "quantize_dequantize", lambda x, fmt, impl="ffi": real(x, fmt, impl="xla"))
    s = seed_of("sdg-qdq-wiring")
    x, w = _rand(s, (2, 40, 128)), _rand(s + 1, (2, 24, 128))
    dn = (((2,), (2,)), ((0,), (0,)))
    # (per_tensor: the training recipes' calls; MXFP8 has no global scale, so it changes nothing there)
    for fmt, per_tensor, fused in (("mxfp8", False, True), ("mxfp8_e5m2", False, True), ("mxfp4", False, False),
                                   ("mxfp8", True, True)):
        jax_tmem.clear_decisions()
        y = jax.jit(lambda a, b: scaled_dot.scaled_dot_general(a, b, dn, jnp.float32, [fmt] * 3,
                                                               per_tensor=per_tensor))(x, w)
        d = [d for d in jax_tmem.decisions() if d.op == "scaled_matmul"][-1]
        assert d.path == "xla" and ("fused quantize-dequantize" in d.target) == fused, d
        (xq, xs), (wq, ws) = jax_tmem.quantize(x, fmt, path="xla"), jax_tmem.quantize(w, fmt, path="xla")
        ref = jax.jit(lambda *a: scaled_gemm.scaled_matmul(*a, jnp.float32, path="xla"))(xq, wq, xs, ws)
        np.testing.assert_allclose(np.asarray(y), np.asarray(ref), rtol=0, atol=1e-5 * float(jnp.abs(ref).max()))


def test_scaled_dot_general_on_path_xla_runs_no_jax_tmem_kernel(monkeypatch):
    """path "xla" (argument or use_path) quantizes with XLA's quantizer too: before 2026-11-28 the fused quantize
    kernel still ran there (a custom call in a program meant to hold none, e.g. for jax.export). As if the fused
    kernel were available (its XLA local code standing in), "auto" takes it and "xla" does not."""
    real = block_scale.quantize_dequantize
    monkeypatch.setattr(block_scale, "quantize_dequantize", lambda x, fmt, impl="ffi": real(x, fmt, impl="xla"))
    monkeypatch.setattr(block_scale, "_quantize_kernel_target", lambda f, x: "")
    s = seed_of("sdg-xla-path")
    x, w = _rand(s, (40, 128)), _rand(s + 1, (24, 128))
    dn = (((1,), (1,)), ((), ()))
    for path, fused in (("auto", True), ("xla", False)):
        jax_tmem.clear_decisions()
        jax.jit(lambda a, b: jax_tmem.scaled_dot_general(a, b, dn, jnp.float32, configs=["mxfp8"] * 3, path=path))(x, w)
        ds = jax_tmem.decisions()
        assert any("fused quantize-dequantize" in d.target for d in ds) == fused, ds
        if not fused:
            assert all(d.path == "xla" for d in ds), ds


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp8_e5m2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_quantize_dequantize_kernel_is_the_two_steps(fmt, dtype):
    """The fused kernel's quantize-dequantize (block_scale.quantize_dequantize: the bf16 operands of the
    MXFP8 product on sm_90a) equals dequantize(quantize(x)) to bf16, value for value: blocks with their own
    scales, an all-zero block, a NaN, an infinity, tiny and huge blocks, 37 rows and a batch."""
    f = block_scale.get_format(fmt)
    why = block_scale._quantize_kernel_target(f, jnp.zeros((1, 32), dtype))
    if why:
        pytest.skip(why)
    s = seed_of("qdq", fmt, dtype)
    x = _spread(_rand(s, (3, 37, 256), jnp.float32), s)
    x = x.at[0, 0, :32].set(0.0).at[0, 1, 5].set(jnp.nan).at[0, 2, 40].set(jnp.inf)
    x = x.at[1, 3, 64:96].multiply(2.0 ** -60 if dtype == "float32" else 2.0 ** -12)
    x = x.at[2, 4, 96:128].multiply(2.0 ** 100 if dtype == "float32" else 2.0 ** 6).astype(dtype)
    got = jax.jit(lambda v: block_scale.quantize_dequantize(v, fmt))(x)
    assert got is not None and got.shape == x.shape and got.dtype == jnp.bfloat16
    q, sc = jax.jit(lambda v: jax_tmem.quantize(v, fmt, path="xla"))(x)
    want = jax.jit(lambda a, b: jax_tmem.dequantize(a, b, dtype=jnp.bfloat16))(q, sc)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.gpu
def test_scaled_dot_general_fuses_the_quantize_dequantize():
    """Where scaled_matmul runs XLA's exact bf16 dequantize + dot (sm_90a), scaled_dot_general of MXFP8 takes
    the fused quantize-dequantize (logged) and gives the two-step product."""
    from jax_tmem.ops import scaled_gemm
    x, w = _rand(seed_of("sdg-qdq"), (2, 200, 256)), _rand(seed_of("sdg-qdq") + 1, (2, 136, 256))
    dn = (((2,), (2,)), ((0,), (0,)))
    jax_tmem.clear_decisions()
    y = jax.jit(lambda a, b: jax_tmem.scaled_dot_general(a, b, dn, jnp.float32, configs=["mxfp8"] * 3))(x, w)
    d = [d for d in jax_tmem.decisions() if d.op == "scaled_matmul"][-1]
    if d.path == "kernel":
        pytest.skip(f"the block-scaled kernel takes it here: {d}")
    assert "fused quantize-dequantize" in d.target, d
    (xq, xs), (wq, ws) = jax_tmem.quantize(x, "mxfp8"), jax_tmem.quantize(w, "mxfp8")
    ref = jax.jit(lambda *a: scaled_gemm.scaled_matmul(*a, jnp.float32, path="xla"))(xq, wq, xs, ws)
    np.testing.assert_allclose(np.asarray(y), np.asarray(ref), rtol=0, atol=1e-5 * float(jnp.abs(ref).max()))


# ---- the fused quantize kernel (kernels/mx_quantize.cuh) ---------------------------------------------


def _assert_kernel_is_xla(q):
    """q(path) -> (data, scales): the fused kernel's outputs equal the XLA path's bit for bit (shapes and
    dtypes too)."""
    want, got = q("xla"), q("kernel")
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(_bytes(g), _bytes(w))


def test_quantize_paths_are_logged_and_checked():
    """quantize records where it ran and why; path="kernel" without the CUDA kernel is a clear error."""
    from jax_tmem.ops import block_scale as bs
    x = _rand(3, (4, 64))
    jax_tmem.clear_decisions()
    jax_tmem.quantize(x, "mxfp8")
    d = [d for d in jax_tmem.decisions() if d.op == "quantize"][-1]
    why = bs._quantize_kernel_target(bs.FORMATS["mxfp8"], x)
    assert (d.path, d.reason) == (("xla", why) if why else ("kernel", 'path "auto"'))
    with pytest.raises(ValueError, match="path='bogus' is not supported"):
        jax_tmem.quantize(x, "mxfp8", path="bogus")
    with pytest.raises(ValueError, match='path="kernel": the fused quantize kernel reads bfloat16, float16 or float32, '
                                         'not float8_e4m3fn'):
        jax_tmem.quantize(x.astype(jnp.float8_e4m3fn), "nvfp4", path="kernel")
    if jax.default_backend() != "gpu":
        with pytest.raises(ValueError, match=r'path="kernel": no GPU'):
            jax_tmem.quantize(x, "mxfp8", path="kernel")


def test_block_scaled_calls_take_the_path_in_force():
    """scaled_matmul, scaled_dot_general, dot_general(quantize=) and quantize follow jax_tmem.use_path (and so
    $JAX_TMEM_PATH) where their ``path`` is not given, as matmul does (they ran "auto" whatever was in force
    before 2026-11-28); quantize takes "xla" from it, else "auto" (a forced "kernel" does not make it raise
    where the fused quantize kernel does not run)."""
    x = _rand(seed_of("path-in-force"), (1, 32, 64), jnp.float32)
    q, s = jax_tmem.quantize(x, "mxfp8", path="xla")
    dn = (((1,), (1,)), ((), ()))
    calls = {"scaled_matmul": lambda: jax_tmem.scaled_matmul(q, q, s, s),
             "scaled_dot_general": lambda: jax_tmem.scaled_dot_general(x[0], x[0], dn, configs=["mxfp8"] * 3),
             "dot_general(quantize=)": lambda: jax_tmem.dot_general(x[0], x[0], dn, quantize="mxfp8")}
    for name, call in calls.items():
        for path in ("xla", "kernel"):
            jax_tmem.clear_decisions()
            with jax_tmem.use_path(path):
                jax.block_until_ready(call())
            gemms = [d for d in jax_tmem.decisions() if d.op == "scaled_matmul"]
            assert gemms and all(d.path == path for d in gemms), (name, path, jax_tmem.decisions())
    jax_tmem.clear_decisions()
    with jax_tmem.use_path("xla"):
        jax_tmem.quantize(x, "mxfp8")
    assert [(d.op, d.path) for d in jax_tmem.decisions()] == [("quantize", "xla")]


def test_quantize_axis_out_of_range_is_an_error():
    x = _rand(seed_of("axis-range"), (2, 8, 64), jnp.float32)
    for axis in (-4, 3):
        with pytest.raises(ValueError, match=rf"axis={axis} is out of range for x of shape \(2, 8, 64\)"):
            jax_tmem.quantize(x, "mxfp8", axis=axis)
    data, scales = jax_tmem.quantize(x, "mxfp8", axis=-3 % 3 + 2)
    with pytest.raises(ValueError, match="axis=5 is out of range for data of shape"):
        block_scale.dequantize(data, scales, axis=5)


def test_quantized_dot_general_of_integers_is_an_error():
    """quantize= (or a quantized recipe) with operands jax_tmem does not quantize raised nothing and returned the
    exact integer dot, unquantized (found 2026-11-28)."""
    a = jnp.ones((32, 64), jnp.int32)
    dn = (((1,), (1,)), ((), ()))
    with pytest.raises(TypeError, match="quantize= quantizes bfloat16, float16 or float32 operands; got int32"):
        jax_tmem.dot_general(a, a, dn, quantize="mxfp8")
    with pytest.raises(TypeError, match="recipe 'fp8' quantizes bfloat16, float16 or float32 operands; got int32"):
        jax_tmem.dot_general(a, a, dn, recipe="fp8")


@pytest.mark.parametrize("axis", [-1, 0])
def test_quantize_swizzled_scales_are_the_moved_plain_scales_in_tiles(axis):
    """scale_layout="swizzled": scale (row r, block c) of the quantized axis moved last sits at the 128x4
    formula's offset (blackwell_tcgen05.md section 10), padding zero; for a (K, N) weight quantized along
    K (colwise) the rows are N."""
    x = _rand(seed_of("swz-q", axis), (96, 160), jnp.bfloat16)
    q, s = jax_tmem.quantize(x, "mxfp8", axis=axis % 2)
    q2, sw = jax_tmem.quantize(x, "mxfp8", axis=axis % 2, scale_layout="swizzled")
    np.testing.assert_array_equal(_bytes(q2), _bytes(q))
    plain = np.moveaxis(_bytes(s), axis % 2, -1)  # (rows, blocks)
    rows, cols = plain.shape
    flat = _bytes(sw).reshape(-1)
    cb = -(-cols // 4)
    assert flat.size == -(-rows // 128) * 128 * cb * 4
    seen = np.zeros(flat.size, bool)
    for r in range(rows):
        for c in range(cols):
            off = ((r // 128) * cb + c // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4
            assert flat[off] == plain[r, c]
            seen[off] = True
    assert (flat[~seen] == 0).all()
    with pytest.raises(ValueError, match="scale_layout='bogus'; use 'plain' or 'swizzled'"):
        jax_tmem.quantize(x, "mxfp8", scale_layout="bogus")
    with pytest.raises(ValueError, match="needs x of rank >= 2"):
        jax_tmem.quantize(x[0], "mxfp8", scale_layout="swizzled")


@pytest.mark.parametrize("in_dtype", ["bfloat16", "float16"])
def test_mx_scaled_values_need_rounding_to_the_input_type_only_for_f16_to_e5m2(in_dtype):
    """The fused kernel's rule (kernels/mx_quantize.cuh, kRoundScaled): JAX computes x / s in x's type, but
    an MX scale is a power of two, so for a bf16 / f16 x the product is exact unless it leaves the type's
    normal range, and there rounding never changes the code, except for f16 subnormals converted to e5m2
    (whose smallest tie, 2^-17, lies among them). Checked over every finite value of the type times every
    power of two a float32 holds, for each data type (clipped to +-max as the kernel's conversions do)."""
    t = np.dtype(getattr(ml_dtypes, in_dtype) if in_dtype == "bfloat16" else np.float16)
    v = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(t).astype(np.float32)
    v = v[np.isfinite(v)]
    for name, fmt in (("e2m1", ml_dtypes.float4_e2m1fn), ("e4m3", ml_dtypes.float8_e4m3fn),
                      ("e5m2", ml_dtypes.float8_e5m2)):
        mx = np.float32(ml_dtypes.finfo(fmt).max)
        differ = 0
        with np.errstate(over="ignore"):
            for e in range(-149, 128):
                y = v * np.ldexp(np.float32(1.0), e)
                r = y.astype(t).astype(np.float32)
                code = lambda z: np.clip(z, -mx, mx).astype(fmt).view(np.uint8)
                differ += int(np.count_nonzero(code(y) != code(r)))
        rounds = in_dtype == "float16" and name == "e5m2"
        assert (differ > 0) == rounds, (in_dtype, name, differ)


def _scale_rounding_witnesses(dtype, dmax):
    """The block maxima (values of `dtype`) whose UE8M0 scale differs between amax / max and XLA's compiled
    amax * (1 / max rounded to dtype): where a kernel that divides would differ from JAX on a GPU."""
    if np.dtype(dtype) == np.float32:
        return np.zeros((0,), np.float64)
    bits = np.arange(0, 0x7C00 if np.dtype(dtype) == np.float16 else 0x7F80, dtype=np.uint16)
    a = bits.view(np.dtype(dtype)).astype(np.float32)
    recip = np.float32(np.array(1.0 / dmax).astype(np.dtype(dtype)))

    def e8(q):
        b = q.astype(np.dtype(dtype)).astype(np.float32).view(np.uint32)
        ex, man = b >> 23, b & 0x7FFFFF
        return np.where((man > 0) & (ex != 0xFE) & ~((ex == 0) & (man <= 0x400000)), ex + 1, ex)
    return a[e8(a / np.float32(dmax)) != e8(a * recip)].astype(np.float64)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,gs", [("mxfp8", None), ("mxfp8_e5m2", None), ("mxfp4", None), ("nvfp4", None),
                                    ("nvfp4", 0.0173)])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32], ids=["bf16", "f16", "f32"])
@pytest.mark.parametrize("layout", ["plain", "swizzled"])
@pytest.mark.parametrize("shape,axis", [((3, 200, 4096), -1), ((1, 96), -1), ((256, 161), 0), ((2, 96, 264), 1),
                                        ((64, 40), 0), ((160, 3, 24), 0)])
def test_quantize_kernel_is_bit_identical_to_jax(fmt, gs, dtype, shape, axis, layout):
    """The fused kernel's data and scales equal JAX's quantizer (the XLA path) bit for bit, for MXFP8
    (e4m3, e5m2), MXFP4 and NVFP4 (packed e2m1; NVFP4 without and with a global scale, a traced value as
    a computed one is; XLA divides float32 with div.full.f32 and computes x / (g * s): so does the
    kernel, else ~1 code in 10^6 differs at the e2m1 ties): magnitudes spread over 2^-20..2^20 per block, an all-zero block, MX blocks whose
    maximum is where dividing by the format's max and XLA's multiplication by its rounded reciprocal
    round to different scales, tails, rowwise (last axis) and colwise (second-to-last, in place) and any
    other axis (moved last by XLA), plain scales and the 128x4 tiles (rows and K / block not multiples
    of 128 and 4: the zero padding)."""
    if block_scale._quantize_kernel_target(block_scale.FORMATS[fmt], jnp.zeros((1, 32), dtype)):
        pytest.skip("no fused quantize kernel here")
    rng = np.random.default_rng(seed_of("qk", fmt, str(np.dtype(dtype)), shape, axis))
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 21, shape))
    if np.dtype(dtype) == np.float16:
        x = np.clip(x, -6e4, 6e4)
    xm = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    xm[..., :32] = 0.0  # an all-zero block (scale byte 0)
    flat = xm.reshape(-1, 32)[1:]  # a view: blocks after the zero block
    wit = _scale_rounding_witnesses(dtype, float(ml_dtypes.finfo(block_scale.FORMATS[fmt].data).max))
    if fmt == "nvfp4":  # (UE4M3 scales: no UE8M0 rounding-up witnesses)
        wit = wit[:0]
    wit = wit[:len(flat)]
    flat[:len(wit)] = rng.uniform(-1, 1, (len(wit), 32)) * wit[:, None]
    flat[np.arange(len(wit)), rng.integers(0, 32, len(wit))] = wit * rng.choice([-1.0, 1.0], len(wit))
    x = jnp.asarray(np.moveaxis(xm, -1, axis), dtype)
    q = lambda path: jax.jit(lambda v, g: jax_tmem.quantize(v, fmt, axis=axis, path=path, scale_layout=layout,
                                                            global_scale=g))(x, None if gs is None else jnp.float32(gs))
    _assert_kernel_is_xla(q)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp8", "mxfp4"])
@pytest.mark.parametrize("where", ["kblocks", "batch"])
def test_quantize_kernel_colwise_beyond_the_grid(fmt, where):
    """The colwise kernel's grid is (column spans, blocks of rows, batch) with y and z capped at 65535:
    more blocks of rows (K / block = 65539) or more batch entries (65537) than that loop inside the kernel
    (the 4-bit column-pair kernel's prefetching grid: hundreds of blocks per thread). Bit for bit JAX's
    quantizer."""
    f = block_scale.FORMATS[fmt]
    if block_scale._quantize_kernel_target(f, jnp.zeros((1, 32), jnp.bfloat16)):
        pytest.skip("no fused quantize kernel here")
    shape = (f.block * 65539, 8) if where == "kblocks" else (65537, 32, 8)
    rng = np.random.default_rng(seed_of("qk-grid", fmt, shape))
    x = jnp.asarray(rng.standard_normal(shape, np.float32), jnp.bfloat16)
    q = lambda path: jax.jit(lambda v: jax_tmem.quantize(v, fmt, axis=-2, path=path))(x)
    _assert_kernel_is_xla(q)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("shape", [(4, 4096, 4096), (2, 2080, 776), (32 * 2048, 512)])
def test_quantize_kernel_colwise_pair_schedules(fmt, dtype, shape):
    """The 4-bit column-pair kernel's two grids (16-bit x, colwise): one block per thread (MXFP4) and, for
    NVFP4, the prefetching grid sized to the GPU, each thread taking several blocks with the next one's rows
    loaded before this one's conversion ((32 * 2048, 512): ~6 blocks per thread on a 132-SM GPU; (4, 4096,
    4096) ~2; (2, 2080, 776): a batch, and column pairs past the last whole warp). Bit for bit JAX's
    quantizer."""
    if block_scale._quantize_kernel_target(block_scale.FORMATS[fmt], jnp.zeros((1, 32), dtype)):
        pytest.skip("no fused quantize kernel here")
    rng = np.random.default_rng(seed_of("qk-pair", fmt, str(np.dtype(dtype)), shape))
    x = jnp.asarray(rng.standard_normal(shape, np.float32) * np.exp2(rng.integers(-8, 9, shape[-1])), dtype)
    g = jnp.float32(0.37) if fmt == "nvfp4" else None
    q = lambda path: jax.jit(lambda v, gg: jax_tmem.quantize(v, fmt, axis=-2, path=path, global_scale=gg))(x, g)
    _assert_kernel_is_xla(q)


@pytest.mark.gpu
@pytest.mark.parametrize("gs", [None, 0.37])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32], ids=["bf16", "f16", "f32"])
@pytest.mark.parametrize("layout", ["plain", "swizzled"])
@pytest.mark.parametrize("shape,axis", [((1, 16), -1), ((3, 7, 48), -1), ((5, 80), -1), ((2, 1, 16), -1),
                                        ((48, 16), 0), ((3, 80, 24), 1)])
def test_quantize_kernel_nvfp4_odd_block_counts(gs, dtype, layout, shape, axis):
    """The NVFP4 kernels take two 16-element blocks at a time (rowwise: per thread; colwise: 32 rows per
    CTA): an odd block count (K an odd multiple of 16) leaves the last thread (CTA) one block, whose data
    and scales it must write alone (and no byte past them): bit for bit JAX's quantizer, the outputs
    compared whole."""
    if block_scale._quantize_kernel_target(block_scale.FORMATS["nvfp4"], jnp.zeros((1, 16), dtype)):
        pytest.skip("no fused quantize kernel here")
    rng = np.random.default_rng(seed_of("qk-odd", str(gs), str(np.dtype(dtype)), shape, axis, layout))
    x = jnp.asarray(rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape)), dtype)
    q = lambda path: jax.jit(lambda v, g: jax_tmem.quantize(v, "nvfp4", axis=axis, path=path, scale_layout=layout,
                                                            global_scale=g))(x, None if gs is None else jnp.float32(gs))
    _assert_kernel_is_xla(q)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,gs", [("mxfp8", None), ("mxfp8_e5m2", None), ("mxfp4", None), ("nvfp4", None),
                                    ("nvfp4", 1e-40), ("nvfp4", 2.0 ** -130), ("nvfp4", 3e37), ("nvfp4", 1e36),
                                    ("nvfp4", -0.37)])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32], ids=["bf16", "f16", "f32"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_quantize_kernel_special_blocks_match_jax(fmt, gs, dtype, axis):
    """Blocks the kernel sends down its general path (a NaN, +-inf, an all-zero block: NVFP4's 0 / 0;
    NVFP4 global scales that put g * s outside 2^-126..2^126, where div.full.f32 rescales its operands,
    or overflow it; MXFP4 blocks of a max |x| above ~6 * 2^22, whose multiplier the column-pair kernel's
    encoder cannot fold 2^-126 into) next to ordinary ones in the same rows and columns, and a negative
    NVFP4 global scale (the column-pair kernel takes the signs from x's bits, flipped): bit for bit JAX's
    quantizer. The fast path (to_e2m1 without its NaN test, NVFP4's reciprocal taken once per block) must
    not be taken for any of the special blocks."""
    if block_scale._quantize_kernel_target(block_scale.FORMATS[fmt], jnp.zeros((1, 32), dtype)):
        pytest.skip("no fused quantize kernel here")
    rng = np.random.default_rng(seed_of("qk-special", fmt, str(gs), str(np.dtype(dtype)), axis))
    xm = rng.standard_normal((48, 256)) * np.exp2(rng.integers(-8, 9, (48, 256)))
    blocks = xm.reshape(48, 8, 32)
    blocks[0, 1, 5] = np.nan
    blocks[1, 2, 0] = np.inf
    blocks[2, 3, 31] = -np.inf
    blocks[3, 4] = 0.0
    blocks[4, 5, 7], blocks[4, 5, 9] = np.nan, -np.inf
    blocks[5, 6, ::2] = 0.0  # half zeros (a number block)
    blocks[6, 0] = rng.standard_normal(32) * 1e-30 if np.dtype(dtype) != np.float16 else 0.0
    # subnormals of x's type (the bf16x2 / f16x2 |x| and max of the amax must keep them), alone and next
    # to a normal maximum
    sub = {np.dtype(np.float16): 2e-6, np.dtype(np.float32): 1e-40}.get(np.dtype(dtype), 1e-39)
    blocks[7, 1] = rng.standard_normal(32) * sub
    blocks[8, 2] = rng.standard_normal(32) * sub
    blocks[8, 2, 3] = 1.5
    if np.dtype(dtype) != np.float16:  # (float16 holds no max |x| that large)
        blocks[9, 3] = rng.standard_normal(32) * 1e9
        blocks[10, 4] = rng.standard_normal(32) * 3e7  # around the limit
    x = jnp.asarray(xm if axis == -1 else xm.T.copy(), dtype)  # axis 0: the blocks run down the columns
    q = lambda path: jax.jit(lambda v, g: jax_tmem.quantize(v, fmt, axis=axis, path=path,
                                                            global_scale=g))(x, None if gs is None else jnp.float32(gs))
    _assert_kernel_is_xla(q)

"""The weight-only block-scaled GEMM: ``jax_tmem.scaled_matmul(x, wq, None, ws)``, a bfloat16 lhs times
MXFP4 / NVFP4 (and MXFP8) weights: the XLA path and the custom call (the CPU reference handler here; the
weight-only 4-bit kernel, kernels/w4_gemm.cuh, on a GPU) against float64 of the dequantized weights."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem.ops import block_scale, scaled_gemm

from conftest import rand, seed_of


def _operands(s, b, m, n, k, fmt, global_scale=None):
    rng = np.random.default_rng(s)
    x = jnp.asarray(rng.standard_normal((b, m, k)).astype(np.float32)).astype(jnp.bfloat16)
    # a spread of magnitudes per 32-block along K, so the weights' scales differ block to block
    w = rng.standard_normal((b, n, k)) * np.repeat(np.exp2(rng.integers(-6, 7, (b, n, k // 32))), 32, axis=-1)
    wq, ws = jax_tmem.quantize(jnp.asarray(w, jnp.float32), fmt, global_scale=global_scale)
    return x, wq, ws


def _ref64(x, wq, ws, gs=None):
    w64 = np.asarray(jax_tmem.dequantize(wq, ws), np.float64) * (1.0 if gs is None else float(gs))
    x64 = np.asarray(x.astype(jnp.float32), np.float64)
    return x64 @ w64.transpose(0, 2, 1), np.abs(x64) @ np.abs(w64).transpose(0, 2, 1)


def _kernel_where():
    where, why = scaled_gemm.kernel_target(None, block_scale.get_format("mxfp4"), jnp.bfloat16, 64)
    return where, why


SHAPES = [(1, 1, 136, 256), (1, 7, 200, 512), (2, 16, 96, 1024), (1, 33, 72, 160), (1, 64, 520, 4128),
          (1, 300, 64, 256), (3, 5, 40, 96)]


@pytest.mark.parametrize("fmt,gs", [("mxfp4", None), ("nvfp4", None), ("nvfp4", 0.37), ("mxfp8", None)])
def test_weight_only_xla_path_matches_float64(fmt, gs):
    x, wq, ws = _operands(seed_of("wo-xla", fmt, gs), 2, 9, 40, 96, fmt, gs)
    y = jax_tmem.scaled_matmul(x, wq, None, ws, jnp.float32, rhs_global_scale=gs, path="xla")
    ref, mag = _ref64(x, wq, ws, gs)
    assert y.shape == (2, 9, 40) and y.dtype == jnp.float32
    assert (np.abs(np.asarray(y, np.float64) - ref) / np.maximum(mag, 1e-30)).max() < 1e-5


@pytest.mark.parametrize("b,m,n,k", SHAPES)
@pytest.mark.parametrize("fmt,gs", [("mxfp4", None), ("nvfp4", None), ("nvfp4", 2.5)])
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_weight_only_kernel_path_matches_float64(b, m, n, k, fmt, gs, out):
    """path="kernel" (the 4-bit kernel on a GPU, the CPU reference handler here): every output within f32
    accumulation of float64 (bf16 out: its rounding), tails in M, N and K (K = 160: a 128-chunk and one
    block), batches, token tiles over the grid; the output buffer NaN-poisoned first (donated) and a
    second run bitwise equal."""
    where, why = _kernel_where()
    if not where:
        pytest.skip(why)
    if where.startswith("cpu") and m * n * k > 4_000_000:
        pytest.skip("the CPU reference handler is slow: large shapes run on a GPU")
    out_dt = np.dtype(jnp.float32 if out == "f32" else jnp.bfloat16)
    x, wq, ws = _operands(seed_of("wo-kernel", b, m, n, k, fmt, gs, out), b, m, n, k, fmt, gs)

    def poisoned(poison, x, wq, ws):
        del poison
        return scaled_gemm.scaled_matmul_ffi(x, wq, None, ws, out_dt, block_scale.get_format(fmt).block,
                                             global_scale=gs)
    f = jax.jit(poisoned, donate_argnums=0)
    run = lambda: np.asarray(f(jnp.full((b, m, n), jnp.nan, out_dt), x, wq, ws).astype(jnp.float32), np.float64)
    got = run()
    ref, mag = _ref64(x, wq, ws, gs)
    tol = 2e-5 if out == "f32" else 2e-5
    err = np.abs(got - ref) - (0 if out == "f32" else 2.0**-8 * np.abs(ref))
    assert np.isfinite(got).all()
    assert (err / np.maximum(mag, 1e-30)).max() < tol, f"max error {(err / np.maximum(mag, 1e-30)).max():.3g}"
    np.testing.assert_array_equal(run(), got)


def _check_config(tag, config, b, m, n, k, fmt, gs):
    """One configuration of the 4-bit kernel: f32 out NaN-poisoned first (donated), every output finite and
    within f32 accumulation of float64, a second run bitwise equal."""
    x, wq, ws = _operands(seed_of(tag, config, b, m, n, k, fmt, gs), b, m, n, k, fmt, gs)

    def poisoned(poison, x, wq, ws):
        del poison
        return scaled_gemm.scaled_matmul_ffi(x, wq, None, ws, np.dtype(np.float32), block_scale.get_format(fmt).block,
                                             config=config, global_scale=gs)
    f = jax.jit(poisoned, donate_argnums=0)
    run = lambda: np.asarray(f(jnp.full((b, m, n), jnp.nan, jnp.float32), x, wq, ws), np.float64)
    got = run()
    ref, mag = _ref64(x, wq, ws, gs)
    assert np.isfinite(got).all()
    err = (np.abs(got - ref) / np.maximum(mag, 1e-30)).max()
    assert err < 2e-5, f"max error {err:.3g}"
    np.testing.assert_array_equal(run(), got)


TMA_SHAPES = [(1, 1, 136, 512), (1, 7, 200, 1536), (2, 16, 96, 2048), (1, 13, 520, 4608), (1, 3, 72, 16384),
              (3, 5, 40, 512), (1, 16, 64, 2560)]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [4, 5, 6, 7, 8, 9])
@pytest.mark.parametrize("b,m,n,k", TMA_SHAPES)
@pytest.mark.parametrize("fmt,gs", [("mxfp4", None), ("nvfp4", 2.5)])
def test_weight_only_tma_kernel_matches_float64(config, b, m, n, k, fmt, gs):
    """The TMA-fed 4-bit kernel (configs 4-9, kernels/w4_tma.cuh) on a GPU: tails in N (rows past N
    zero-filled by TMA, never stored) and in K (a last stage half past K), rings that wrap several times
    (K = 16384), batches, 1-16 tokens; f32 out NaN-poisoned first, within f32 accumulation of float64, a
    second run bitwise equal."""
    where, why = _kernel_where()
    if not where.startswith("cuda") or why:
        pytest.skip(why or "the TMA-fed 4-bit kernel runs on a GPU")
    _check_config("wo-tma", config, b, m, n, k, fmt, gs)


WIDE_SHAPES = [(1, 17, 136, 512), (1, 33, 200, 1536), (2, 64, 96, 2048), (1, 64, 520, 4608), (1, 40, 72, 16384),
               (3, 24, 40, 512), (1, 100, 264, 2560), (1, 64, 128, 8192), (1, 9, 136, 1024)]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [-1, 10, 11, 12, 13, 14, 15, 16, 17, 18])
@pytest.mark.parametrize("b,m,n,k", WIDE_SHAPES)
@pytest.mark.parametrize("fmt,gs", [("mxfp4", None), ("nvfp4", 2.5)])
def test_weight_only_many_token_kernel_matches_float64(config, b, m, n, k, fmt, gs):
    """The many-token 4-bit kernels (the heuristic above 16 tokens; config 10: the arch's; 11-13: mma.sync,
    kernels/w4_wide.cuh; 14-16: wgmma, w4_wgmma.cuh, sm_90 only; 17, 18: the two in clusters of 3): K split
    over clusters of 1, 2, 3 and 4 CTAs (some with no stage of their own at K = 512), tails in N (128-row
    CTAs), K and M (16-, 32- and 64-token tiles, 100 tokens over two), batches, rings that wrap (K = 16384);
    f32 out NaN-poisoned first, within f32 accumulation of float64, a second run bitwise equal."""
    where, why = _kernel_where()
    if not where.startswith("cuda") or why:
        pytest.skip(why or "the many-token 4-bit kernel runs on a GPU")
    if config in (14, 15, 16, 18) and jax.devices()[0].compute_capability != "9.0":
        pytest.skip("the wgmma many-token kernel is sm_90 only (elsewhere config 10 takes the mma.sync one)")
    _check_config("wo-wide", config, b, m, n, k, fmt, gs)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,gs", [("mxfp4", None), ("nvfp4", 2.5)])
def test_weight_only_heuristic_splits_k_in_three_where_row_tiles_are_few(fmt, gs):
    """33-64 tokens, 22-32 row tiles of 128 (here N = 3000: 24) and K >= 3072 on an sm_90 GPU of 97-144 SMs:
    the heuristic takes the wgmma kernel in clusters of 3 (config 18), as its result shows bit for bit (the
    plain-load kernel it took before sums in another order), and is within f32 accumulation of float64."""
    where, why = _kernel_where()
    if not where.startswith("cuda") or why:
        pytest.skip(why or "the many-token 4-bit kernel runs on a GPU")
    dev = jax.devices()[0]
    if dev.compute_capability != "9.0" or not 96 < getattr(dev, "core_count", 0) <= 144:
        pytest.skip("the rule for clusters of 3 is sm_90's, for 97-144 SMs at this shape")
    b, m, n, k = 1, 40, 3000, 3072
    _check_config("wo-three", -1, b, m, n, k, fmt, gs)
    x, wq, ws = _operands(seed_of("wo-three-bits", b, m, n, k, fmt, gs), b, m, n, k, fmt, gs)
    call = jax.jit(lambda c, x, wq, ws: scaled_gemm.scaled_matmul_ffi(
        x, wq, None, ws, np.dtype(np.float32), block_scale.get_format(fmt).block, config=c, global_scale=gs),
        static_argnums=0)
    picked, three, plain = (np.asarray(call(c, x, wq, ws)) for c in (-1, 18, 2))
    np.testing.assert_array_equal(picked, three)
    assert not np.array_equal(three, plain), "config 18 and the plain-load kernel gave the same bits: no test"


@pytest.mark.gpu
def test_weight_only_tma_kernel_says_which_k_it_needs():
    """K / block not a multiple of 16 (TMA reads the scales' rows as they are): the TMA configurations
    refuse in words; the heuristic takes the plain-load kernel."""
    where, why = _kernel_where()
    if not where.startswith("cuda") or why:
        pytest.skip(why or "the TMA-fed 4-bit kernel runs on a GPU")
    x, wq, ws = _operands(5, 1, 4, 40, 160, "mxfp4")
    call = lambda c: scaled_gemm.scaled_matmul_ffi(x, wq, None, ws, np.dtype(np.float32), 32, config=c)
    for config in (6, 10, 12, 15):
        with pytest.raises(Exception, match="multiple of 16"):
            jax.block_until_ready(jax.jit(lambda: call(config))())
    ref, mag = _ref64(x, wq, ws)
    assert (np.abs(np.asarray(jax.jit(lambda: call(-1))(), np.float64) - ref) / np.maximum(mag, 1e-30)).max() < 2e-5


def test_weight_only_auto_takes_the_kernel_for_decode_and_logs_it():
    # what "auto" decides by (route: kernel_target plus the rule for Blackwell builds nobody ran there)
    where, why = scaled_gemm.route(None, block_scale.get_format("mxfp4"), jnp.bfloat16, 128)
    x, wq, ws = _operands(3, 1, 16, 64, 128, "mxfp4")
    jax_tmem.clear_decisions()
    y = jax_tmem.scaled_matmul(x, wq, None, ws, jnp.bfloat16)
    d = [d for d in jax_tmem.decisions() if d.op == "scaled_matmul"][-1]
    if where.startswith("cuda") and not why:
        assert d.path == "kernel"
    else:
        assert d.path == "xla" and d.reason
    ref, mag = _ref64(x, wq, ws)
    assert (np.abs(np.asarray(y.astype(jnp.float32), np.float64) - ref) / mag).max() < 1e-2
    x2 = jnp.zeros((1, scaled_gemm.W4_AUTO_MAX_M + 1, 128), jnp.bfloat16)
    jax_tmem.clear_decisions()
    jax_tmem.scaled_matmul(x2, wq, None, ws, jnp.bfloat16)
    assert [d for d in jax_tmem.decisions() if d.op == "scaled_matmul"][-1].path == "xla"


def test_weight_only_bad_input_raises_with_the_fix():
    x, wq, ws = _operands(4, 1, 4, 32, 64, "nvfp4")
    with pytest.raises(TypeError, match="rhs_scales must be a JAX or NumPy array, got NoneType"):
        jax_tmem.scaled_matmul(x, wq, None, None)
    with pytest.raises(TypeError, match="lhs_scales=None .weight-only. takes a bfloat16, float16 or float32 lhs"):
        jax_tmem.scaled_matmul(x.astype(jnp.float8_e4m3fn), wq, None, ws)
    with pytest.raises(ValueError, match="lhs_global_scale is for nvfp4 operands, not an unscaled lhs"):
        jax_tmem.scaled_matmul(x, wq, None, ws, lhs_global_scale=1.0)
    with pytest.raises(ValueError, match="rhs_global_scale is for nvfp4 operands, not mxfp4"):
        xq4, ws4 = jax_tmem.quantize(jnp.ones((1, 4, 64)), "mxfp4")
        jax_tmem.scaled_matmul(x, xq4, None, ws4, rhs_global_scale=1.0)
    x48, wq48, ws48 = _operands(5, 1, 4, 32, 64, "nvfp4")
    wq48, ws48 = jax_tmem.quantize(jnp.ones((1, 32, 48)), "nvfp4")
    where, _ = _kernel_where()
    if where:
        with pytest.raises(ValueError, match=r"needs K a multiple of 32 \(K = 48\)"):
            jax_tmem.scaled_matmul(x48[..., :48], wq48, None, ws48, path="kernel")
    y = jax_tmem.scaled_matmul(x48[..., :48], wq48, None, ws48, jnp.float32)  # "auto": XLA, K = 48 is fine there
    ref, mag = _ref64(x48[..., :48], wq48, ws48)
    assert (np.abs(np.asarray(y, np.float64) - ref) / mag).max() < 1e-5


def test_weight_only_roles_are_validated_by_the_handler():
    """The custom call's own checks (a consistent Python side never trips them): fp8 weights with block
    scales on b only, e4m3 scales for a block of 32; and a scale operand on an MXFP8 GEMM, which it takes."""
    if not _kernel_where()[0]:
        pytest.skip("no jax_tmem extension")
    x, wq, ws = _operands(6, 1, 8, 16, 64, "nvfp4")
    run = lambda *a, **kw: jax.block_until_ready(scaled_gemm.scaled_matmul_ffi(*a, np.dtype("float32"), **kw))
    with pytest.raises(RuntimeError, match="sfb must be float8_e8m0fnu, got float8_e4m3fn"):
        run(x, wq, None, ws.reshape(1, 16, 2, 2)[..., 0].reshape(1, 16, 2), block=32)
    with pytest.raises(RuntimeError, match="block scales on b only .no sfa. take a bfloat16 a and float4_e2m1fn b"):
        w8, s8 = jax_tmem.quantize(jnp.ones((1, 16, 64)), "mxfp8")
        run(x, w8, None, s8, block=32)
    # the scale operand multiplies any GEMM's accumulator (here MXFP8's; the fp8 training recipe's too)
    xq, xs = jax_tmem.quantize(rand(61, (1, 8, 128), jnp.float32), "mxfp8")
    w8, s8 = jax_tmem.quantize(rand(62, (1, 16, 128), jnp.float32), "mxfp8")
    np.testing.assert_array_equal(np.asarray(run(xq, w8, xs, s8, block=32, global_scale=2.0)),
                                  2 * np.asarray(run(xq, w8, xs, s8, block=32)))
    y = run(x, wq, None, ws, block=16)  # and the process is fine afterwards
    assert np.isfinite(np.asarray(y)).all()


def test_weight_only_and_quantize_under_vmap():
    """jax.vmap over the weight-only GEMM and over quantize gives the per-example results (whichever path
    runs: the custom calls batch by looping / by rows, XLA natively)."""
    x, wq, ws = _operands(7, 1, 4, 24, 64, "mxfp4")
    xs = jnp.stack([x[0], 2 * x[0], -x[0]])[:, None]  # (3, 1, 4, 64)
    f = lambda xx: jax_tmem.scaled_matmul(xx, wq, None, ws, jnp.float32)
    got = jax.vmap(f)(xs)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(got[i]), np.asarray(f(xs[i])), rtol=1e-6, atol=1e-6)
    v = jnp.asarray(np.random.default_rng(8).standard_normal((3, 5, 64)), jnp.bfloat16)
    qd, qs = jax.vmap(lambda t: jax_tmem.quantize(t, "mxfp8"))(v)
    for i in range(3):
        d1, s1 = jax_tmem.quantize(v[i], "mxfp8")
        np.testing.assert_array_equal(np.asarray(qd[i]).view(np.uint8), np.asarray(d1).view(np.uint8))
        np.testing.assert_array_equal(np.asarray(qs[i]).view(np.uint8), np.asarray(s1).view(np.uint8))

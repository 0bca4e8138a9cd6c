"""jax_tmem.scaled_dot_general (jax_tmem/ops/scaled_dot.py): on-the-fly block-scaled quantization with
jax.nn.scaled_dot_general's signature and recipe, forward and backward, against float64 references built
from the tested quantizer; JAX's own implementation where this JAX can run it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import jax_tmem

from conftest import lower_for_cuda, seed_of


def _rand(seed, shape, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))
    return jnp.asarray(x.astype(np.float32)).astype(dtype)


def _q64(x, fmt, axis):
    """float64 of x quantized along `axis` with the reference quantizer (bit-identical to JAX's)."""
    q, s = jax_tmem.quantize(x, fmt, axis=axis)
    return np.asarray(jax_tmem.dequantize(q, s, axis=axis), np.float64)


# (lhs shape, rhs shape, dimension numbers, numpy einsum of the same contraction)
CASES = [
    ((64, 96), (96, 40), (((1,), (0,)), ((), ())), "mk,kn->mn"),
    ((3, 33, 128), (3, 17, 128), (((2,), (2,)), ((0,), (0,))), "bmk,bnk->bmn"),
    ((64, 5, 7), (64, 24), (((0,), (0,)), ((), ())), "kab,kn->abn"),        # K first on the lhs, free dims 5x7
    ((2, 32, 9), (9, 2, 32), (((1,), (2,)), ((0,), (1,))), "bkm,nbk->bmn"),  # batch and K anywhere
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn,eq", CASES, ids=[c[3] for c in CASES])
@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp8_e5m2", "mxfp4", "nvfp4"])
def test_forward_matches_quantized_float64(lhs_shape, rhs_shape, dn, eq, fmt):
    s = seed_of("sdg", lhs_shape, rhs_shape, fmt)
    x, w = _rand(s, lhs_shape), _rand(s + 1, rhs_shape)
    (lc, rc), _ = dn
    jax_tmem.clear_decisions()
    y = jax.jit(lambda a, b: jax_tmem.scaled_dot_general(a, b, dn, jnp.float32, configs=[fmt] * 3))(x, w)
    assert jax_tmem.decisions()[-1].op == "scaled_matmul"
    ref = np.einsum(eq, _q64(x, fmt, lc[0]), _q64(w, fmt, rc[0]))
    assert y.shape == ref.shape == jax.eval_shape(lambda: jax.lax.dot_general(x, w, dn)).shape
    assert np.abs(np.asarray(y, np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp4"])
def test_backward_requantizes_along_each_contraction(fmt):
    """dlhs = Q_N(g) Q_N(w)^T and drhs = Q_M(g)^T Q_M(x) (JAX's recipe: re-quantize the high-precision
    tensors along the axis each backward GEMM contracts), with M and N not multiples of the block
    (zero-padded)."""
    s = seed_of("sdg-bwd", fmt)
    b, m, n, k = 2, 40, 72, 96
    x, w, r = _rand(s, (b, m, k)), _rand(s + 1, (b, n, k)), _rand(s + 2, (b, m, n))
    dn = (((2,), (2,)), ((0,), (0,)))
    loss = lambda a, bb: jnp.sum(jax_tmem.scaled_dot_general(a, bb, dn, jnp.float32, configs=[fmt] * 3) * r)
    dx, dw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
    pad = lambda t, axis: jnp.pad(t, [(0, -t.shape[i] % 32 if i == axis else 0) for i in range(t.ndim)])
    g = r  # d loss / d y
    gq_n = _q64(pad(g, 2), fmt, 2)[:, :, :n]                     # g quantized along N
    wq_n = _q64(pad(jnp.swapaxes(w, 1, 2), 2), fmt, 2)[:, :, :n]  # w^T (B, K, N) along N
    gq_m = _q64(pad(jnp.swapaxes(g, 1, 2), 2), fmt, 2)[:, :, :m]  # g^T (B, N, M) along M
    xq_m = _q64(pad(jnp.swapaxes(x, 1, 2), 2), fmt, 2)[:, :, :m]  # x^T (B, K, M) along M
    ref_dx = np.einsum("bmn,bkn->bmk", gq_n, wq_n)
    ref_dw = np.einsum("bnm,bkm->bnk", gq_m, xq_m)
    for got, ref in ((dx, ref_dx), (dw, ref_dw)):
        assert got.shape == ref.shape
        assert np.abs(np.asarray(got, np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()


def test_nvfp4_backward_is_unquantized_like_jax():
    s = seed_of("sdg-nv")
    x, w, r = _rand(s, (1, 16, 64)), _rand(s + 1, (1, 24, 64)), _rand(s + 2, (1, 16, 24))
    dn = (((2,), (2,)), ((0,), (0,)))
    loss = lambda a, b: jnp.sum(jax_tmem.scaled_dot_general(a, b, dn, configs=["nvfp4"] * 3) * r)
    dx, dw = jax.grad(loss, argnums=(0, 1))(x, w)
    r64, x64, w64 = (np.asarray(t, np.float64) for t in (r, x, w))
    np.testing.assert_allclose(np.asarray(dx, np.float64), np.einsum("bmn,bnk->bmk", r64, w64), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(dw, np.float64), np.einsum("bmn,bmk->bnk", r64, x64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("gs", [None, 0.37], ids=["default", "0.37"])
def test_nvfp4_global_scales_and_clipped_gradients_follow_jax(gs, monkeypatch):
    """NVFP4 configs' global scales, concrete or traced (jax.nn's default config made inside jit holds a traced
    jnp.ones((1,)): refused before 2026-11-28), divide the operands before quantization and multiply the
    product; the unquantized backward zeroes the gradients of values the forward clipped (|x| > g x 6 x 448),
    JAX's straight-through estimator. Compared with JAX's own scaled_dot_general, its cuDNN GEMM replaced by
    the float32 product of the dequantized operands (it has no lowering on a CPU or a Hopper GPU), so every
    other step is JAX's."""
    from jax._src.cudnn import scaled_matmul_stablehlo as sms

    calls = []

    def dequantized_product(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=jnp.float32):
        calls.append(1)
        # (the barrier keeps JAX's f32 -> e2m1 conversion: in one program with this dequantize, XLA:GPU's excess
        # precision simplification folds f32 -> e2m1 -> f32 into nothing; H200 2026-11-28, gone with
        # --xla_allow_excess_precision=false; JAX's own scaled_matmul keeps it)
        lhs, rhs = lax.optimization_barrier((lhs, rhs))
        a, b = jax_tmem.dequantize(lhs, lhs_scales), jax_tmem.dequantize(rhs, rhs_scales)
        return jnp.einsum("bmk,bnk->bmn", a, b, precision="highest").astype(preferred_element_type)
    monkeypatch.setattr(sms, "scaled_matmul_wrapper", dequantized_product)
    s = seed_of("sdg-nv-gs", gs)
    x = _rand(s, (32, 64)).at[0, 0].set(5000.0).at[3, 7].set(-4000.0)  # beyond 6 x 448 (x g): clipped
    w, r = _rand(s + 1, (16, 64)), _rand(s + 2, (32, 16))
    dn = (((1,), (1,)), ((), ()))

    def loss(sdg):
        def f(a, b):
            g = None if gs is None else jnp.full((1,), gs, jnp.float32)  # made inside jit, as a model's step does
            cfg = [jax.nn.get_scaled_dot_general_config("nvfp4", global_scale=g)] * 3
            return jnp.sum(sdg(a, b, dn, configs=cfg) * r)
        return jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
    v, (dx, dw) = loss(jax_tmem.scaled_dot_general)(x, w)
    # ours against float64 sums of the quantized operands, on every platform
    g = np.float32(1.0 if gs is None else gs)
    xq, xs = jax_tmem.quantize(x, "nvfp4", global_scale=g)
    wq, ws = jax_tmem.quantize(w, "nvfp4", global_scale=g)
    x64, w64 = (np.asarray(jax_tmem.dequantize(q, sc), np.float64) * float(g) for q, sc in ((xq, xs), (wq, ws)))
    v64 = float(np.sum((x64 @ w64.T) * np.asarray(r, np.float64)))
    assert abs(float(v) - v64) <= 1e-5 * abs(v64), (float(v), v64)
    assert float(dx[0, 0]) == 0.0 and float(dx[3, 7]) == 0.0 and float(jnp.abs(dx).max()) > 0
    vj, (dxj, dwj) = loss(jax.nn.scaled_dot_general)(x, w)
    assert calls, "JAX's scaled_dot_general did not reach the replaced GEMM"
    np.testing.assert_allclose(float(v), float(vj), rtol=1e-6)
    # (the unquantized float32 backward GEMMs run as tf32 on a GPU, their operands rounded differently by cuBLAS
    # and by ours: up to 4e-3 of the largest gradient apart on an H200, 2026-11-28)
    tol = 1e-6 if jax.default_backend() == "cpu" else 1e-2
    for a, b in ((dx, dxj), (dw, dwj)):
        b = np.asarray(b, np.float64)
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=tol, atol=tol * np.abs(b).max())


def test_takes_jax_block_scale_configs_and_matches_jax_where_it_runs():
    """jax.nn.get_scaled_dot_general_config objects are accepted; where this JAX can run its own
    scaled_dot_general (not on the CPU of jax 0.10, which has no lowering for it), the results agree."""
    cfg = jax.nn.get_scaled_dot_general_config("mxfp8")
    s = seed_of("sdg-jax")
    x, w = _rand(s, (2, 64, 128)), _rand(s + 1, (2, 48, 128))
    dn = (((2,), (2,)), ((0,), (0,)))
    ours = np.asarray(jax_tmem.scaled_dot_general(x, w, dn, jnp.float32, configs=[cfg] * 3), np.float64)
    named = np.asarray(jax_tmem.scaled_dot_general(x, w, dn, jnp.float32, configs=["mxfp8"] * 3), np.float64)
    np.testing.assert_array_equal(ours, named)
    try:
        theirs = np.asarray(jax.nn.scaled_dot_general(x, w, dn, jnp.float32, configs=[cfg] * 3), np.float64)
    except Exception as e:  # noqa: BLE001 - JAX's own op is unavailable on this platform/version
        pytest.skip(f"jax.nn.scaled_dot_general does not run here: {type(e).__name__}: {str(e)[:120]}")
    assert np.abs(ours - theirs).max() <= 1e-5 * np.abs(theirs).max()


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="path='kernel' runs the C++ CPU handler")
def test_kernel_path_forward_and_backward():
    """path="kernel": every GEMM of the forward and backward goes through the custom call (CPU handler)
    and agrees with the XLA path to f32 accumulation."""
    s = seed_of("sdg-kernel")
    x, w, r = _rand(s, (2, 40, 64)), _rand(s + 1, (2, 72, 64)), _rand(s + 2, (2, 40, 72))
    dn = (((2,), (2,)), ((0,), (0,)))
    out = {}
    for path in ("kernel", "xla"):
        f = lambda a, b: jnp.sum(jax_tmem.scaled_dot_general(a, b, dn, configs=["mxfp8"] * 3, path=path) * r)
        jax_tmem.clear_decisions()
        out[path] = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(x, w)
        assert {d.path for d in jax_tmem.decisions() if d.op == "scaled_matmul"} == {path}, jax_tmem.decisions()
    (vk, (dxk, dwk)), (vx, (dxx, dwx)) = out["kernel"], out["xla"]
    for a, b in ((vk, vx), (dxk, dxx), (dwk, dwx)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()


def test_bad_input_raises_with_the_fix():
    x, w = _rand(1, (16, 64)), _rand(2, (64, 8))
    dn = (((1,), (0,)), ((), ()))
    # preferred_element_type=None is the default float32 (it raised naming float64, np.dtype(None))
    assert jax_tmem.scaled_dot_general(x, w, dn, None, configs=["mxfp8"] * 2).dtype == jnp.float32
    with pytest.raises(ValueError, match="configs must be .* for an unscaled product use jax_tmem.dot_general"):
        jax_tmem.scaled_dot_general(x, w, dn)
    with pytest.raises(ValueError, match="contracting size 48 is not a multiple of lhs's mxfp8 block size 32"):
        jax_tmem.scaled_dot_general(x[:, :48], w[:48], dn, configs=["mxfp8"] * 2)
    with pytest.raises(TypeError, match="configs\\[0\\] must be a jax.nn.BlockScaleConfig"):
        jax_tmem.scaled_dot_general(x, w, dn, configs=[3, "mxfp8"])
    with pytest.raises(TypeError, match="lhs must be floating point"):
        jax_tmem.scaled_dot_general(x.astype(jnp.int32), w, dn, configs=["mxfp8"] * 2)
    with pytest.raises(ValueError, match="contracting dim lhs\\[1\\]=64 != rhs\\[0\\]=32"):
        jax_tmem.scaled_dot_general(x, w[:32], dn, configs=["mxfp8"] * 2)
    with pytest.raises(ValueError, match="configs\\[0\\].global_scale must be one float32 value, got shape \\(2,\\)"):
        cfg = jax.nn.get_scaled_dot_general_config("nvfp4", jnp.array([0.5, 0.5], jnp.float32))
        jax_tmem.scaled_dot_general(x, w, dn, configs=[cfg] * 3)


# ---- the quantize= option of dot_general / matmul --------------------------------------------------

def test_dot_general_and_matmul_quantize_on_the_fly():
    """dot_general(quantize=fmt) is scaled_dot_general with that format for lhs, rhs and the gradient
    (bit for bit, any dimension numbers, its backward too); matmul(quantize=fmt) adds its epilogue (alpha,
    bias, activation, c) in f32 on the product; bad values say what to pass."""
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.standard_normal((3, 64, 20)), jnp.bfloat16)  # (B, K, M): K not last
    w = jnp.asarray(rng.standard_normal((3, 24, 64)), jnp.bfloat16)  # (B, N, K)
    dn = (((1,), (2,)), ((0,), (0,)))
    got = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, dn, quantize="mxfp8"))(x, w)
    want = jax.jit(lambda a, b: jax_tmem.scaled_dot_general(a, b, dn, jnp.bfloat16, configs=["mxfp8"] * 3))(x, w)
    assert got.dtype == jnp.bfloat16 and got.shape == (3, 20, 24)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    g1 = jax.grad(lambda a: jnp.sum(jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.float32,
                                                          quantize="mxfp8") ** 2))(x)
    g2 = jax.grad(lambda a: jnp.sum(jax_tmem.scaled_dot_general(a, w, dn, jnp.float32, configs=["mxfp8"] * 3) ** 2))(x)
    np.testing.assert_array_equal(np.asarray(g1, np.float32), np.asarray(g2, np.float32))

    a = jnp.asarray(rng.standard_normal((2, 16, 96)), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((96, 40)), jnp.bfloat16)
    bias = jnp.asarray(rng.standard_normal((40,)), jnp.float32)
    c = jnp.asarray(rng.standard_normal((2, 16, 40)), jnp.bfloat16)
    y = jax_tmem.matmul(a, b, bias=bias, activation="relu", alpha=0.5, c=c, quantize="mxfp8")
    p = jax_tmem.scaled_dot_general(a, b, (((2,), (0,)), ((), ())), jnp.float32, configs=["mxfp8"] * 3)
    ref = (jnp.maximum(0.5 * p + bias, 0) + c.astype(jnp.float32)).astype(jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(ref, np.float32))
    # a 2-D a against a batched b
    bb = jnp.asarray(rng.standard_normal((2, 96, 40)), jnp.bfloat16)
    y2 = jax_tmem.matmul(a[0], bb, quantize="mxfp8", out_dtype=jnp.float32)
    ref2 = jax_tmem.scaled_dot_general(jnp.broadcast_to(a[0], (2, 16, 96)), bb, (((2,), (1,)), ((0,), (0,))),
                                       jnp.float32, configs=["mxfp8"] * 3)
    np.testing.assert_array_equal(np.asarray(y2), np.asarray(ref2))
    with pytest.raises(ValueError, match="list of 2-3 of them"):
        jax_tmem.dot_general(x, w, dn, quantize=["mxfp8"])
    with pytest.raises(ValueError, match="not a block-scaled format"):
        jax_tmem.matmul(a, b, quantize="int4")


def _lowered_for_cuda(fn, *avals):
    """(custom-call targets, number of stablehlo.dot_general, the decisions) of fn lowered for CUDA."""
    import re
    txt, decisions = lower_for_cuda(fn, *avals)
    return sorted(set(re.findall(r"custom_call @(\w+)", txt))), txt.count("stablehlo.dot_general"), decisions


@pytest.mark.parametrize("cc,arch", [(100, "sm_100a"), (103, "sm_103a")])
@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp4", "nvfp4"])
def test_blackwell_block_scaled_programs_lower_to_the_kernels(as_if_on, cc, arch, fmt):
    """Issue 14, statically (no GPU; these kernels have never run on Blackwell hardware): on sm_100a / sm_103a
    (with JAX_TMEM_ENABLE_SM100=1) quantize + scaled_matmul and dot_general(quantize=) lower to the fused
    quantize kernel and the block-scaled tcgen05 GEMM, with no XLA dot anywhere in the program."""
    as_if_on(cc, 148)
    x, w = jax.ShapeDtypeStruct((256, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((2048, 4096), jnp.bfloat16)

    def two_steps(x, w):
        (a, sa), (b, sb) = jax_tmem.quantize(x, fmt), jax_tmem.quantize(w, fmt)
        return jax_tmem.scaled_matmul(a[None], b[None], sa[None], sb[None], preferred_element_type=jnp.bfloat16)

    for fn in (two_steps, lambda x, w: jax_tmem.dot_general(x, w, (((1,), (1,)), ((), ())), quantize=fmt)):
        calls, dots, decisions = _lowered_for_cuda(fn, x, w)
        assert calls == ["jax_tmem_gemm", "jax_tmem_quantize"] and dots == 0, (calls, dots)
        assert all(d.path == "kernel" for d in decisions), "\n".join(map(str, decisions))
        assert any(d.op == "scaled_matmul" and f"cuda {arch}" in d.target for d in decisions), \
            "\n".join(map(str, decisions))


def test_the_block_scaled_lowering_check_sees_xla_on_hopper(as_if_on):
    """The check above can fail: sm_90a has no 4-bit tensor-core operands, so an nvfp4 x nvfp4 GEMM lowers to
    XLA's dequantize + dot there (the fused quantize kernel still runs)."""
    as_if_on(90, 132)
    x, w = jax.ShapeDtypeStruct((256, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((2048, 4096), jnp.bfloat16)
    calls, dots, decisions = _lowered_for_cuda(
        lambda x, w: jax_tmem.dot_general(x, w, (((1,), (1,)), ((), ())), quantize="nvfp4"), x, w)
    assert "jax_tmem_gemm" not in calls and dots >= 1, (calls, dots)


@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4"])
def test_blackwell_recipe_quantizes_scales_into_the_kernels_layout(as_if_on, recipe):
    """On sm_100a the training recipes' quantizes write the 128x4 scale tiles tcgen05.cp copies (the fused
    kernel's swizzled output): the forward and backward programs hold no swizzle of the scales in XLA (the
    transposes left are of high-precision operands, which the K-major block-scaled kernels need)."""
    import re
    as_if_on(100, 148)
    x = jax.ShapeDtypeStruct((512, 1024), jnp.bfloat16)
    w1, w2 = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16), jax.ShapeDtypeStruct((2048, 1024), jnp.bfloat16)

    def loss(w1, w2, x):
        dg = lambda a, b: jax_tmem.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), recipe=recipe)
        return jnp.sum(dg(jax.nn.gelu(dg(x, w1)), w2).astype(jnp.float32) ** 2)

    txt, _ = lower_for_cuda(jax.grad(loss, argnums=(0, 1)), w1, w2, x)
    assert "@jax_tmem_gemm" in txt and "@jax_tmem_quantize" in txt
    transposes = [ln for ln in txt.splitlines() if "stablehlo.transpose" in ln]
    of_scales = [ln for ln in transposes if re.search(r"x(ui8|f8E8M0FNU|f8E4M3FN)>", ln)]
    assert not of_scales, "\n".join(of_scales)
    assert all(re.search(r"x(bf16|f32)>", ln) for ln in transposes), "\n".join(transposes)
    swizzled = re.findall(r"@jax_tmem_quantize\(.*?swizzled = (true|false)", txt)
    assert swizzled and set(swizzled) == {"true"}, swizzled

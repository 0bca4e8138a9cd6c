"""jax_tmem.matmul against a float64 NumPy reference, on both paths (C++ CPU handler and XLA), under jit."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import jax_tmem
from conftest import (ACTIVATIONS, BF16, E4M3, E5M2, F16, F32, FP8, IN_DTYPES, OUT_DTYPES, PATHS, assert_close,
                      calc_diff, f64, path_decisions, rand, ref_epilogue, ref_matmul, run_path, seed_of)

SIZES = (1, 3, 17, 64, 129)

# every pair of operand dtypes: same dtype, 16/32-bit mixes (promoted like jnp), fp8 x fp8 mixes (kept as
# they are), fp8 x 16/32-bit (the fp8 operand joins the wider type)
DTYPE_PAIRS = list(itertools.product(IN_DTYPES, IN_DTYPES))


def _id(x):
    return "None" if x is None else np.dtype(x).name


def _expected_out(a_dt, b_dt, out_dtype):
    """Documented default: the input dtype, bfloat16 for fp8 inputs, the wider type for mixes."""
    if out_dtype is not None:
        return np.dtype(out_dtype)
    if a_dt in FP8 and b_dt in FP8:
        return BF16
    if a_dt in FP8:
        return b_dt
    if b_dt in FP8:
        return a_dt
    return np.dtype(jnp.promote_types(a_dt, b_dt))


DTYPE_CASES = [pytest.param(p, a, b, o, id=f"{p}-{_id(a)}x{_id(b)}->{_id(o)}")
               for p in PATHS for a, b in DTYPE_PAIRS for o in (None,) + OUT_DTYPES]


@pytest.mark.parametrize("path,a_dt,b_dt,out_dtype", DTYPE_CASES)
def test_dtype_combinations(path, a_dt, b_dt, out_dtype, seed):
    rng = np.random.default_rng(seed)
    m, n, k = (int(rng.choice(SIZES)) for _ in range(3))
    a = rand(seed, (m, k), a_dt)
    b = rand(seed + 1, (k, n), b_dt)
    out = run_path(path, lambda a, b: jax_tmem.matmul(a, b, out_dtype=out_dtype), a, b)
    want = _expected_out(a_dt, b_dt, out_dtype)
    assert np.dtype(out.dtype) == want
    assert_close(out, ref_matmul(a, b), want, k)


@pytest.mark.parametrize("path", PATHS)
def test_all_shape_triples(path):
    """Every (M, N, K) in SIZES^3 (sizes of 1, odd sizes, sizes not a multiple of any tile)."""
    for i, (m, n, k) in enumerate(itertools.product(SIZES, SIZES, SIZES)):
        s = seed_of("triples", path, m, n, k)
        dt = (BF16, F16, F32)[i % 3]
        a, b = rand(s, (m, k), dt), rand(s + 1, (k, n), dt)
        out = run_path(path, jax_tmem.matmul, a, b)
        assert_close(out, ref_matmul(a, b), dt, k)


@pytest.mark.parametrize("path", PATHS)
def test_random_shapes_loop(path):
    """A seeded loop of random shapes, dtypes and epilogues, including large-ish K and ragged sizes."""
    rng = np.random.default_rng(seed_of("loop", path))
    for it in range(30):
        m, n = (int(x) for x in rng.integers(1, 200, 2))
        k = int(rng.integers(1, 700))
        dt = IN_DTYPES[it % len(IN_DTYPES)]
        out_dt = OUT_DTYPES[int(rng.integers(3))]
        act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]
        alpha = float(rng.uniform(-2, 2))
        s = int(rng.integers(2 ** 30))
        a = rand(s, (m, k), dt)
        b = rand(s + 1, (k, n), dt)
        bias = rand(s + 2, (n,), F32) if it % 2 else None
        c = rand(s + 3, (m, n), out_dt) if it % 3 == 0 else None
        f = lambda a, b, bias, c: jax_tmem.matmul(a, b, bias=bias, activation=act, alpha=alpha, c=c,
                                                   out_dtype=out_dt)
        out = run_path(path, f, a, b, bias, c)
        ref = ref_epilogue(ref_matmul(a, b), alpha=alpha, bias=bias, activation=act, c=c)
        assert_close(out, ref, out_dt, k)


BATCH_CASES = [
    # (a shape, b shape)
    ((2, 3, 17, 9), (9, 5)),          # (..., M, K) @ (K, N)
    ((4, 1, 9), (9, 3)),              # leading batch with M == 1
    ((3, 17, 9), (3, 9, 5)),          # (B, M, K) @ (B, K, N)
    ((1, 17, 9), (3, 9, 5)),          # a broadcast over the batch
    ((3, 17, 9), (1, 9, 5)),          # b broadcast over the batch
    ((2, 1, 4, 9), (3, 9, 5)),        # broadcast of both
    ((17, 9), (3, 9, 5)),             # 2-D a with batched b
    ((17, 9), (2, 3, 9, 5)),          # 2-D a with two batch dims of b
    ((9,), (9, 5)),                   # 1-D a
    ((17, 9), (9,)),                  # 1-D b
    ((9,), (9,)),                     # both 1-D: a scalar
    ((3, 17, 9), (9,)),               # batched a, 1-D b
    ((9,), (3, 9, 5)),                # 1-D a, batched b
    ((1, 1), (1, 1)),
    ((5, 129, 64), (5, 64, 3)),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("a_shape,b_shape", BATCH_CASES, ids=[f"{a}@{b}" for a, b in BATCH_CASES])
def test_batched_and_1d_shapes(path, a_shape, b_shape, seed):
    dt = (BF16, F32, F16)[seed % 3]
    a, b = rand(seed, a_shape, dt), rand(seed + 1, b_shape, dt)
    out = run_path(path, jax_tmem.matmul, a, b)
    ref = ref_matmul(a, b)
    assert out.shape == jnp.matmul(a, b).shape == ref.shape
    assert_close(out, ref, dt, a_shape[-1])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("has_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=[str(a) for a in ACTIVATIONS])
def test_activation_bias(path, activation, has_bias, seed):
    rng = np.random.default_rng(seed)
    m, n, k = (int(rng.choice(SIZES[1:])) for _ in range(3))
    dt, out_dt = [(BF16, BF16), (F32, F32), (E4M3, BF16), (F16, F32)][seed % 4]
    a, b = rand(seed, (m, k), dt), rand(seed + 1, (k, n), dt)
    bias = rand(seed + 2, (n,), F32, scale=3.0) if has_bias else None
    out = run_path(path, lambda a, b, bias: jax_tmem.matmul(a, b, bias=bias, activation=activation,
                                                            out_dtype=out_dt), a, b, bias)
    ref = ref_epilogue(ref_matmul(a, b), bias=bias, activation=activation)
    assert_close(out, ref, out_dt, k)
    if activation == "relu":
        assert float(jnp.min(out.astype(jnp.float32))) >= 0.0
    if has_bias:  # the bias really was added: the result without it differs
        no_bias = ref_epilogue(ref_matmul(a, b), activation=activation)
        assert np.max(np.abs(f64(out) - no_bias)) > 0.1


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt,out_dt", [(BF16, BF16), (F32, F32), (F16, F16), (E5M2, F32), (E4M3, F16)],
                         ids=lambda x: np.dtype(x).name)
@pytest.mark.parametrize("alpha", [0.5, -1.75, 3.0])
@pytest.mark.parametrize("m", [5, 17])
def test_alpha_and_c(path, dt, out_dt, alpha, m, seed):
    n, k = 33, 129
    a, b = rand(seed, (m, k), dt), rand(seed + 1, (k, n), dt)
    c = rand(seed + 2, (m, n), out_dt, scale=5.0)
    bias = rand(seed + 3, (n,), F32)
    act = ACTIVATIONS[seed % len(ACTIVATIONS)]
    f = lambda a, b, bias, c: jax_tmem.matmul(a, b, bias=bias, activation=act, alpha=alpha, c=c, out_dtype=out_dt)
    out = run_path(path, f, a, b, bias, c)
    # where c goes is on the record: the epilogue for M <= 8, else XLA's add to the float32 result
    assert bool([d for d in jax_tmem.decisions() if d.op == "matmul c"]) == (m > 8)
    ref = ref_epilogue(ref_matmul(a, b), alpha=alpha, bias=bias, activation=act, c=c)
    assert_close(out, ref, out_dt, k)
    # c is added after the activation, and alpha scales only the product
    wrong = ref_epilogue(ref_matmul(a, b), alpha=1.0, bias=bias, activation=act, c=c)
    assert np.max(np.abs(f64(out) - wrong)) > 0.1


@pytest.mark.parametrize("path", PATHS)
def test_c_and_bias_with_batches(path, seed):
    a = rand(seed, (3, 17, 9), BF16)
    b = rand(seed + 1, (3, 9, 5), BF16)
    bias = rand(seed + 2, (5,), F32)
    c = rand(seed + 3, (3, 17, 5), F32)
    f = lambda a, b, bias, c: jax_tmem.matmul(a, b, bias=bias, c=c, activation="silu", alpha=0.25,
                                              out_dtype=jnp.float32)
    out = run_path(path, f, a, b, bias, c)
    ref = ref_epilogue(ref_matmul(a, b), alpha=0.25, bias=bias, activation="silu", c=c)
    assert_close(out, ref, F32, 9)
    # 2-D a with batched b, with bias and c
    a2 = rand(seed + 4, (17, 9), F16)
    b2 = rand(seed + 5, (2, 3, 9, 5), F16)
    c2 = rand(seed + 6, (2, 3, 17, 5), F16)
    out2 = run_path(path, f, a2, b2, bias, c2.astype(jnp.float32))
    ref2 = ref_epilogue(ref_matmul(a2, b2), alpha=0.25, bias=bias, activation="silu", c=c2)
    assert_close(out2, ref2, F32, 9)


@pytest.mark.parametrize("path", PATHS)
def test_paths_agree(path, seed):
    """The kernel path (C++ reference) and the XLA path give the same numbers (to output rounding)."""
    a, b = rand(seed, (64, 129), BF16), rand(seed + 1, (129, 17), BF16)
    bias = rand(seed + 2, (17,), F32)
    f = lambda a, b, bias: jax_tmem.matmul(a, b, bias=bias, activation="gelu_tanh", out_dtype=jnp.float32)
    out = run_path(path, f, a, b, bias)
    other = run_path("xla" if path == "kernel" else "kernel", f, a, b, bias)
    np.testing.assert_allclose(f64(out), f64(other), rtol=1e-5, atol=1e-4)
    assert calc_diff(out, other) < 1e-10


def test_unjitted_call_and_default_out_dtype(seed):
    """Eager (un-jitted) calls work too and keep the input dtype by default."""
    for path in PATHS:
        for dt in (BF16, F16, F32):
            a, b = rand(seed, (5, 7), dt), rand(seed + 1, (7, 3), dt)
            out = run_path(path, jax_tmem.matmul, a, b, jit=False)
            assert_close(out, ref_matmul(a, b), dt, 7)
    # numpy operands are accepted
    a = np.asarray(rand(seed + 2, (4, 6), F32))
    b = np.asarray(rand(seed + 3, (6, 2), F32))
    out = run_path("kernel", jax_tmem.matmul, a, b)
    assert_close(out, ref_matmul(a, b), F32, 6)


def test_auto_matches_reference_on_cpu(seed):
    if jax.default_backend() != "cpu":
        pytest.skip("checks the CPU auto decision")
    a, b = rand(seed, (17, 64), BF16), rand(seed + 1, (64, 3), BF16)
    out = run_path("auto", jax_tmem.matmul, a, b, expect="xla")
    assert_close(out, ref_matmul(a, b), BF16, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [BF16, F16, E4M3])
def test_gpu_auto_matches_reference(dt, seed):
    a, b = rand(seed, (256, 512), dt), rand(seed + 1, (512, 128), dt)
    jax_tmem.clear_decisions()
    with jax_tmem.use_path("auto"):
        out = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32))(a, b)
    assert jax_tmem.decisions() and all(d.reason for d in jax_tmem.decisions())
    # fp8 on Hopper: wgmma's fp8 accumulation keeps fewer bits than f32 (no periodic promotion yet),
    # so the f32 output is held to the bf16 tolerance.
    if dt == E4M3:
        assert_close(out.astype(BF16), ref_matmul(a, b), BF16, 512)
    else:
        assert_close(out, ref_matmul(a, b), F32, 512)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", [(5, 24, 8), (17, 24, 8), (17, 9, 5)], ids=["c_in_epilogue", "c_by_xla", "odd"])
def test_c_is_not_modified(path, m, k, n, seed):
    """c is aliased to the output inside the custom call where it goes into the epilogue (M <= 8); the caller's
    array must keep its values, jitted or not. Jitted and eager results are bitwise equal where our kernel (or
    the CPU handler) computed the product; where XLA did (path "xla", or a shape the GPU kernels refuse: K = 9
    bf16 rows of 18 bytes), XLA may fuse the add into its GEMM under jit only, so there within an f32 rounding."""
    a, b = rand(seed, (m, k), BF16), rand(seed + 1, (k, n), BF16)
    c = rand(seed + 2, (m, n), F32)
    c_before = np.asarray(c).copy()
    out = run_path(path, lambda a, b, c: jax_tmem.matmul(a, b, c=c, out_dtype=jnp.float32), a, b, c)
    np.testing.assert_array_equal(np.asarray(c), c_before)
    assert_close(out, ref_epilogue(ref_matmul(a, b), c=c_before), F32, 9)
    out2 = run_path(path, lambda a, b, c: jax_tmem.matmul(a, b, c=c, out_dtype=jnp.float32), a, b, c, jit=False)
    np.testing.assert_array_equal(np.asarray(c), c_before)
    ours = all(d.path == "kernel" for d in path_decisions())
    if ours:
        np.testing.assert_array_equal(np.asarray(out2), np.asarray(out))
    else:
        np.testing.assert_allclose(np.asarray(out2), np.asarray(out), rtol=2e-6, atol=1e-6)
    if path == "kernel" and k % 8 == 0:  # shapes every kernel path takes: the product was ours
        assert ours, jax_tmem.decisions()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("a_shape,b_shape", [((0, 9), (9, 5)), ((17, 9), (9, 0)), ((0, 17, 9), (0, 9, 5)),
                                             ((3, 0, 9), (9, 5))], ids=["M0", "N0", "B0", "lead_M0"])
def test_empty_outputs(path, a_shape, b_shape, seed):
    a, b = rand(seed, a_shape, F32), rand(seed + 1, b_shape, F32)
    out = run_path(path, jax_tmem.matmul, a, b, expect="xla")  # zero-sized: always XLA, even when forced
    assert out.shape == jnp.matmul(a, b).shape and out.size == 0


@pytest.mark.parametrize("path", PATHS)
def test_empty_contraction(path, seed):
    """K == 0: the product is zero, so out = act(alpha * 0 + bias) + c."""
    a, b = jnp.zeros((3, 0), F32), jnp.zeros((0, 4), F32)
    bias, c = rand(seed, (4,), F32), rand(seed + 1, (3, 4), F32)
    out = run_path(path, lambda a, b, bias, c: jax_tmem.matmul(a, b, bias=bias, c=c, activation="silu"),
                   a, b, bias, c, expect="xla")  # K == 0: always XLA, even when forced
    ref = ref_epilogue(np.zeros((3, 4)), bias=bias, activation="silu", c=c)
    assert_close(out, ref, F32, 1)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("activation", ACTIVATIONS[1:])
def test_activation_curve_exact(path, activation):
    """Each activation over z in [-3, 3] (K=1, f32), to f32 precision: tells gelu (erf) from gelu_tanh
    (they differ by ~1e-4 around |z| ~ 2) and checks the bias/alpha order inside the activation."""
    z = np.linspace(-3.0, 3.0, 257, dtype=np.float32)[:, None]
    b = np.asarray([[1.0, 2.0, -1.0, 0.5]], np.float32)
    bias = np.asarray([0.25, -0.5, 0.0, 1.0], np.float32)
    f = lambda a, b, bias: jax_tmem.matmul(a, b, bias=bias, alpha=0.75, activation=activation)
    out = run_path(path, f, jnp.asarray(z), jnp.asarray(b), jnp.asarray(bias))
    ref = ref_epilogue(f64(z) @ f64(b), alpha=0.75, bias=bias, activation=activation)
    np.testing.assert_allclose(f64(out), ref, rtol=2e-6, atol=2e-6)
    other = {"gelu": "gelu_tanh", "gelu_tanh": "gelu", "silu": "gelu", "relu": "silu"}[activation]
    wrong = ref_epilogue(f64(z) @ f64(b), alpha=0.75, bias=bias, activation=other)
    assert np.max(np.abs(f64(out) - wrong)) > 5e-5


# ---- int8 x int8 (exact int32 accumulation, float epilogue) -------------------------------------

def _int8(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).integers(-128, 128, shape), jnp.int8)


# XLA's own int8 dot on a GPU: jax.jit(lambda a, b: lax.dot_general(a, b, ..., preferred_element_type=int32)) of
# 3x2 @ 2x2048 int8 came out twice the exact product on an H100 (jaxlib 0.11.2, 2026-11-26; 17x33x29 and
# 64x4096x8 exact). No jax_tmem kernel takes int8 on sm_90a, so both paths run that dot there: where our result
# is wrong in exactly the way XLA's own dot is, the test xfails naming it (on GPUs, jaxlibs and algorithms
# where XLA's dot is exact, it must pass).
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape", [(17, 33, 29), (64, 4096, 8), (3, 2, 2048)], ids=str)
def test_int8_matmul_exact(path, shape, seed):
    m, k, n = shape
    a, b = _int8(seed, (m, k)), _int8(seed + 1, (k, n))
    out = run_path(path, lambda a, b: jax_tmem.matmul(a, b, alpha=0.5), a, b)
    assert out.dtype == jnp.float32  # int8 defaults to a float32 output
    ref = 0.5 * (np.asarray(a, np.int64) @ np.asarray(b, np.int64))
    # |sums| <= K * 128^2 < 2^24 here, so float32 holds them exactly
    if not np.array_equal(np.asarray(out, np.float64), ref) and jax.default_backend() == "gpu":
        plain = jax.jit(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                     preferred_element_type=jnp.int32))(a, b)
        if np.array_equal(0.5 * np.asarray(plain, np.float64), np.asarray(out, np.float64)):
            pytest.xfail(f"XLA's own GPU int8 dot gives the same wrong product for {m}x{k} @ {k}x{n} "
                         f"(max |error| {np.abs(np.asarray(out, np.float64) - ref).max():g})")
    np.testing.assert_array_equal(np.asarray(out, np.float64), ref)


@pytest.mark.parametrize("path", PATHS)
def test_int8_epilogue_and_dot_general(path, seed):
    a, b = _int8(seed, (2, 9, 40)), _int8(seed + 1, (2, 40, 12))
    bias = rand(seed + 2, (12,), F32)
    out = run_path(path, lambda a, b, bias: jax_tmem.matmul(a, b, bias=bias, activation="relu",
                                                            out_dtype=jnp.bfloat16), a, b, bias)
    ref = np.maximum(np.asarray(a, np.int64) @ np.asarray(b, np.int64) + np.asarray(bias, np.float64), 0)
    assert_close(out, ref, BF16, 40)
    dn = (((2,), (1,)), ((0,), (0,)))
    out = run_path(path, lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=jnp.float32), a, b)
    np.testing.assert_array_equal(np.asarray(out, np.float64), np.asarray(a, np.int64) @ np.asarray(b, np.int64))
    # integer results are lax's business (the kernels write float outputs), with the reason recorded
    jax_tmem.clear_decisions()
    i32 = jax_tmem.dot_general(a, b, dn, preferred_element_type=jnp.int32)
    assert i32.dtype == jnp.int32 and jax_tmem.decisions()[-1].path == "xla"
    np.testing.assert_array_equal(np.asarray(i32), np.asarray(a, np.int32) @ np.asarray(b, np.int32))


def test_int8_grad_flows_to_bias_only(seed):
    a, b = _int8(seed, (5, 16)), _int8(seed + 1, (16, 6))
    bias = rand(seed + 2, (6,), F32)
    g = jax.grad(lambda bias: jnp.sum(jax_tmem.matmul(a, b, bias=bias, activation="silu")))(bias)
    z = np.asarray(a, np.float64) @ np.asarray(b, np.float64) + np.asarray(bias, np.float64)
    sig = 0.5 * (1 + np.tanh(z / 2))  # the logistic function, without overflow
    np.testing.assert_allclose(np.asarray(g), (sig * (1 + z * (1 - sig))).sum(0), rtol=1e-4, atol=1e-4)


# ---- found by a user's-eye review, 2026-11-28 ------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_fused_relu_is_jax_nn_relu(path):
    """The fused relu is jax.nn.relu: its gradient at a pre-activation of exactly 0 is 0 (max(x, 0) gave half the
    cotangent there: zero rows, inputs without a bias) and a NaN stays NaN on every path (the C++ epilogue, which
    the GPU kernels share, returned 0 for it)."""
    x, w = jnp.zeros((2, 4), F32), jnp.ones((4, 4), F32)
    with jax_tmem.use_path(path):
        g = jax.jit(jax.grad(lambda x: jax_tmem.matmul(x, w, activation="relu").sum()))(x)
    np.testing.assert_array_equal(np.asarray(g), np.zeros((2, 4), np.float32))
    a = jnp.array([[jnp.nan, 1.0, 0, 0], [-1.0, 0.5, 0, 0], [2.0, -3.0, 0, 0]], F32)
    y = run_path(path, lambda a, b: jax_tmem.matmul(a, b, activation="relu"), a, jnp.ones((4, 4), F32))
    np.testing.assert_array_equal(np.asarray(y), np.asarray(jax.nn.relu(np.asarray(a) @ np.ones((4, 4), np.float32))))  # exact sums


@pytest.mark.parametrize("path", PATHS)
def test_c_takes_the_result_shape_of_a_1d_operand(path):
    """matmul(a, b, c=c) with a 1-D a or b: c has the result's shape, as jnp.matmul's result (it had to be the 2-D
    product's, (1, N) / (M, 1))."""
    s = seed_of("c-1d", path)
    a1, b2, a2, b1 = rand(s, (64,), F32), rand(s + 1, (64, 16), F32), rand(s + 2, (16, 64), F32), rand(s + 3, (64,), F32)
    for a, b in ((a1, b2), (a2, b1), (a1, b1)):
        want = ref_matmul(a, b)  # jnp.matmul's shape, float64 sums (with the GPU's tf32 error bound)
        c = rand(s + 4, want.shape, F32)
        y = run_path(path, lambda a, b, c: jax_tmem.matmul(a, b, c=c), a, b, c)
        assert y.shape == want.shape
        assert_close(y, ref_epilogue(want, c=np.asarray(c, np.float64)), F32, 64)
    with pytest.raises(ValueError, match=r"c must have the result's shape \(16,\)"):
        jax_tmem.matmul(a1, b2, c=jnp.zeros((1, 16), F32))


def test_precision_and_dimension_numbers_are_checked_like_lax():
    """precision is checked as lax.dot_general checks it (any value ran before, at full float32); a bare int for a
    contracting dim is taken as lax takes it; malformed dimension numbers name the argument; an output type the
    kernels do not write (float64 under x64, or what lax makes of it) goes to lax.dot_general."""
    a, b = rand(1, (4, 32), F32), rand(2, (32, 8), F32)
    for bad in ("bogus", 42):
        with pytest.raises(ValueError, match="is not a JAX precision"):
            jax_tmem.dot_general(a, b, (((1,), (0,)), ((), ())), precision=bad)
        with pytest.raises(ValueError, match="is not a JAX precision"):
            jax_tmem.matmul(a, b, precision=bad)
    np.testing.assert_allclose(np.asarray(jax_tmem.dot_general(a, b, ((1, 0), ((), ())))),
                               np.asarray(lax.dot_general(a, b, ((1, 0), ((), ())))), rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError, match="dimension_numbers must be"):
        jax_tmem.dot_general(a, b, "mk,kn")
    y = jax_tmem.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float64)
    assert y.dtype == lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float64).dtype

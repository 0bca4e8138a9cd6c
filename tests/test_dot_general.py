"""jax_tmem.dot_general vs lax.dot_general and a float64 reference over dimension-number layouts,
the path each layout takes, and the canonicalizer (_canon.canonicalize) itself."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_tmem
from jax_tmem._core import canon as _canon
from jax_tmem.ops import gemm as gemm_op
from jax_tmem.ops.gemm import Epilogue
from conftest import (BF16, E4M3, E5M2, F16, F32, PATHS, assert_close, f32_tol, f64, like_ref, rand,
                      ref_dot_general, ref_epilogue, ref_matmul, run_path)

M, N, K, B, B2, K2, M2, N2 = 5, 6, 7, 3, 2, 4, 9, 8


def dn(lc, rc, lb=(), rb=()):
    return ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


# (id, lhs shape, rhs shape, dimension numbers, expressible without a transpose)
LAYOUTS = [
    ("mk,kn", (M, K), (K, N), dn([1], [0]), True),
    ("km,kn", (K, M), (K, N), dn([0], [0]), True),
    ("mk,nk", (M, K), (N, K), dn([1], [1]), True),
    ("km,nk", (K, M), (N, K), dn([0], [1]), True),
    ("two_contract", (M, K, K2), (K, K2, N), dn([1, 2], [0, 1]), True),
    ("two_contract_listed_reversed", (M, K, K2), (K, K2, N), dn([2, 1], [1, 0]), True),
    ("two_contract_leading_lhs", (K, K2, M), (N, K, K2), dn([0, 1], [1, 2]), True),
    ("two_contract_swapped_order", (M, K, K2), (K2, K, N), dn([1, 2], [1, 0]), False),
    ("contract_not_adjacent", (K, M, K2), (K, K2, N), dn([0, 2], [0, 1]), False),
    ("batch_leading", (B, M, K), (B, K, N), dn([2], [1], [0], [0]), True),
    ("batch_middle_lhs", (M, B, K), (B, K, N), dn([2], [1], [1], [0]), True),
    ("batch_middle_rhs", (B, M, K), (K, B, N), dn([2], [0], [0], [1]), True),
    ("batch_middle_both_kmajor", (M, B, K), (N, B, K), dn([2], [2], [1], [1]), True),
    ("batch_trailing", (M, K, B), (K, N, B), dn([1], [0], [2], [2]), False),
    ("batch_trailing_rhs_only", (B, M, K), (K, N, B), dn([2], [0], [0], [2]), False),
    ("batch_then_contract_lhs_mn", (K, B, M), (B, K, N), dn([0], [1], [1], [0]), True),
    ("two_batch", (B, B2, M, K), (B, B2, K, N), dn([3], [2], [0, 1], [0, 1]), True),
    ("two_batch_split", (B, M, B2, K), (B, B2, K, N), dn([3], [2], [0, 2], [0, 1]), False),
    ("two_batch_reversed", (B, B2, M, K), (B2, B, K, N), dn([3], [2], [0, 1], [1, 0]), False),
    ("two_free_lhs", (M, M2, K), (K, N), dn([2], [0]), True),
    ("two_free_lhs_mn_major", (K, M, M2), (K, N), dn([0], [0]), True),
    ("two_free_rhs", (M, K), (K, N, N2), dn([1], [0]), True),
    ("free_split_lhs", (M, K, M2), (K, N), dn([1], [0]), False),
    ("free_split_rhs", (M, K), (N, K, N2), dn([1], [1]), False),
    ("everything", (B, M, M2, K, K2), (B, K, K2, N, N2), dn([3, 4], [1, 2], [0], [0]), True),
    ("vector_lhs", (K,), (K, N), dn([0], [0]), True),
    ("vector_rhs", (M, K), (K,), dn([1], [0]), True),
    ("inner_product", (K,), (K,), dn([0], [0]), True),
    ("outer_product", (M,), (N,), dn([], []), True),
    ("batch_no_contract", (B, M), (B, N), dn([], [], [0], [0]), True),
    ("size1_batch_trailing", (M, K, 1), (K, N, 1), dn([1], [0], [2], [2]), True),
    ("size1_dims_around", (1, M, 1, K), (K, 1, N), dn([3], [0]), True),
    ("batched_mn_major_both", (B, K, M), (B, K, N), dn([1], [1], [0], [0]), True),
    ("batched_k_major_both", (B, M, K), (B, N, K), dn([2], [2], [0], [0]), True),
]
LAYOUT_IDS = [x[0] for x in LAYOUTS]


def _lax_reference(lhs, rhs, dims, preferred=None):
    return lax.dot_general(lhs.astype(jnp.float32), rhs.astype(jnp.float32), dims,
                           precision=lax.Precision.HIGHEST, preferred_element_type=preferred or jnp.float32)


def _k(lhs_shape, dims):
    return int(np.prod([lhs_shape[d] for d in dims[0][0]])) if dims[0][0] else 1


@pytest.mark.parametrize("path", PATHS + ("auto",))
@pytest.mark.parametrize("name,ls,rs,dims,expressible", LAYOUTS, ids=LAYOUT_IDS)
def test_layouts(path, name, ls, rs, dims, expressible, seed):
    dt = (BF16, F32, F16)[seed % 3]
    lhs, rhs = rand(seed, ls, dt), rand(seed + 1, rs, dt)
    f = lambda x, y: jax_tmem.dot_general(x, y, dims)
    canon = _canon.canonicalize(ls, rs, dims)
    assert isinstance(canon, _canon.Canon) == expressible, canon
    if path == "kernel" and not expressible:
        jax_tmem.clear_decisions()
        with jax_tmem.use_path("kernel"):
            with pytest.raises(ValueError, match="path 'kernel' was forced"):
                jax.jit(f)(lhs, rhs)
        return
    expect = path
    if path == "auto":
        expect = "xla" if jax.default_backend() == "cpu" or not expressible else None
        if expect is None:
            pytest.skip("GPU auto decision depends on the device")
    out = run_path(path, f, lhs, rhs, expect=expect)
    if path == "auto" and not expressible:
        # the fallback names the canonicalizer's reason
        assert jax_tmem.decisions()[-1].reason == canon
        assert jax_tmem.decisions()[-1].target == "lax.dot_general"
    want = lax.dot_general(lhs, rhs, dims)
    assert out.shape == want.shape
    assert out.dtype == want.dtype == dt
    ref = ref_dot_general(lhs, rhs, dims)
    assert_close(out, ref, dt, _k(ls, dims))
    # against lax itself (f32 accumulation, then rounded like ours): at most a rounding step apart
    lax_f32 = lax.dot_general(lhs, rhs, dims, precision=lax.Precision.HIGHEST, preferred_element_type=jnp.float32)
    assert_close(out, like_ref(lax_f32.astype(dt), ref), dt, _k(ls, dims), factor=2.0)


@pytest.mark.parametrize("name,ls,rs,dims,expressible", [x for x in LAYOUTS if x[4]],
                         ids=[x[0] for x in LAYOUTS if x[4]])
def test_canon_describes_the_buffers(name, ls, rs, dims, expressible, seed):
    """Independent oracle: reading the flat operand buffers with the Canon's majorness/ld/strides
    (the view in gemm_problem.h) and multiplying gives the dot_general result."""
    c = _canon.canonicalize(ls, rs, dims)
    lhs = np.random.default_rng(seed).standard_normal(ls)
    rhs = np.random.default_rng(seed + 1).standard_normal(rs)

    def view(flat, mn_major, ld, stride, rows_free):
        strides = (stride, 1, ld) if mn_major else (stride, ld, 1)
        extent = (c.batch - 1) * stride + ((c.k - 1) * ld + rows_free if mn_major else (rows_free - 1) * ld + c.k)
        assert extent <= flat.size, "view exceeds the buffer"
        it = flat.itemsize
        return np.lib.stride_tricks.as_strided(flat, (c.batch, rows_free, c.k), tuple(s * it for s in strides))

    A = view(lhs.ravel(), c.a_mn_major, c.lda, c.stride_a, c.m)
    Bv = view(rhs.ravel(), c.b_mn_major, c.ldb, c.stride_b, c.n)
    out = np.einsum("bik,bjk->bij", A, Bv).reshape(c.out_shape)
    np.testing.assert_allclose(out, ref_dot_general(lhs, rhs, dims), rtol=1e-12, atol=1e-12)
    assert c.out_shape == jax.eval_shape(lambda x, y: lax.dot_general(x, y, dims), jax.ShapeDtypeStruct(ls, F32),
                                         jax.ShapeDtypeStruct(rs, F32)).shape


def test_canonicalize_hand_cases():
    # (M,K)@(K,N): A K-major lda=K, B MN-major ldb=N
    c = _canon.canonicalize((M, K), (K, N), dn([1], [0]))
    assert (c.batch, c.m, c.n, c.k) == (1, M, N, K)
    assert (c.a_mn_major, c.lda, c.b_mn_major, c.ldb) == (False, K, True, N)
    assert (c.stride_a, c.stride_b) == (0, 0)
    # (K,M)x(N,K) contracting lhs 0 / rhs 1: A MN-major lda=M, B K-major ldb=K
    c = _canon.canonicalize((K, M), (N, K), dn([0], [1]))
    assert (c.a_mn_major, c.lda, c.b_mn_major, c.ldb) == (True, M, False, K)
    # lhs [M][B][K] with batch dim 1: stride_a = K, lda = B*K; rhs [B][K][N]: stride_b = K*N
    c = _canon.canonicalize((M, B, K), (B, K, N), dn([2], [1], [1], [0]))
    assert (c.batch, c.m, c.n, c.k) == (B, M, N, K)
    assert (c.a_mn_major, c.lda, c.stride_a) == (False, B * K, K)
    assert (c.b_mn_major, c.ldb, c.stride_b) == (True, N, K * N)
    assert c.out_shape == (B, M, N)
    # rhs [K][B][N] with batch dim 1: ldb = B*N, stride_b = N
    c = _canon.canonicalize((B, M, K), (K, B, N), dn([2], [0], [0], [1]))
    assert (c.b_mn_major, c.ldb, c.stride_b, c.stride_a, c.lda) == (True, B * N, N, M * K, K)
    # two contracting dims coalesce: K = K*K2
    c = _canon.canonicalize((M, K, K2), (K, K2, N), dn([1, 2], [0, 1]))
    assert (c.k, c.lda, c.ldb, c.a_mn_major, c.b_mn_major) == (K * K2, K * K2, N, False, True)
    # two free dims coalesce into M, MN-major
    c = _canon.canonicalize((K, M, M2), (K, N), dn([0], [0]))
    assert (c.m, c.a_mn_major, c.lda) == (M * M2, True, M * M2)
    # lhs broadcast over the batch (None): stride 0
    c = _canon.canonicalize((M, K), (B, K, N), ((((1,), (1,))), ((None,), (0,))))
    assert (c.batch, c.stride_a, c.stride_b, c.lda) == (B, 0, K * N, K)
    assert c.out_shape == (B, M, N)
    # batch of size 1 has no strides
    c = _canon.canonicalize((1, M, K), (1, K, N), dn([2], [1], [0], [0]))
    assert (c.batch, c.stride_a, c.stride_b) == (1, 0, 0)
    # not expressible: a string reason
    why = _canon.canonicalize((M, K, B), (K, N, B), dn([1], [0], [2], [2]))
    assert isinstance(why, str) and "transpose" in why
    why = _canon.canonicalize((M, K, K2), (K2, K, N), dn([1, 2], [1, 0]))
    assert isinstance(why, str) and "contracting" in why
    why = _canon.canonicalize((B, M, B2, K), (B, B2, K, N), dn([3], [2], [0, 2], [0, 1]))
    assert isinstance(why, str) and "batch" in why
    why = _canon.canonicalize((M, K, M2), (K, N), dn([1], [0]))
    assert isinstance(why, str) and "free" in why
    # describe() names the problem
    assert "5x6x7" in _canon.canonicalize((M, K), (K, N), dn([1], [0])).describe()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("side", ["lhs", "rhs"])
def test_broadcast_batch_pairs(path, side, seed):
    """Batch pairs with None on one side (what vmap and matmul's 2-D @ batched use): stride-0 broadcast."""
    if side == "lhs":
        lhs, rhs = rand(seed, (M, K), BF16), rand(seed + 1, (B, K, N), BF16)
        dims = (((1,), (1,)), ((None,), (0,)))
    else:
        lhs, rhs = rand(seed, (K, B, M), BF16), rand(seed + 1, (N, K), BF16)
        dims = (((0,), (1,)), ((1,), (None,)))
    f = lambda x, y: gemm_op.bind_gemm(x, y, dimension_numbers=dims, out_dtype=F32, epilogue=Epilogue(),
                                       requested=jax_tmem.current_path(), allow_tf32=True)  # run_path's
    out = run_path(path, f, lhs, rhs)
    assert out.shape == (B, M, N)
    assert_close(out, ref_dot_general(lhs, rhs, dims), F32, K)


def _highest(precision) -> bool:
    ps = precision if isinstance(precision, tuple) else (precision,)
    return all(str(p).upper().endswith("HIGHEST") for p in ps)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("precision", [None, lax.Precision.DEFAULT, lax.Precision.HIGHEST, "highest",
                                       (lax.Precision.HIGH, lax.Precision.HIGHEST)],
                         ids=["none", "DEFAULT", "HIGHEST", "str", "tuple"])
def test_precision(path, precision, seed):
    lhs, rhs = rand(seed, (B, M2, 64), F32), rand(seed + 1, (B, 64, N), F32)
    dims = dn([2], [1], [0], [0])
    out = run_path(path, lambda x, y: jax_tmem.dot_general(x, y, dims, precision=precision), lhs, rhs)
    want = lax.dot_general(lhs, rhs, dims, precision=lax.Precision.HIGHEST)
    assert out.dtype == want.dtype == F32
    tol = 2e-5 if _highest(precision) else f32_tol(2e-5)  # tf32 on a GPU unless HIGHEST
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=tol, atol=tol * 8)
    assert_close(out, ref_dot_general(lhs, rhs, dims), F32, 64)


PREFERRED = [(BF16, F32), (F32, BF16), (F16, F16), (F16, F32), (BF16, None), (F32, F16), (E4M3, F32),
             (E5M2, BF16), (E4M3, F16)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt,pref", PREFERRED, ids=[f"{np.dtype(a).name}->{p and np.dtype(p).name}"
                                                      for a, p in PREFERRED])
def test_preferred_element_type(path, dt, pref, seed):
    lhs, rhs = rand(seed, (K, M2), dt), rand(seed + 1, (N2, K), dt)
    dims = dn([0], [1])
    out = run_path(path, lambda x, y: jax_tmem.dot_general(x, y, dims, preferred_element_type=pref), lhs, rhs)
    want = lax.dot_general(lhs, rhs, dims, preferred_element_type=pref)
    assert out.dtype == want.dtype
    assert out.shape == want.shape == (M2, N2)
    assert_close(out, ref_dot_general(lhs, rhs, dims), out.dtype, K)


@pytest.mark.parametrize("path", PATHS)
def test_mixed_width_operands_promote(path, seed):
    lhs, rhs = rand(seed, (M, K), BF16), rand(seed + 1, (K, N), F32)
    out = run_path(path, lambda x, y: jax_tmem.dot_general(x, y, dn([1], [0])), lhs, rhs)
    assert out.dtype == lax.dot_general(lhs, rhs, dn([1], [0])).dtype == F32
    assert_close(out, ref_dot_general(lhs, rhs, dn([1], [0])), F32, K)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("a_dt,b_dt,want", [(E4M3, E5M2, BF16), (E5M2, E4M3, BF16), (E4M3, BF16, BF16),
                                            (F16, E5M2, F16), (E4M3, F32, F32)],
                         ids=["e4m3xe5m2", "e5m2xe4m3", "e4m3xbf16", "f16xe5m2", "e4m3xf32"])
def test_fp8_mixes_default_output(path, a_dt, b_dt, want, seed):
    """fp8 x fp8 mixes compute in (and return) bfloat16; fp8 x wider joins the wider type."""
    lhs, rhs = rand(seed, (M2, K), a_dt), rand(seed + 1, (N2, K), b_dt)
    dims = dn([1], [1])
    out = run_path(path, lambda x, y: jax_tmem.dot_general(x, y, dims), lhs, rhs)
    assert_close(out, ref_dot_general(lhs, rhs, dims), want, K)


@pytest.mark.parametrize("path", PATHS)
def test_out_sharding_none_accepted(path, seed):
    lhs, rhs = rand(seed, (M, K), F32), rand(seed + 1, (K, N), F32)
    out = run_path(path, lambda x, y: jax_tmem.dot_general(x, y, dn([1], [0]), out_sharding=None), lhs, rhs)
    assert_close(out, ref_dot_general(lhs, rhs, dn([1], [0])), F32, K)


@pytest.mark.parametrize("path", PATHS + ("auto",))
def test_int32_falls_back_to_lax(path, seed):
    rng = np.random.default_rng(seed)
    lhs = jnp.asarray(rng.integers(-50, 50, (M, K)), jnp.int32)
    rhs = jnp.asarray(rng.integers(-50, 50, (K, N)), jnp.int32)
    jax_tmem.clear_decisions()
    with jax_tmem.use_path(path):
        out = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, dn([1], [0])))(lhs, rhs)
    assert out.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(out), np.asarray(lhs) @ np.asarray(rhs))
    (d,) = jax_tmem.decisions()
    assert (d.path, d.target) == ("xla", "lax.dot_general")
    assert "dtype" in d.reason


@pytest.mark.parametrize("path", PATHS)
def test_fp8_without_preferred_type_matches_lax(path, seed):
    """fp8 x fp8 with no preferred_element_type gives lax's fp8 result (the kernels don't write fp8)."""
    lhs, rhs = rand(seed, (M, K), E4M3), rand(seed + 1, (K, N), E4M3)
    jax_tmem.clear_decisions()
    with jax_tmem.use_path(path):
        out = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, dn([1], [0])))(lhs, rhs)
    want = lax.dot_general(lhs, rhs, dn([1], [0]))
    assert out.dtype == want.dtype == E4M3
    np.testing.assert_array_equal(f64(out), f64(want))
    (d,) = jax_tmem.decisions()
    assert d.path == "xla" and "float8_e4m3fn output" in d.reason


@pytest.mark.parametrize("path", PATHS)
def test_under_jit_with_closure_and_flax_style_call(path, seed):
    """A Dense-layer style call: dot_general(x, w, (((x.ndim-1,), (0,)), ((), ()))) on 3-D x."""
    x, w = rand(seed, (2, M2, 64), BF16), rand(seed + 1, (64, N2), BF16)
    f = lambda x, w: jax_tmem.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())), None, None)
    out = run_path(path, f, x, w)
    assert out.shape == (2, M2, N2)
    assert_close(out, ref_dot_general(x, w, dn([2], [0])), BF16, 64)


# dot_general's addend c (a residual connection in the GEMM's epilogue): decode-sized M (the swap-AB and
# mma.sync decode entries on a GPU), the weight stored (N, K) and (K, N), tails in every dimension.
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("w_layout", ["NK", "KN"])
@pytest.mark.parametrize("m,n,k", [(1, 136, 264), (7, 200, 520), (16, 264, 1032), (61, 72, 136), (130, 264, 256)])
@pytest.mark.parametrize("dt,out_dt", [(BF16, BF16), (E4M3, BF16), (F16, F32)], ids=lambda x: np.dtype(x).name)
def test_dot_general_c(path, w_layout, m, n, k, dt, out_dt, seed):
    x = rand(seed, (m, k), dt)
    w = rand(seed + 1, (n, k) if w_layout == "NK" else (k, n), dt)
    r = rand(seed + 2, (m, n), out_dt, scale=4.0)
    dn = (((1,), (1,)), ((), ())) if w_layout == "NK" else (((1,), (0,)), ((), ()))
    f = lambda x, w, r: jax_tmem.dot_general(x, w, dn, preferred_element_type=out_dt, c=r)
    out = run_path(path, f, x, w, r)
    # where c goes is on the record: XLA adds it after a float32 product for M > 8, else the epilogue
    routed = [d for d in jax_tmem.decisions() if d.op == "dot_general c"]
    assert bool(routed) == (m > 8), routed
    wk = w if w_layout == "NK" else jnp.swapaxes(w, 0, 1)
    ref = ref_epilogue(ref_matmul(x, jnp.swapaxes(wk, 0, 1)), c=r)
    assert_close(out, ref, out_dt, k)
    # c really was added: without it the result is off by |c| (scale 4), far beyond rounding
    assert np.max(np.abs(f64(out) - ref_matmul(x, jnp.swapaxes(wk, 0, 1)))) > 1.0


@pytest.mark.parametrize("path", PATHS)
def test_dot_general_c_gradients(path, seed):
    """d/dx, d/dw, d/dc of sum(sin(x w^T + c)) (bf16 operands, f32 result and c) against float64."""
    x = rand(seed, (9, 40), BF16)
    w = rand(seed + 1, (24, 40), BF16)
    r = rand(seed + 2, (9, 24), F32)
    dn = (((1,), (1,)), ((), ()))
    loss = lambda x, w, r: jnp.sum(jnp.sin(jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.float32, c=r)))
    with jax_tmem.use_path(path):
        got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, w, r)
    g = np.cos(f64(x) @ f64(w).T + f64(r))
    want = (g @ f64(w), g.T @ f64(x), g)
    for gg, e, name in zip(got, want, ("x", "w", "c")):
        assert gg.dtype == (F32 if name == "c" else BF16), name
        np.testing.assert_allclose(f64(gg), e, rtol=0, atol=1e-2 * float(np.max(np.abs(e))), err_msg=name)


def test_dot_general_c_errors():
    x, w = rand(0, (4, 8), BF16), rand(1, (6, 8), BF16)
    dn = (((1,), (1,)), ((), ()))
    with pytest.raises(ValueError, match=r"c must have the result's shape \(4, 6\) and dtype bfloat16"):
        jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16, c=rand(2, (4, 5), BF16))
    with pytest.raises(ValueError, match="c must have .* dtype bfloat16, got .* float32"):
        jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16, c=rand(2, (4, 6), F32))
    with pytest.raises(ValueError, match="not combined with quantize= or recipe="):
        jax_tmem.dot_general(x, w, dn, c=rand(2, (4, 6), BF16), recipe="fp8")
    # integer operands: XLA's product plus c, exactly
    xi, wi = jnp.ones((3, 4), jnp.int8), jnp.full((4, 2), 2, jnp.int8)
    y = jax_tmem.dot_general(xi, wi, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32,
                             c=jnp.full((3, 2), 5, jnp.int32))
    assert y.dtype == jnp.int32 and np.all(np.asarray(y) == 13)

"""vmap / grad / jit of jax_tmem.matmul and dot_general, on both paths, and the HLO that vmap produces."""

from __future__ import annotations

import contextlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import jax_tmem
from conftest import (BF16, F16, F32, PATHS, assert_close, f32_tol, rand, ref_dot_general, ref_epilogue,
                      ref_matmul, run_path, seed_of, stack_refs)

# Row pitches of 16-byte multiples for float32 and bfloat16 (TMA): a forced kernel path runs on a GPU too.
M, N, K, V = 8, 16, 24, 4


def _jnp_matmul(a, b, bias=None, activation=None, alpha=1.0, c=None):
    """The float32 jnp equivalent of jax_tmem.matmul (HIGHEST precision)."""
    y = alpha * jnp.matmul(a.astype(jnp.float32), b.astype(jnp.float32), precision=lax.Precision.HIGHEST)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    if activation == "relu":
        y = jax.nn.relu(y)
    elif activation == "gelu":
        y = jax.nn.gelu(y, approximate=False)
    elif activation == "gelu_tanh":
        y = jax.nn.gelu(y, approximate=True)
    elif activation == "silu":
        y = jax.nn.silu(y)
    if c is not None:
        y = y + c.astype(jnp.float32)
    return y


# ---- vmap -----------------------------------------------------------------------------------------

# (id, x shape, w shape, in_axes, expressible without a transpose): x is "a" (M, K), w is "b" (K, N)
VMAP_CASES = [
    ("lhs_axis0", (V, M, K), (K, N), (0, None), True),
    ("lhs_axis1", (M, V, K), (K, N), (1, None), True),
    ("lhs_axis_last", (M, K, V), (K, N), (2, None), False),
    ("rhs_axis0", (M, K), (V, K, N), (None, 0), True),
    ("rhs_axis1", (M, K), (K, V, N), (None, 1), True),
    ("rhs_axis_last", (M, K), (K, N, V), (None, -1), False),
    ("both_axis0", (V, M, K), (V, K, N), (0, 0), True),
    ("both_axis1", (M, V, K), (K, V, N), (1, 1), True),
    ("both_mixed", (V, M, K), (K, V, N), (0, 1), True),
]


def _moved(x, axis):
    return np.moveaxis(np.asarray(x), axis, 0) if axis is not None else None  # its dtype kept (Ref's tf32 error)


def _vmap_ref(x, w, in_axes):
    xs, ws = _moved(x, in_axes[0]), _moved(w, in_axes[1])
    if xs is None:
        return stack_refs([ref_matmul(x, wi) for wi in ws])
    if ws is None:
        return stack_refs([ref_matmul(xi, w) for xi in xs])
    return stack_refs([ref_matmul(xi, wi) for xi, wi in zip(xs, ws)])


@pytest.mark.parametrize("path", PATHS + ("auto",))
@pytest.mark.parametrize("name,xs,ws,in_axes,expressible", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_operands(path, name, xs, ws, in_axes, expressible, seed):
    dt = (BF16, F32, F16)[seed % 3]
    x, w = rand(seed, xs, dt), rand(seed + 1, ws, dt)
    f = jax.vmap(jax_tmem.matmul, in_axes=in_axes)
    gpu = jax.default_backend() == "gpu"
    # On a GPU a float32 weight is transposed to K-major before the GEMM (tf32 is read K-major only), and the
    # transpose moves its vmapped axis to the front: expressible then.
    expressible = expressible or (gpu and dt == F32)
    if path == "kernel" and not expressible:
        with jax_tmem.use_path("kernel"), pytest.raises(ValueError, match="path 'kernel' was forced"):
            jax.jit(f)(x, w)
        return
    out = run_path(path, f, x, w, expect=("any" if gpu else "xla") if path == "auto" else path)
    assert_close(out, _vmap_ref(x, w, in_axes), dt, K)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bias_axis", [None, 0], ids=["bias_unbatched", "bias_batched"])
@pytest.mark.parametrize("c_axis", ["none", None, 0], ids=["no_c", "c_unbatched", "c_batched"])
def test_vmap_epilogue(path, bias_axis, c_axis, seed):
    x = rand(seed, (V, M, K), BF16)
    w = rand(seed + 1, (K, N), BF16)
    bias = rand(seed + 2, (V, N) if bias_axis == 0 else (N,), F32)
    c = None if c_axis == "none" else rand(seed + 3, (V, M, N) if c_axis == 0 else (M, N), F32)
    act = ("gelu", "silu", "relu", "gelu_tanh")[seed % 4]

    def f(x, w, bias, c):
        return jax_tmem.matmul(x, w, bias=bias, activation=act, alpha=0.5, c=c, out_dtype=jnp.float32)

    vf = jax.vmap(f, in_axes=(0, None, bias_axis, None if c_axis == "none" else c_axis))
    out = run_path(path, vf, x, w, bias, c)
    bias_i = (lambda i: bias[i]) if bias_axis == 0 else (lambda i: bias)
    c_i = (lambda i: None) if c is None else ((lambda i: c[i]) if c_axis == 0 else (lambda i: c))
    ref = np.stack([ref_epilogue(ref_matmul(x[i], w), alpha=0.5, bias=bias_i(i), activation=act, c=c_i(i))
                    for i in range(V)])
    assert_close(out, ref, F32, K)


@pytest.mark.parametrize("path", PATHS)
def test_nested_vmap(path, seed):
    # two vmaps over the same operand (x), weight unbatched, fused bias + activation
    x = rand(seed, (2, 3, M, K), F32)
    w = rand(seed + 1, (K, N), F32)
    bias = rand(seed + 2, (N,), F32)
    f = jax.vmap(jax.vmap(lambda x, w: jax_tmem.matmul(x, w, bias=bias, activation="relu"), in_axes=(0, None)),
                 in_axes=(0, None))
    out = run_path(path, f, x, w)
    assert out.shape == (2, 3, M, N)
    ref = ref_epilogue(ref_matmul(x, w), bias=bias, activation="relu")
    assert_close(out, ref, F32, K)
    # doubly batched operands: vmap over both, twice
    x2 = rand(seed + 3, (2, 3, M, K), BF16)
    w2 = rand(seed + 4, (2, 3, K, N), BF16)
    out2 = run_path(path, jax.vmap(jax.vmap(jax_tmem.matmul)), x2, w2)
    assert_close(out2, ref_matmul(x2, w2), BF16, K)


@pytest.mark.parametrize("path", PATHS + ("auto",))
def test_nested_vmap_over_different_operands(path, seed):
    """Outer vmap over w, inner over x: each operand is broadcast over one of the two batch dims, which
    one batch stride per operand cannot express; "kernel" says so, the other paths compute it."""
    x = rand(seed, (3, M, K), F32)       # vmapped by the inner vmap
    w = rand(seed + 1, (2, K, N), F32)   # vmapped by the outer vmap
    f = jax.vmap(jax.vmap(jax_tmem.matmul, in_axes=(0, None)), in_axes=(None, 0))
    if path == "kernel":
        with jax_tmem.use_path("kernel"), pytest.raises(ValueError, match="broadcast over some batch dims"):
            jax.jit(f)(x, w)
        return
    # (on a GPU the unbatched trace decides first, for the kernel, with the float32 weight's transpose to
    # K-major; vmap's batched GEMM, inexpressible, then decides again: XLA, with the reason)
    gpu = jax.default_backend() == "gpu"
    out = run_path(path, f, x, w, expect="any" if gpu else "xla")
    last = [d for d in jax_tmem.decisions() if d.op == "gemm"][-1]
    assert last.path == "xla", jax_tmem.decisions()
    if gpu and path == "auto":
        assert "broadcast over some batch dims" in last.reason, last
    assert out.shape == (2, 3, M, N)
    ref = stack_refs([ref_matmul(x, w[j]) for j in range(2)])
    assert_close(out, ref, F32, K)


@pytest.mark.parametrize("path", PATHS)
def test_vmap_dot_general(path, seed):
    """vmap of dot_general with batch dims already present: the vmapped axis becomes another batch dim."""
    lhs = rand(seed, (V, 3, M, K), F32)
    rhs = rand(seed + 1, (3, N, K), F32)
    rhs_v = rand(seed + 2, (V, 3, N, K), F32)
    dims = (((2,), (2,)), ((0,), (0,)))
    # both operands vmapped
    f = jax.vmap(lambda l, r: jax_tmem.dot_general(l, r, dims), in_axes=(0, 0))
    out = run_path(path, f, lhs, rhs_v)
    ref = stack_refs([ref_dot_general(lhs[i], rhs_v[i], dims) for i in range(V)])
    assert_close(out, ref, F32, K)
    # only lhs vmapped: rhs is broadcast over the new batch dim but not over its own -> XLA only
    g = jax.vmap(lambda l, r: jax_tmem.dot_general(l, r, dims), in_axes=(0, None))
    if path == "kernel":
        with jax_tmem.use_path("kernel"), pytest.raises(ValueError, match="broadcast over some batch dims"):
            jax.jit(g)(lhs, rhs)
    else:
        out = run_path(path, g, lhs, rhs)
        ref = stack_refs([ref_dot_general(lhs[i], rhs, dims) for i in range(V)])
        assert_close(out, ref, F32, K)


# ---- no per-element loop under vmap: HLO inspection ------------------------------------------------

_CC = re.compile(r"custom_call\s*@jax_tmem_gemm\(|custom_call_target\s*=\s*\"jax_tmem_gemm\"")


def _gemm_calls(hlo: str):
    return [line for line in hlo.splitlines() if _CC.search(line)]


def _operand_types(line: str):
    m = re.search(r":\s*\(([^)]*)\)\s*->", line)
    assert m, line
    return [t.strip() for t in re.findall(r"tensor<[^>]*>", m.group(1))]


def _lower(fn, *args):
    with jax_tmem.use_path("kernel"):
        return jax.jit(fn).lower(*args).as_text()


def test_vmap_lhs_is_one_custom_call_without_weight_broadcast(seed):
    x, w = rand(seed, (V, M, K), BF16), rand(seed + 1, (K, N), BF16)
    hlo = _lower(jax.vmap(jax_tmem.matmul, in_axes=(0, None)), x, w)
    calls = _gemm_calls(hlo)
    assert len(calls) == 1, hlo
    assert _operand_types(calls[0]) == [f"tensor<{V}x{M}x{K}xbf16>", f"tensor<{K}x{N}xbf16>"]
    assert f"tensor<{V}x{K}x{N}xbf16>" not in hlo, "the unbatched weight was broadcast"
    assert "while" not in hlo and "stablehlo.dot" not in hlo


def test_vmap_rhs_is_one_custom_call_without_lhs_broadcast(seed):
    x, w = rand(seed, (M, K), BF16), rand(seed + 1, (V, K, N), BF16)
    hlo = _lower(jax.vmap(jax_tmem.matmul, in_axes=(None, 0)), x, w)
    calls = _gemm_calls(hlo)
    assert len(calls) == 1, hlo
    assert _operand_types(calls[0]) == [f"tensor<{M}x{K}xbf16>", f"tensor<{V}x{K}x{N}xbf16>"]
    assert f"tensor<{V}x{M}x{K}xbf16>" not in hlo
    assert "while" not in hlo


def test_nested_vmap_is_one_custom_call(seed):
    x = rand(seed, (2, 3, M, K), BF16)
    w = rand(seed + 1, (K, N), BF16)
    bias = rand(seed + 2, (N,), F32)
    f = jax.vmap(jax.vmap(lambda x, w, b: jax_tmem.matmul(x, w, bias=b, activation="gelu"),
                          in_axes=(0, None, None)), in_axes=(0, None, None))
    hlo = _lower(f, x, w, bias)
    calls = _gemm_calls(hlo)
    assert len(calls) == 1, hlo
    assert _operand_types(calls[0]) == [f"tensor<2x3x{M}x{K}xbf16>", f"tensor<{K}x{N}xbf16>", f"tensor<{N}xf32>"]
    assert "while" not in hlo and f"x{K}x{N}xbf16>" not in hlo.replace(f"tensor<{K}x{N}xbf16>", "")
    with jax_tmem.use_path("kernel"):
        out = jax.jit(f)(x, w, bias)
    assert_close(out, ref_epilogue(ref_matmul(x, w), bias=bias, activation="gelu"), BF16, K)


def test_vmapped_bias_is_one_custom_call(seed):
    x, w, bias = rand(seed, (V, M, K), BF16), rand(seed + 1, (K, N), BF16), rand(seed + 2, (V, N), F32)
    hlo = _lower(jax.vmap(lambda x, b: jax_tmem.matmul(x, w, bias=b, activation="gelu")), x, bias)
    calls = _gemm_calls(hlo)
    assert len(calls) == 1, hlo
    assert _operand_types(calls[0]) == [f"tensor<{V}x{M}x{K}xbf16>", f"tensor<{K}x{N}xbf16>"]


def test_unbatched_bias_stays_fused(seed):
    x, w, bias = rand(seed, (V, M, K), BF16), rand(seed + 1, (K, N), BF16), rand(seed + 2, (N,), F32)
    hlo = _lower(jax.vmap(lambda x: jax_tmem.matmul(x, w, bias=bias, activation="silu")), x)
    calls = _gemm_calls(hlo)
    assert len(calls) == 1
    assert "operands = 7" in calls[0] and "activation = 4" in calls[0]  # a, b, bias (operands.def bits 0-2)
    assert len(_operand_types(calls[0])) == 3


# ---- grad ---------------------------------------------------------------------------------------

def _grad_decisions_ok(path):
    """Every decision took ``path``; on a GPU a forced kernel path's gradient GEMMs (path "prefer") may take
    XLA where their layout has a row pitch TMA cannot map (e.g. 3 tokens' float32 rows), with that reason."""
    ds = jax_tmem.decisions()
    assert ds
    ok = lambda d: d.path == path or (path == "kernel" and jax.default_backend() == "gpu" and d.op == "gemm"
                                      and "is not a multiple of 16 (TMA)" in d.reason)
    assert all(ok(d) for d in ds), [str(d) for d in ds]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "silu"])
def test_check_grads_f32(path, activation, seed):
    m, n, k = 5, 6, 7  # float32 finite differences stay within check_grads' 1e-2 for short sums
    a, b = rand(seed, (m, k), F32), rand(seed + 1, (k, n), F32)
    bias, c = rand(seed + 2, (n,), F32), rand(seed + 3, (m, n), F32)
    f = lambda a, b, bias, c: jax_tmem.matmul(a, b, bias=bias, c=c, activation=activation, alpha=0.75)
    precision = contextlib.nullcontext()
    if jax.default_backend() == "gpu":
        if path == "kernel":
            pytest.skip("float32 on the GPU kernels multiplies as tf32 (10 mantissa bits): finite differences at "
                        "check_grads' eps are below its resolution; test_grads_match_jnp_f32 checks those gradients")
        precision = jax.default_matmul_precision("float32")  # XLA's dot in float32, as in JAX's own tests
    with jax_tmem.use_path(path), precision:
        check_grads(f, (a, b, bias, c), order=1, modes=("rev",), atol=1e-2, rtol=1e-2)
        check_grads(lambda a, b: jax_tmem.matmul(a, b, activation=activation), (a, b), order=1, modes=("rev",),
                    atol=1e-2, rtol=1e-2)
    _grad_decisions_ok(path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
def test_grads_match_jnp_f32(path, activation, seed):
    a, b = rand(seed, (2, M, K), F32), rand(seed + 1, (2, K, N), F32)
    bias, c = rand(seed + 2, (N,), F32), rand(seed + 3, (2, M, N), F32)
    r = rand(seed + 4, (2, M, N), F32)
    loss = lambda fn: (lambda a, b, bias, c: jnp.sum(fn(a, b, bias=bias, activation=activation, alpha=1.5, c=c) * r))
    with jax_tmem.use_path(path):
        got = jax.jit(jax.grad(loss(jax_tmem.matmul), argnums=(0, 1, 2, 3)))(a, b, bias, c)
    _grad_decisions_ok(path)
    want = jax.grad(loss(_jnp_matmul), argnums=(0, 1, 2, 3))(a, b, bias, c)
    for g, w, name in zip(got, want, ("a", "b", "bias", "c")):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(w))),
                                   err_msg=name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("activation", [None, "gelu_tanh", "relu"])
def test_grads_bf16_vs_jnp(path, activation, seed):
    a, b = rand(seed, (17, 64), BF16), rand(seed + 1, (64, 40), BF16)
    bias = rand(seed + 2, (40,), F32)
    r = rand(seed + 3, (17, 40), F32)
    loss = lambda fn: (lambda a, b, bias: jnp.sum(fn(a, b, bias=bias, activation=activation).astype(jnp.float32) * r))
    with jax_tmem.use_path(path):
        ga, gb, gbias = jax.jit(jax.grad(loss(jax_tmem.matmul), argnums=(0, 1, 2)))(a, b, bias)
    _grad_decisions_ok(path)
    assert ga.dtype == BF16 and gb.dtype == BF16 and gbias.dtype == F32
    wa, wb, wbias = jax.grad(loss(_jnp_matmul), argnums=(0, 1, 2))(a.astype(F32), b.astype(F32), bias)
    assert_close(ga, wa, BF16, 40, factor=2.0)
    assert_close(gb, wb, BF16, 17, factor=2.0)
    assert_close(gbias, wbias, F32, 17, factor=2.0, tol_dtype=BF16)  # f32, but sums bf16-rounded cotangents


@pytest.mark.parametrize("path", PATHS)
def test_vmap_of_grad_per_example(path, seed):
    xs, w = rand(seed, (V, 3, K), F32), rand(seed + 1, (K, N), F32)
    ys = rand(seed + 2, (V, 3, N), F32)
    loss = lambda fn: (lambda x, w, y: jnp.sum((fn(x, w, activation="silu") - y) ** 2))
    with jax_tmem.use_path(path):
        got = jax.jit(jax.vmap(jax.grad(loss(jax_tmem.matmul), argnums=1), in_axes=(0, None, 0)))(xs, w, ys)
    _grad_decisions_ok(path)
    want = jnp.stack([jax.grad(loss(_jnp_matmul), argnums=1)(xs[i], w, ys[i]) for i in range(V)])
    assert got.shape == (V, K, N)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(want))))


@pytest.mark.parametrize("path", ["kernel", "xla"])
def test_grad_through_batched_and_broadcast_matmul(path, seed):
    """2-D a against batched b (a broadcast over the batch): da sums over the batch."""
    a, b = rand(seed, (M, K), F32), rand(seed + 1, (3, K, N), F32)
    r = rand(seed + 2, (3, M, N), F32)
    loss = lambda fn: (lambda a, b: jnp.sum(fn(a, b) * r))
    with jax_tmem.use_path(path):
        ga, gb = jax.jit(jax.grad(loss(jax_tmem.matmul), argnums=(0, 1)))(a, b)
    if path == "kernel":
        # dA contracts g over (batch, N), which are not adjacent in g: under a forced kernel path that one
        # gradient GEMM falls back to XLA with the reason; the forward and dB GEMMs stay on the kernel.
        ds = jax_tmem.decisions()
        xla = [d for d in ds if d.path == "xla" and d.op == "gemm"]
        assert len(xla) == 1 and "not adjacent" in xla[0].reason, [str(d) for d in ds]
        assert sum(d.path == "kernel" for d in ds if d.op == "gemm") == 2, [str(d) for d in ds]
    else:
        _grad_decisions_ok(path)
    wa, wb = jax.grad(loss(_jnp_matmul), argnums=(0, 1))(a, b)
    assert ga.shape == a.shape and gb.shape == b.shape
    np.testing.assert_allclose(np.asarray(ga), np.asarray(wa), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(wa))))
    np.testing.assert_allclose(np.asarray(gb), np.asarray(wb), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(wb))))


GRAD_LAYOUTS = [
    ("mk,kn", (M, K), (K, N), (((1,), (0,)), ((), ()))),
    ("km,nk", (K, M), (N, K), (((0,), (1,)), ((), ()))),
    ("batch_middle", (M, 3, K), (3, K, N), (((2,), (1,)), ((1,), (0,)))),
    ("batch_middle_rhs", (3, M, K), (K, 3, N), (((2,), (0,)), ((0,), (1,)))),
    ("two_contract", (M, K, 2), (K, 2, N), (((1, 2), (0, 1)), ((), ()))),
    ("two_batch_two_free", (2, 3, M, 2, K), (2, 3, K, N), (((4,), (2,)), ((0, 1), (0, 1)))),
    ("batch_then_contract_mn", (K, 3, M), (3, K, N), (((0,), (1,)), ((1,), (0,)))),
    ("vector", (K,), (K, N), (((0,), (0,)), ((), ()))),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name,ls,rs,dims", GRAD_LAYOUTS, ids=[g[0] for g in GRAD_LAYOUTS])
def test_grad_dot_general_vs_lax(path, name, ls, rs, dims, seed):
    lhs, rhs = rand(seed, ls, F32), rand(seed + 1, rs, F32)
    out_shape = lax.dot_general(lhs, rhs, dims).shape
    r = rand(seed + 2, out_shape, F32)
    with jax_tmem.use_path(path):
        got = jax.jit(jax.grad(lambda x, y: jnp.sum(jax_tmem.dot_general(x, y, dims) * r), argnums=(0, 1)))(lhs, rhs)
    _grad_decisions_ok(path)
    want = jax.grad(lambda x, y: jnp.sum(lax.dot_general(x, y, dims, precision=lax.Precision.HIGHEST) * r),
                    argnums=(0, 1))(lhs, rhs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(w))))


def test_grad_dot_general_nonexpressible_layout_on_xla(seed):
    """A layout that needs a transpose (batch dims trailing): grad still works on the xla path."""
    dims = (((1,), (0,)), ((2,), (2,)))
    lhs, rhs = rand(seed, (M, K, 3), F32), rand(seed + 1, (K, N, 3), F32)
    r = rand(seed + 2, (3, M, N), F32)
    for path in ("xla", "auto"):
        with jax_tmem.use_path(path):
            got = jax.jit(jax.grad(lambda x, y: jnp.sum(jax_tmem.dot_general(x, y, dims) * r), argnums=(0, 1)))(lhs, rhs)
        want = jax.grad(lambda x, y: jnp.sum(lax.dot_general(x, y, dims, precision="highest") * r),
                        argnums=(0, 1))(lhs, rhs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(w))))


@pytest.mark.parametrize("path", PATHS)
def test_jit_of_grad_equals_grad(path, seed):
    a, b = rand(seed, (M, K), F32), rand(seed + 1, (K, N), F32)
    loss = lambda a, b: jnp.sum(jax_tmem.matmul(a, b, activation="gelu") ** 2)
    with jax_tmem.use_path(path):
        eager = jax.grad(loss, argnums=(0, 1))(a, b)
        jitted = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(e), np.asarray(j), rtol=1e-5, atol=1e-5)
    want = jax.grad(lambda a, b: jnp.sum(_jnp_matmul(a, b, activation="gelu") ** 2), argnums=(0, 1))(a, b)
    for e, w in zip(eager, want):
        np.testing.assert_allclose(np.asarray(e), np.asarray(w), rtol=f32_tol(1e-4), atol=f32_tol(1e-4) * float(jnp.max(jnp.abs(w))))


def test_grad_hlo_uses_kernel_for_backward(seed):
    """Under path "kernel", forward and both backward GEMMs are custom calls (no XLA dot)."""
    a, b = rand(seed, (M, K), BF16), rand(seed + 1, (K, N), BF16)
    hlo = _lower(jax.grad(lambda a, b: jnp.sum(jax_tmem.matmul(a, b).astype(jnp.float32) ** 2), argnums=(0, 1)), a, b)
    calls = _gemm_calls(hlo)
    assert len(calls) == 3, hlo
    # forward (5x7 @ 7x6), dA = g . B^T (B read K-major), dB = A^T . g (both read MN-major)
    assert sorted(_operand_types(c)[0] for c in calls) == sorted(
        [f"tensor<{M}x{K}xbf16>", f"tensor<{M}x{N}xbf16>", f"tensor<{M}x{K}xbf16>"])
    assert "stablehlo.dot" not in hlo


@pytest.mark.parametrize("recipe", ["bf16", "fp8"])
def test_remat_policy_keeps_the_gemm_outputs(recipe):
    """jax.checkpoint_policies.dots_saveable matches lax.dot_general only, so under remat with it every jax_tmem GEMM
    of the forward pass ran again in the backward (found 2026-11-28); jax_tmem.checkpoint_policies.dots_saveable keeps
    their outputs: the gradient's program holds as many GEMMs as with everything_saveable, and the same values. Every
    policy's gradients are finite: the fp8 recipe's e4m3 residuals went NaN when saved (JAX's reduce_precision of
    saved residuals treats e4m3fn's top exponent as infinity), until they travelled as bytes."""
    s = seed_of("remat-policy", recipe)
    x, w1, w2 = rand(s, (16, 64), F32), rand(s + 1, (64, 64), F32, scale=0.2), rand(s + 2, (64, 32), F32, scale=0.2)
    dn = (((1,), (0,)), ((), ()))
    f = lambda w1, w2, x: jnp.sum(jnp.tanh(jax_tmem.dot_general(jnp.tanh(jax_tmem.dot_general(x, w1, dn, recipe=recipe)),
                                                                w2, dn, recipe=recipe)))
    pols = {"nothing": jax.checkpoint_policies.nothing_saveable, "jax": jax.checkpoint_policies.dots_saveable,
            "ours": jax_tmem.checkpoint_policies.dots_saveable, "all": jax.checkpoint_policies.everything_saveable}
    gemms, grads = {}, {}
    for name, pol in pols.items():
        g = jax.grad(jax.checkpoint(f, policy=pol), argnums=(0, 1))
        gemms[name] = str(jax.make_jaxpr(g)(w1, w2, x)).count("jax_tmem_gemm[")
        grads[name] = jax.jit(g)(w1, w2, x)
    assert gemms["ours"] == gemms["all"] < gemms["jax"] == gemms["nothing"], gemms
    for name, g in grads.items():
        assert all(np.isfinite(np.asarray(t)).all() for t in jax.tree.leaves(g)), name
    for a, b in zip(jax.tree.leaves(grads["ours"]), jax.tree.leaves(grads["all"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

"""Bad input raises at trace time with a useful message; the CPU FFI handler reports inconsistent
attributes as an error (a Python exception), never a crash."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import jax_tmem
from jax_tmem._core import ext as _ext
from conftest import BF16, F16, F32, PATHS, rand

M, N, K = 3, 4, 5
DN = (((1,), (0,)), ((), ()))


@pytest.fixture
def ab(seed):
    return rand(seed, (M, K), F32), rand(seed + 1, (K, N), F32)


def _raises(exc, match, fn, *args):
    """``fn(*args)`` raises ``exc`` (message matching ``match``) while tracing under jit, on every path;
    nothing is compiled or run."""
    for path in PATHS + ("auto",):
        with jax_tmem.use_path(path):
            with pytest.raises(exc, match=match) as info:
                jax.jit(lambda *a: fn(*a)).trace(*args)
    return info


# ---- matmul argument checks ---------------------------------------------------------------------

@pytest.mark.parametrize("which", ["a", "b"])
def test_rank0_operand(ab, which):
    a, b = ab
    s = jnp.float32(2.0)
    args = (s, b) if which == "a" else (a, s)
    _raises(ValueError, r"rank >= 1.*\(\)", jax_tmem.matmul, *args)


def test_k_mismatch_mentions_shapes(seed):
    a, b = rand(seed, (M, K), F32), rand(seed + 1, (K + 1, N), F32)
    _raises(ValueError, r"\(3, 5\).*K=5.*\(6, 4\).*K=6",
            jax_tmem.matmul, a, b)
    # 1-D operands too
    _raises(ValueError, "contracting",
            jax_tmem.matmul, rand(seed, (K,), F32), rand(seed + 1, (K + 2,), F32))


def test_batch_mismatch(seed):
    a, b = rand(seed, (2, M, K), F32), rand(seed + 1, (3, K, N), F32)
    _raises(ValueError, "broadcast",
            jax_tmem.matmul, a, b)


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.complex64, jnp.bool_, jnp.uint8])
@pytest.mark.parametrize("which", ["a", "b"])
def test_unsupported_operand_dtype(ab, which, dtype):
    a, b = ab
    if which == "a":
        a = a.astype(dtype)
    else:
        b = b.astype(dtype)
    _raises(TypeError, rf"\b{which} has dtype {np.dtype(dtype).name}.*supported: .*bfloat16.*float8_e4m3fn",
            jax_tmem.matmul, a, b)


def test_float64_operand_rejected_when_x64(ab):
    a, b = ab
    a64 = np.asarray(a, np.float64)
    before = bool(getattr(jax.config, "jax_enable_x64", False))
    try:
        try:
            jax.config.update("jax_enable_x64", True)
        except Exception as e:  # pragma: no cover - a JAX without the flag
            pytest.skip(f"cannot enable float64: {e}")
        x = jnp.asarray(a64)
        if x.dtype != np.float64:
            pytest.skip("this JAX cannot enable float64")
        with pytest.raises(TypeError, match=r"\ba has dtype float64"):
            jax_tmem.matmul(x, b)
        with pytest.raises(TypeError, match=r"\bb has dtype float64"):
            jax_tmem.matmul(b.T, x.T)
    finally:
        jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], "abc", 3.0, None, (1.0, 2.0)], ids=["list", "str", "float", "None", "tuple"])
@pytest.mark.parametrize("which", ["a", "b"])
def test_non_array_operands(ab, which, bad):
    a, b = ab
    args = (bad, b) if which == "a" else (a, bad)
    with pytest.raises(TypeError, match=rf"\b{which} must be a JAX or NumPy array, got {type(bad).__name__}"):
        jax_tmem.matmul(*args)


def test_numpy_operands_accepted(ab):
    a, b = ab
    out = jax_tmem.matmul(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) @ np.asarray(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["tanh", "RELU", "gelu_erf", "", 1])
def test_unknown_activation_lists_allowed(ab, activation):
    _raises(ValueError, r"activation=.*not supported.*'relu'.*'gelu'.*'gelu_tanh'.*'silu'",
            lambda a, b: jax_tmem.matmul(a, b, activation=activation), *ab)


@pytest.mark.parametrize("shape", [(K,), (N, 1), (1, N), (N + 1,), ()])
def test_bias_wrong_shape(ab, shape, seed):
    bias = rand(seed + 5, shape, F32)
    _raises(ValueError, rf"bias must have shape \(N,\) = \({N},\), got {repr(shape).replace('(', '[(]').replace(')', '[)]')}",
            lambda a, b, bias: jax_tmem.matmul(a, b, bias=bias), *ab, bias)


def test_bias_with_1d_b_and_int_bias(ab, seed):
    a, b = ab
    _raises(ValueError, "bias needs a 2-D b", lambda a, b: jax_tmem.matmul(a, b[:, 0], bias=rand(seed, (1,), F32)),
            a, b)
    with pytest.raises(TypeError, match="bias must be floating point"):
        jax_tmem.matmul(a, b, bias=jnp.arange(N, dtype=jnp.int32))
    with pytest.raises(TypeError, match="bias must be a JAX or NumPy array"):
        jax_tmem.matmul(a, b, bias=[1.0] * N)


@pytest.mark.parametrize("out_dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int32, jnp.int8, "float64",
                                       jnp.complex64])
def test_bad_out_dtype(ab, out_dtype):
    _raises(TypeError, rf"out_dtype={np.dtype(out_dtype).name} is not supported.*float32, bfloat16, float16",
            lambda a, b: jax_tmem.matmul(a, b, out_dtype=out_dtype), *ab)


@pytest.mark.parametrize("c_shape,c_dtype", [((N, M), F32), ((M, N, 1), F32), ((M, N), BF16), ((1, N), F32),
                                             ((M, N), F16)])
def test_c_wrong_shape_or_dtype(ab, c_shape, c_dtype, seed):
    c = rand(seed + 7, c_shape, c_dtype)
    _raises(ValueError, r"c must have the result's shape \(3, 4\) and dtype float32",
            lambda a, b, c: jax_tmem.matmul(a, b, c=c), *ab, c)


@pytest.mark.parametrize("alpha", [np.float32(2.0), jnp.float32(2.0), True, "2", None])
def test_alpha_must_be_python_float(ab, alpha):
    with pytest.raises(TypeError, match="alpha must be a Python float"):
        jax_tmem.matmul(*ab, alpha=alpha)


def test_alpha_int_is_accepted(ab):
    a, b = ab
    out = jax_tmem.matmul(a, b, alpha=3)
    np.testing.assert_allclose(np.asarray(out), 3 * (np.asarray(a) @ np.asarray(b)), rtol=1e-5, atol=1e-5)


INVALID_PATH_BUG = ("BUG: matmul/dot_general do not validate their path= argument: an unknown value such as "
                    "'XLA' or 'gpu' is not 'xla'/'auto', so it silently behaves like 'kernel'")


@pytest.mark.parametrize("fn", ["matmul", "dot_general"])
@pytest.mark.parametrize("bad_path", ["gpu", "XLA", "Kernel"])
def test_invalid_path_argument(ab, bad_path, fn):
    a, b = ab
    call = (lambda: jax_tmem.matmul(a, b, path=bad_path)) if fn == "matmul" else (
        lambda: jax_tmem.dot_general(a, b, DN, path=bad_path))
    with pytest.raises(ValueError, match="path"):
        call()


def test_invalid_use_path_and_env(monkeypatch, ab):
    with pytest.raises(ValueError, match=r"path='fast'.*auto.*kernel.*xla"):
        with jax_tmem.use_path("fast"):
            pass
    monkeypatch.setenv("JAX_TMEM_PATH", "turbo")
    with pytest.raises(ValueError, match="JAX_TMEM_PATH='turbo'"):
        jax_tmem.matmul(*ab)


# ---- dot_general argument checks ----------------------------------------------------------------

def test_dot_general_mismatched_contracting_dims(seed):
    lhs, rhs = rand(seed, (M, K), F32), rand(seed + 1, (N, K + 1), F32)
    _raises(ValueError, r"contracting dim lhs\[1\]=5 != rhs\[1\]=6.*\(3, 5\).*\(4, 6\)",
            lambda x, y: jax_tmem.dot_general(x, y, (((1,), (1,)), ((), ()))), lhs, rhs)


def test_dot_general_bad_dimension_numbers(ab, seed):
    a, b = ab
    with pytest.raises(ValueError, match="1 contracting dims and rhs 0"):
        jax_tmem.dot_general(a, b, (((1,), ()), ((), ())))
    with pytest.raises(ValueError, match=r"lhs dims \(2,\) are out of range"):
        jax_tmem.dot_general(a, b, (((2,), (0,)), ((), ())))
    with pytest.raises(ValueError, match=r"rhs dims .* out of range or repeated"):
        jax_tmem.dot_general(a, b, (((1,), (0,)), ((0,), (0,))))
    with pytest.raises(ValueError, match="batch dims"):
        jax_tmem.dot_general(rand(seed, (2, M, K), F32), rand(seed, (2, K, N), F32), (((2,), (1,)), ((0,), ())))
    with pytest.raises(ValueError, match=r"batch dim lhs\[0\]=2 != rhs\[0\]=3"):
        jax_tmem.dot_general(rand(seed, (2, M, K), F32), rand(seed, (3, K, N), F32), (((2,), (1,)), ((0,), (0,))))


def test_dot_general_out_sharding_and_unknown_kwargs(ab):
    a, b = ab
    with pytest.raises(TypeError, match="out_sharding must be a jax.sharding.NamedSharding or PartitionSpec, got object"):
        jax_tmem.dot_general(a, b, DN, out_sharding=object())
    with pytest.raises(ValueError, match="is a PartitionSpec but no mesh is set"):
        jax_tmem.dot_general(a, b, DN, out_sharding=jax.sharding.PartitionSpec("x"))
    with pytest.raises(TypeError, match="jax_tmem.einsum: out_sharding must be"):
        jax_tmem.einsum("mk,kn->mn", a, b, out_sharding="x")
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['foo'\]"):
        jax_tmem.dot_general(a, b, DN, foo=1)


def test_dot_general_non_array_and_bad_preferred(ab):
    a, b = ab
    with pytest.raises(TypeError, match="lhs must be a JAX or NumPy array, got list"):
        jax_tmem.dot_general([[1.0] * K] * M, b, DN)
    with pytest.raises(TypeError, match="rhs must be a JAX or NumPy array, got str"):
        jax_tmem.dot_general(a, "b", DN)
    # an output type the kernels do not write is lax.dot_general's to take or refuse (as it does)
    for other in (jnp.int32, jnp.float8_e4m3fn):
        try:
            want = lax.dot_general(a, b, DN, preferred_element_type=other).dtype
        except TypeError as e:
            with pytest.raises(TypeError, match=re.escape(str(e).split("\n")[0][:40])):
                jax_tmem.dot_general(a, b, DN, preferred_element_type=other)
            continue
        assert jax_tmem.dot_general(a, b, DN, preferred_element_type=other).dtype == want


def test_kernel_forced_on_non_expressible_layout(seed):
    lhs, rhs = rand(seed, (M, K, 2), F32), rand(seed + 1, (K, N, 2), F32)
    dims = (((1,), (0,)), ((2,), (2,)))
    with jax_tmem.use_path("kernel"):
        with pytest.raises(ValueError, match=r"path 'kernel' was forced but no kernel takes float32\[3, 5, 2\] x "
                                             r"float32\[5, 4, 2\].*transpose"):
            jax.jit(lambda x, y: jax_tmem.dot_general(x, y, dims))(lhs, rhs)
    # the per-call path argument forces it too
    with pytest.raises(ValueError, match="path 'kernel' was forced"):
        jax_tmem.dot_general(lhs, rhs, dims, path="kernel")
    # ... and "auto" falls back (same numbers as lax)
    out = jax_tmem.dot_general(lhs, rhs, dims, path="auto")
    want = jax.lax.dot_general(lhs, rhs, dims, precision="highest")
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-5)


# ---- the CPU FFI handler validates its attributes ------------------------------------------------

def _attrs(**over):
    geometry = dict(operands=0b11, batch=1, m=M, n=N, k=K, a_mn_major=False, b_mn_major=True, lda=K, ldb=N,
                    stride_a=0, stride_b=0)
    return _ext.gemm_attrs(**{**geometry, **over})


BIAS, C = 0b111, 0b1011  # operands masks: a, b + bias (role 2) / + c (role 3), operands.def


def _ffi(*args, out_shape=(M, N), out_dtype=jnp.float32, **over):
    ok, why = _ext.ensure_registered("cpu")
    assert ok, why
    call = jax.ffi.ffi_call("jax_tmem_gemm", (jax.ShapeDtypeStruct(out_shape, out_dtype),
                                              jax.ShapeDtypeStruct((1,), jnp.float32)))  # out, workspace
    return jax.block_until_ready(jax.jit(lambda *a: call(*a, **_attrs(**over))[0])(*args))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="calls the CPU handler")
def test_ffi_direct_call_valid(ab):
    a, b = ab
    out = _ffi(a, b)
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) @ np.asarray(b), rtol=1e-5, atol=1e-5)


FFI_BAD = [
    ("m_too_large", dict(m=30), "operand a: view needs"),
    ("lda_too_large", dict(lda=50), "operand a: view needs"),
    ("n_too_large", dict(n=40, ldb=40), "operand b: view needs"),
    ("ldb_too_small", dict(ldb=2), "ldb 2 < row length 4"),
    ("k_zero", dict(k=0), "must be >= 1"),
    ("batch_stride_exceeds", dict(batch=3, m=1, stride_a=K * 2), "operand a: view needs 25 elements, buffer has 15"),
    ("negative_stride", dict(batch=1, stride_b=-4), "negative stride"),
    ("bad_activation", dict(activation=9), "unknown activation code 9"),
    ("missing_bias", dict(operands=BIAS), r"expected 3 input buffers \(a, b, bias\), got 2"),
    ("no_b", dict(operands=0b101), "operands mask 5 must hold a and b"),
    ("unknown_role", dict(operands=1 << 20), "operands mask 1048576 must hold"),
    ("out_size", dict(m=2), "output has 12 elements"),
    ("bad_splits", dict(splits=-2000), "splits must be in"),
]


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="calls the CPU handler")
@pytest.mark.parametrize("name,over,msg", FFI_BAD, ids=[x[0] for x in FFI_BAD])
def test_ffi_handler_rejects_inconsistent_attributes(ab, name, over, msg):
    a, b = ab
    with pytest.raises(Exception, match=rf"jax_tmem gemm: .*{msg}") as info:
        _ffi(a, b, **over)
    assert isinstance(info.value, RuntimeError), type(info.value)  # XlaRuntimeError / JaxRuntimeError
    # the process is fine afterwards
    out = _ffi(a, b)
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) @ np.asarray(b), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="calls the CPU handler")
def test_ffi_handler_rejects_bad_optional_buffers(ab, seed):
    a, b = ab
    bias_i32 = jnp.arange(N, dtype=jnp.int32)
    with pytest.raises(RuntimeError, match="jax_tmem gemm: bias must be float32, got a type outside"):
        _ffi(a, b, bias_i32, operands=BIAS)
    bias_short = rand(seed, (N - 1,), F32)
    with pytest.raises(RuntimeError, match="jax_tmem gemm: bias has 3 elements, expected 4"):
        _ffi(a, b, bias_short, operands=BIAS)
    c_bf16 = rand(seed, (M, N), BF16)
    with pytest.raises(RuntimeError, match="jax_tmem gemm: c must be float32, got bfloat16"):
        _ffi(a, b, c_bf16, operands=C)
    with pytest.raises(RuntimeError, match=r"jax_tmem gemm: expected 2 input buffers \(a, b\), got 3"):
        _ffi(a, b, rand(seed, (N,), F32))
    with pytest.raises(RuntimeError, match="jax_tmem gemm: output dtype must be"):
        _ffi(a, b, out_dtype=jnp.int32)
    with pytest.raises(RuntimeError, match="jax_tmem gemm: unsupported operand dtype"):
        _ffi(a.astype(jnp.int32), b)


_OVERFLOW_SCRIPT = textwrap.dedent("""
    import sys, jax, jax.numpy as jnp, numpy as np
    from jax_tmem._core import ext as _ext
    _ext.ensure_registered("cpu")
    a, b = jnp.ones((3, 5), jnp.float32), jnp.ones((5, 4), jnp.float32)
    attrs = _ext.gemm_attrs(["a", "b"], batch=1, m=3, n=4, k=5, a_mn_major=False, b_mn_major=True,
                            lda=2**62 + 2**40, ldb=4, stride_a=0, stride_b=0)
    call = jax.ffi.ffi_call("jax_tmem_gemm", (jax.ShapeDtypeStruct((3, 4), jnp.float32),
                                              jax.ShapeDtypeStruct((1,), jnp.float32)))
    try:
        call(a, b, **attrs)[0].block_until_ready()
        print("NO ERROR")
    except Exception as e:
        print("ERROR:", e)
""")


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="calls the CPU handler")
def test_ffi_handler_rejects_overflowing_view():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-P", "-c", _OVERFLOW_SCRIPT], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, f"crashed with return code {r.returncode}: {r.stderr[-2000:]}"
    assert "ERROR:" in r.stdout and "jax_tmem gemm" in r.stdout, r.stdout

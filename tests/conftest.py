"""Shared helpers for the jax_tmem CPU test suite.

* ``rand(seed_or_key, shape, dtype)``: fresh N(0, 1) data in any supported dtype (never zeros).
* ``ref_dot_general`` / ``ref_matmul`` / ``ref_epilogue``: float64 NumPy references.
* ``assert_close(out, ref, out_dtype, k)``: per-output-dtype tolerance relative to max|ref|.
* ``calc_diff(x, y)``: DeepGEMM's similarity check, 1 - 2 sum(xy) / sum(x^2 + y^2).
* ``run_path(path, fn, *args)``: jits a *fresh* function inside ``use_path(path)`` and checks that every
  path decision taken while tracing went where it was asked to (so path "kernel" really exercised the
  C++ CPU handler, and path "xla" really ran lax ops).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem

BF16 = np.dtype(jnp.bfloat16)
F16 = np.dtype(jnp.float16)
F32 = np.dtype(jnp.float32)
E4M3 = np.dtype(jnp.float8_e4m3fn)
E5M2 = np.dtype(jnp.float8_e5m2)
FP8 = (E4M3, E5M2)
IN_DTYPES = (BF16, F16, F32, E4M3, E5M2)
OUT_DTYPES = (F32, BF16, F16)
PATHS = ("kernel", "xla")
ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")

# Per output dtype: relative (to max|ref|) error allowed for the output rounding plus f32 accumulation.
# bf16 rounds to 8 mantissa bits (half-ulp 2^-9 ~ 2e-3), f16 to 11 (2^-12 ~ 2.4e-4), f32 is accumulation only.
RTOL = {BF16: 1e-2, F16: 2e-3, F32: 1e-4}
# calc_diff thresholds (a mean-square measure, much tighter than the max-error check above).
DIFF_TOL = {BF16: 1e-4, F16: 5e-6, F32: 1e-8}


# ---- markers / skips ----------------------------------------------------------------------------

def pytest_configure(config):
    for line in ("gpu: needs a CUDA GPU with the jax_tmem kernels built",
                 "slow: a longer-running test"):
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config, items):
    backend = jax.default_backend()
    if backend == "gpu":
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU (jax.default_backend() is {backend!r})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# ---- data ---------------------------------------------------------------------------------------

def seed_of(*parts) -> int:
    """A stable seed from any printable parts (test ids, parameters)."""
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


@pytest.fixture
def seed(request) -> int:
    """A different, reproducible seed for every test (and every parametrization of it)."""
    return seed_of(request.node.nodeid)


def rand(key_or_seed, shape, dtype, scale: float = 1.0):
    """Fresh random N(0, scale^2) data of ``dtype`` (fp8: N(0,1) cast to fp8, within its range)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if isinstance(key_or_seed, (int, np.integer)):
        x = np.random.default_rng(int(key_or_seed)).standard_normal(shape).astype(np.float32) * scale
        return jnp.asarray(x).astype(dtype)
    return (jax.random.normal(key_or_seed, shape, jnp.float32) * scale).astype(dtype)


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


# ---- float64 references -------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Ref(np.ndarray):
    """A float64 reference that knows the extra error of a GPU's arithmetic for its operands (``gpu_atol``, 0 on
    the CPU): float32 multiplied as tf32 under the default precision (JAX's dot, XLA's and jax_tmem's kernels
    alike; 10 mantissa bits), and XLA's fp8 GEMMs' accumulation. Kept by views, ref_epilogue, like_ref and
    stack_refs."""
    gpu_atol = 0.0

    def __array_finalize__(self, obj):
        self.gpu_atol = getattr(obj, "gpu_atol", 0.0)


def _with_gpu_error(out, lhs, rhs, contract):
    """``out`` as a Ref whose gpu_atol bounds, on a GPU, the error of float32 operands multiplied as tf32:
    twice the bias of truncating both factors, 2^-9 |ref|, plus ~20 standard deviations of the random part,
    8 * 2^-10 sqrt(sum_k (a_k b_k)^2); or of fp8 operands summed by XLA's fp8 GEMM."""
    out = np.asarray(out).view(Ref)
    types = (np.dtype(lhs.dtype), np.dtype(rhs.dtype))
    if jax.default_backend() == "gpu" and F32 in types:
        sq = contract(f64(lhs) ** 2, f64(rhs) ** 2)
        out.gpu_atol = float(np.max(2.0 ** -9 * np.abs(out) + 8 * 2.0 ** -10 * np.sqrt(sq), initial=0.0))
    elif jax.default_backend() == "gpu" and set(types) & set(FP8):
        # XLA's fp8 GEMM (cuBLASLt, which it substitutes for the dot of two fp8 operands widened to bf16)
        # sums in the fp8 tensor cores' own precision, ~2^-13 of the partial sums per k-step
        out.gpu_atol = float(np.max(2.0 ** -12 * contract(np.abs(f64(lhs)), np.abs(f64(rhs))), initial=0.0))
    return out


def like_ref(x, ref) -> np.ndarray:
    """``x`` (another reference of the same product, e.g. lax at HIGHEST) as a Ref with ``ref``'s GPU error."""
    out = f64(x).view(Ref)
    out.gpu_atol = getattr(ref, "gpu_atol", 0.0)
    return out


def stack_refs(refs) -> np.ndarray:
    """np.stack of Refs, keeping the largest GPU error."""
    out = np.stack([np.asarray(r) for r in refs]).view(Ref)
    out.gpu_atol = max((getattr(r, "gpu_atol", 0.0) for r in refs), default=0.0)
    return out


def f32_tol(tol: float) -> float:
    """A float32 comparison's relative tolerance ``tol``, at least 5e-3 where float32 operands multiply as tf32
    (a GPU under the default precision; jax_tmem's kernels and cuBLAS round the operands differently)."""
    return max(tol, 5e-3) if jax.default_backend() == "gpu" else tol


def ref_dot_general(lhs, rhs, dn) -> np.ndarray:
    """float64 ``lax.dot_general`` with jax_tmem's extension: a batch pair may name None on one side
    (that operand is broadcast over the batch). Output: batch dims in dn order, lhs free, rhs free."""
    return _with_gpu_error(_ref_dot_general(f64(lhs), f64(rhs), dn), lhs, rhs, lambda x, y: _ref_dot_general(x, y, dn))


def _ref_dot_general(lhs, rhs, dn) -> np.ndarray:
    (lc, rc), (lb, rb) = dn
    letters = iter(_LETTERS)
    ls = [None] * lhs.ndim
    rs = [None] * rhs.ndim
    out = []
    for l, r in zip(lb, rb):
        ch = next(letters)
        if l is not None:
            ls[l] = ch
        if r is not None:
            rs[r] = ch
        out.append(ch)
    for l, r in zip(lc, rc):
        ch = next(letters)
        ls[l] = rs[r] = ch
    for d in range(lhs.ndim):
        if ls[d] is None:
            ls[d] = next(letters)
            out.append(ls[d])
    for d in range(rhs.ndim):
        if rs[d] is None:
            rs[d] = next(letters)
            out.append(rs[d])
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", lhs, rhs)


def ref_matmul(a, b) -> np.ndarray:
    return _with_gpu_error(np.matmul(f64(a), f64(b)), a, b, np.matmul)


def _erf(x):
    try:
        from scipy.special import erf
        return erf(x)
    except ImportError:  # pragma: no cover
        return np.vectorize(math.erf)(x)


def ref_activation(x, activation):
    x = np.asarray(x, np.float64)
    if activation is None:
        return x
    if activation == "relu":
        return np.maximum(x, 0.0)
    if activation == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if activation == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if activation == "silu":
        return x / (1.0 + np.exp(-x))
    raise ValueError(activation)


def ref_epilogue(y, *, alpha=1.0, bias=None, activation=None, c=None):
    """out = act(alpha * y + bias) + c in float64 (bias broadcast along the last axis); a Ref's GPU error
    scaled by |alpha| and the activations' slope (<= 1.13)."""
    gpu_atol = getattr(y, "gpu_atol", 0.0) * abs(alpha) * 1.2
    y = alpha * np.asarray(y, np.float64)
    if bias is not None:
        y = y + f64(bias)
    y = ref_activation(y, activation)
    if c is not None:
        y = y + f64(c)
    y = np.asarray(y, np.float64).view(Ref)  # (a 0-d result too)
    y.gpu_atol = gpu_atol
    return y


# ---- comparisons --------------------------------------------------------------------------------

def tolerance(out_dtype, k: int, scale: float) -> float:
    """Absolute tolerance for an output of ``out_dtype`` whose reference has max|ref| = scale, after a
    K-long f32 accumulation (error ~ sqrt(K) * 2^-24 per unit of magnitude)."""
    out_dtype = np.dtype(out_dtype)
    acc = 4.0 * math.sqrt(max(k, 1)) * 2.0 ** -24
    return (RTOL[out_dtype] + acc) * max(scale, 1e-6)


def calc_diff(x, y) -> float:
    """DeepGEMM's check: 1 - 2 sum(x*y) / sum(x*x + y*y); 0 for identical, ~mean sq. rel. error."""
    x, y = f64(x).ravel(), f64(y).ravel()
    denom = np.sum(x * x + y * y)
    if denom == 0:
        return 0.0
    return float(1.0 - 2.0 * np.sum(x * y) / denom)


def assert_close(out, ref, out_dtype, k: int, *, check_diff: bool = True, factor: float = 1.0, tol_dtype=None):
    """Checks dtype, shape, finiteness, max error (relative to max|ref|) and calc_diff.

    ``tol_dtype`` (default ``out_dtype``) picks the tolerance, for outputs that carry another dtype's error."""
    out_dtype = np.dtype(out_dtype)
    gpu_atol = getattr(ref, "gpu_atol", 0.0)  # the GPU's tf32 / fp8 arithmetic for these operands (Ref says)
    ref = np.asarray(ref, np.float64)
    assert np.dtype(out.dtype) == out_dtype, f"dtype {out.dtype}, expected {out_dtype}"
    out_dtype = np.dtype(tol_dtype) if tol_dtype is not None else out_dtype
    assert tuple(out.shape) == tuple(ref.shape), f"shape {out.shape}, expected {ref.shape}"
    o = f64(out)
    assert np.all(np.isfinite(o)), "non-finite output"
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    atol = factor * (tolerance(out_dtype, k, scale) + gpu_atol)
    err = float(np.max(np.abs(o - ref))) if ref.size else 0.0
    assert err <= atol, (f"max |out - ref| = {err:.3g} > {atol:.3g} (max|ref| = {scale:.3g}, "
                         f"{out_dtype.name}, K={k})")
    if check_diff and ref.size and scale > 0:
        if not gpu_atol:  # (that error is bounded above, per element; calc_diff is not for cancelling sums)
            d = calc_diff(o, ref)
            assert d <= factor * DIFF_TOL[out_dtype], f"calc_diff = {d:.3g} > {DIFF_TOL[out_dtype]:.3g}"


# ---- running a function on a given path ---------------------------------------------------------

def run_path(path: str, fn, *args, jit: bool = True, expect=None):
    """Runs ``fn(*args)`` (jitted fresh, so no cached trace is reused) under ``use_path(path)`` and
    asserts every decision recorded while tracing took ``expect`` (default: ``path``; "any": not checked)."""
    expect = path if expect is None else expect
    try:
        out = _run_under(path, fn, args, jit)
    except ValueError as e:
        if not (path == "kernel" and jax.default_backend() == "gpu" and NO_KERNEL in str(e)):
            raise
        widened = any(d.op.endswith(" widen") for d in jax_tmem.decisions())
        return _not_on_the_gpu_kernels(str(e), fn, args, jit, widened)
    ds = path_decisions()
    assert ds, "no path decision was recorded"
    for d in ds if expect != "any" else ():
        assert d.path == expect, f"expected path {expect!r}, got {d}"
        if expect == "kernel":
            assert d.target == "cpu reference handler" or jax.default_backend() != "cpu", str(d)
    return out


def path_decisions():
    """The recent decisions of where a product ran (not how a layout is moved, nor where dot_general's / matmul's
    c is added, nor what becomes of a 16-bit x fp8 pair)."""
    return [d for d in jax_tmem.decisions()
            if d.op not in ("transpose", "dot_general c", "matmul c", "dot_general widen", "matmul widen",
                            "dot_general mix", "matmul mix", "gemm act_grad")]


def _run_under(path: str, fn, args, jit: bool):
    jax_tmem.clear_decisions()
    with jax_tmem.use_path(path):
        # a fresh wrapper: jax.jit(fn) for the same fn would reuse a trace made under another path
        f = jax.jit(lambda *a: fn(*a)) if jit else fn
        return jax.block_until_ready(f(*args))


NO_KERNEL = "path 'kernel' was forced but no kernel takes "


def _not_on_the_gpu_kernels(error: str, fn, args, jit: bool, widened: bool = False):
    """A forced kernel path that the GPU kernels cannot take (a row pitch TMA cannot map, a type pair with no
    kernel; the CPU path's "kernel", the reference handler, takes any) raised, naming why. Then "auto" must
    run XLA for that GEMM with the same reason recorded (no silent fallback); its output is returned for the
    caller's checks. ``widened``: the forced path had widened a 16-bit x fp8 pair first (the error names the
    widened problem); "auto" gives XLA the pair as it is, and its "mix" decision says why no kernel read it."""
    reason = error.split(NO_KERNEL, 1)[1].split(": ", 1)[1].split("\n")[0]  # after "<problem>: "
    out = _run_under("auto", fn, args, jit)
    ds = jax_tmem.decisions()
    mixed = widened and any(d.op.endswith(" mix") and d.path == "xla" and "no kernel reads this problem" in d.reason
                            for d in ds)
    assert mixed or any(d.path == "xla" and d.reason == reason for d in ds), (reason, ds)
    return out


def command_buffer_runs(prog: str, *args: str) -> list:
    """Runs the Python program ``prog`` (which saves one array to its first argument; ``args`` follow)
    in two fresh processes, with XLA's command buffers on and then off; returns the two arrays."""
    outs = []
    with tempfile.TemporaryDirectory() as d:
        for i, flags in enumerate(["", "--xla_gpu_enable_command_buffer="]):
            path = os.path.join(d, f"r{i}.npy")
            subprocess.run([sys.executable, "-P", "-c", prog, path, *args], check=True, timeout=300,
                           env=dict(os.environ, XLA_FLAGS=flags))
            outs.append(np.load(path))
    return outs


def forced_gemm_runs(cfg, args, dn, out_shape, out_dtype, repeats=2):
    """The kernel-path GEMM forced through menu ``cfg`` (an entry, or (entry, splits)), ``repeats`` times, each into
    a freshly NaN-poisoned output (donated to the call); ``args`` = (a, b), or (a, b, bias, c) for the fused
    epilogue gelu(0.5 acc + bias) + c. Returns the outputs as float32 NumPy arrays."""
    from jax_tmem.ops import gemm as gemm_op
    fused = len(args) == 4
    epi = gemm_op.Epilogue(activation="gelu", alpha=0.5, has_bias=True, has_c=True) if fused else gemm_op.Epilogue()

    def f(poison, *xs):
        del poison
        return gemm_op.gemm(xs[0], xs[1], xs[2] if fused else None, xs[3] if fused else None, dn, np.dtype(out_dtype),
                            epi, "kernel", True, cfg)
    g = jax.jit(f, donate_argnums=0)
    return [np.asarray(g(jnp.full(out_shape, jnp.nan, out_dtype), *args).astype(jnp.float32)) for _ in range(repeats)]


def forced_gemm_ref(args, kn=False) -> np.ndarray:
    """float64 reference of forced_gemm_runs' GEMM: a (..., M, K) times b (..., N, K), or (..., K, N) if ``kn``."""
    a64, b64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in args[:2])
    y = np.einsum("...mk,...kn->...mn" if kn else "...mk,...nk->...mn", a64, b64)
    if len(args) < 4:
        return y
    return ref_epilogue(y, alpha=0.5, bias=np.asarray(args[2], np.float64), activation="gelu",
                        c=np.asarray(args[3].astype(jnp.float32), np.float64))


@pytest.fixture(autouse=True)
def _clean_decisions():
    jax_tmem.clear_decisions()
    yield
    jax_tmem.clear_decisions()


def recipe_kernel_path(recipe: str) -> str:
    """The path that runs a training recipe's GEMMs on jax_tmem's kernels here: "kernel" (the C++ CPU
    handler without a GPU, the CUDA kernels on one), or "auto" for a 4-bit recipe on a GPU without 4-bit
    tensor cores (Hopper: the forced kernel path would raise; XLA runs it, logged)."""
    if recipe in ("nvfp4", "nvfp4_sr"):
        from jax_tmem.ops import block_scale, scaled_gemm
        f = block_scale.get_format("nvfp4")
        where, _ = scaled_gemm.kernel_target(f, f, None, 64)
        if not where:
            return "auto"
    return "kernel"


@pytest.fixture
def as_if_on(monkeypatch):
    """Plans and lowers programs as on a GPU of the given compute capability (no GPU needed): the CUDA
    lowering rules run and the C++ planner picks the kernels; nothing is compiled or executed."""
    from jax_tmem._core import arch as _arch, ext as _ext
    if not _arch.families("sm_100a") or not _arch.families("sm_90a"):
        pytest.skip("the extension lists no kernel families (no jax_tmem extension built)")
    info = dict(_ext.build_info(), cuda=True, cuda_archs="sm_90a,sm_100a,sm_103a")
    monkeypatch.setattr(_ext, "build_info", lambda: info)
    monkeypatch.setattr(_ext, "cuda_built", lambda: (True, ""))
    monkeypatch.setattr(_ext, "ensure_registered", lambda platform: (True, ""))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setenv("JAX_TMEM_ENABLE_SM100", "1")  # what a B200 user sets for "auto" to take the kernels

    def on(cc, sms):
        monkeypatch.setattr(_arch, "device_cc", lambda: (cc, ""))
        monkeypatch.setattr(_arch, "device_sms", lambda: sms)
    return on


def lower_for_cuda(fn, *avals):
    """(StableHLO text, the decisions recorded) of ``fn`` traced and lowered for CUDA (with ``as_if_on``:
    as on that GPU; nothing compiled)."""
    from jax_tmem._core import config as _config
    _config.clear_decisions()
    txt = jax.jit(fn).trace(*avals).lower(lowering_platforms=("cuda",)).as_text()
    return txt, _config.decisions()

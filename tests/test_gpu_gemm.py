"""GPU tests of the CUDA kernels: every dtype x layout x epilogue against a float64 reference.

The same bodies run on sm_90a (Hopper) and sm_100a/sm_103a (Blackwell); each test skips with a reason
when the device has no jax_tmem kernel for it. Outputs are written into a NaN-poisoned donated buffer
(XLA aliases the result to it), so any element a kernel fails to store shows up; each case runs twice
and must be bitwise identical (a moving result is a race).
"""

from __future__ import annotations

import itertools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem._core import arch as _arch
from jax_tmem import isa

from conftest import BF16, E4M3, E5M2, F16, F32, command_buffer_runs, rand, seed_of

pytestmark = pytest.mark.gpu


def _cc():
    return _arch.device_cc()[0] if jax.default_backend() == "gpu" else -1


def _require_kernels():
    cc = _cc()
    if cc < 0:
        pytest.skip("no CUDA GPU")
    arch, why = _arch.arch_target(cc)
    if not arch:
        pytest.skip(why)
    return arch


def _menu_entry(arch, config):
    return next((e for e in isa.kernel_menu(arch) if e["config"] == config), None)


def _built(arch, config):
    """Whether this build has a forced configuration (sweep-only entries need JAX_TMEM_CONFIGS=all)."""
    entry = _menu_entry(arch, config)
    return entry is None or entry["built"]


def _require_config(arch, config):
    """Skips when this build lacks a forced configuration (sweep-only entries need JAX_TMEM_CONFIGS=all,
    which the README's test command builds), and where the arch's menu has no such entry (sm_90a's 20-24 on
    sm_100a)."""
    if _menu_entry(arch, config) is None:
        pytest.skip(f"config {config} is not in the {arch} menu")
    if not _built(arch, config):
        pytest.skip(f"config {config} ({_menu_entry(arch, config)['name']}) is not in this build "
                    "(JAX_TMEM_CONFIGS=heuristic)")


# Max error relative to max|ref| for the kernel path (inputs are exact in the reference; f32 inputs
# run as tf32 with 10 mantissa bits).
def _tol(in_dtype, out_dtype):
    out_tol = {BF16: 8e-3, F16: 1.5e-3, F32: 2e-5}[np.dtype(out_dtype)]
    if np.dtype(in_dtype) == F32:
        return max(out_tol, 4e-3)
    if np.dtype(in_dtype) in (E4M3, E5M2):
        # Hopper's fp8 wgmma accumulates with reduced precision inside each instruction chain
        # (DeepSeek-V3 report: ~14 bits); the kernels do not yet promote to f32 every k-block.
        return max(out_tol, 3e-3)
    return out_tol


def _ref(a, b, dn, bias=None, act=None, alpha=1.0, c=None):
    a64, b64 = np.asarray(a.astype(jnp.float32), np.float64), np.asarray(b.astype(jnp.float32), np.float64)
    (lc, rc), (lb, rb) = dn
    y = np.asarray(jax.lax.dot_general(jnp.asarray(a64), jnp.asarray(b64), dn, precision="highest"))
    y = alpha * y
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    if act == "relu":
        y = np.maximum(y, 0)
    elif act == "gelu":
        import math
        y = 0.5 * y * (1 + np.vectorize(math.erf)(y / np.sqrt(2)))
    elif act == "gelu_tanh":
        y = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y**3)))
    elif act == "silu":
        y = y / (1 + np.exp(-y))
    if c is not None:
        y = y + np.asarray(c.astype(jnp.float32), np.float64)
    return y


def _run_poisoned(fn, out_shape, out_dtype, *args):
    """Runs fn(*args) writing into a donated NaN-filled buffer; returns (out, same run again)."""
    def wrapped(poison, *a):
        del poison
        return fn(*a)
    f = jax.jit(wrapped, donate_argnums=0)
    outs = []
    for _ in range(2):
        poison = jnp.full(out_shape, jnp.nan, out_dtype)
        outs.append(np.asarray(f(poison, *args).astype(jnp.float32)))
    return outs


def _layout_operands(seed, dtype_a, dtype_b, m, n, k, a_major, b_major, batch=0):
    """Operands and dimension numbers for A (K- or MN-major) and B (K- or MN-major)."""
    bs = (batch,) if batch else ()
    nb = len(bs)
    a = rand(seed, bs + ((m, k) if a_major == "K" else (k, m)), dtype_a)
    b = rand(seed + 1, bs + ((n, k) if b_major == "K" else (k, n)), dtype_b)
    lc = (nb + 1,) if a_major == "K" else (nb,)
    rc = (nb + 1,) if b_major == "K" else (nb,)
    batch_dims = (tuple(range(nb)), tuple(range(nb)))
    return a, b, ((lc, rc), batch_dims)


DTYPE_PAIRS = [(BF16, BF16), (F16, F16), (F32, F32), (E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3), (E5M2, E5M2)]
LAYOUTS = list(itertools.product("K", ("K", "MN"))) + [("MN", "K"), ("MN", "MN")]
# Sizes that are tile-aligned, tails, and 1; K multiples of 16 keep the row pitch 16-byte aligned.
SHAPES = [(128, 256, 64), (1, 16, 32), (200, 136, 48), (264, 520, 304), (1000, 776, 1008)]


@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=lambda p: f"{p[0].name}x{p[1].name}")
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: f"A{l[0]}_B{l[1]}")
@pytest.mark.parametrize("out_dtype", [F32, BF16, F16], ids=lambda d: d.name)
def test_dtype_layout_matrix(dtypes, layout, out_dtype):
    _require_kernels()
    da, db = dtypes
    rng = random.Random(seed_of(dtypes, layout, out_dtype))
    for m, n, k in rng.sample(SHAPES, 2):
        s = seed_of(dtypes, layout, out_dtype, m, n, k)
        a, b, dn = _layout_operands(s, da, db, m, n, k, *layout)
        jax_tmem.clear_decisions()
        fn = lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=out_dtype, path="kernel")
        o1, o2 = _run_poisoned(fn, (m, n), out_dtype, a, b)
        assert any(d.path == "kernel" for d in jax_tmem.decisions())
        ref = _ref(a, b, dn)
        assert not np.isnan(o1).any(), "kernel left unwritten (NaN-poisoned) outputs"
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(da, out_dtype), f"{m}x{n}x{k}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("dtype", [BF16, E4M3], ids=lambda d: d.name)
def test_fused_epilogue(activation, dtype):
    _require_kernels()
    s = seed_of("epi", activation, dtype)
    m, n, k = 300, 264, 512
    a = rand(s, (m, k), dtype)
    b = rand(s + 1, (k, n), dtype)
    bias = rand(s + 2, (n,), F32)
    c = rand(s + 3, (m, n), BF16)
    alpha = 0.37
    fn = lambda x, y, bb, cc: jax_tmem.matmul(x, y, bias=bb, activation=activation, alpha=alpha, c=cc,
                                              out_dtype=BF16, path="kernel")
    o1, o2 = _run_poisoned(fn, (m, n), BF16, a, b, bias, c)
    ref = _ref(a, b, (((1,), (0,)), ((), ())), bias=bias, act=activation, alpha=alpha, c=c)
    err = np.abs(o1 - ref).max() / np.abs(ref).max()
    assert err < 8e-3, err
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("batch_case", ["both", "lhs_only", "rhs_only"])
def test_batched_and_broadcast(batch_case):
    _require_kernels()
    s = seed_of("batch", batch_case)
    B, m, n, k = 3, 136, 200, 96
    a = rand(s, (B, m, k) if batch_case != "rhs_only" else (m, k), BF16)
    b = rand(s + 1, (B, k, n) if batch_case != "lhs_only" else (k, n), BF16)
    out = jax.jit(lambda x, y: jax_tmem.matmul(x, y, out_dtype=F32, path="kernel"))(a, b)
    ref = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    np.testing.assert_allclose(np.asarray(out), ref, atol=2e-5 * np.abs(ref).max())


def test_vmap_unbatched_weight_no_copy():
    _require_kernels()
    s = seed_of("vmap")
    x = rand(s, (4, 64, 128), BF16)
    w = rand(s + 1, (128, 256), BF16)
    f = jax.jit(jax.vmap(lambda xi: jax_tmem.matmul(xi, w, out_dtype=F32, path="kernel")))
    hlo = f.lower(x).as_text()
    assert hlo.count("jax_tmem_gemm") == 1
    ref = np.einsum("vmk,kn->vmn", np.asarray(x, np.float64), np.asarray(w, np.float64))
    np.testing.assert_allclose(np.asarray(f(x)), ref, atol=2e-5 * np.abs(ref).max())


def test_grad_through_kernels():
    _require_kernels()
    s = seed_of("grad")
    x = rand(s, (256, 192), BF16)
    w = rand(s + 1, (192, 320), BF16)
    bias = rand(s + 2, (320,), F32)

    def loss(f, x, w, bias):
        return jnp.sum(f(x, w, bias).astype(jnp.float32) ** 2)

    ours = lambda x, w, bias: jax_tmem.matmul(x, w, bias=bias, activation="gelu", path="kernel")
    theirs = lambda x, w, bias: jax.nn.gelu((x.astype(jnp.float32) @ w.astype(jnp.float32)) + bias,
                                            approximate=False).astype(BF16)
    g1 = jax.jit(jax.grad(lambda *a: loss(ours, *a), argnums=(0, 1, 2)))(x, w, bias)
    g2 = jax.jit(jax.grad(lambda *a: loss(theirs, *a), argnums=(0, 1, 2)))(x, w, bias)
    for u, v in zip(g1, g2):
        u, v = np.asarray(u.astype(jnp.float32)), np.asarray(v.astype(jnp.float32))
        assert np.abs(u - v).max() / np.abs(v).max() < 3e-2


def test_kernel_matches_cpu_reference_handler():
    """The GPU kernel and the C++ CPU handler (the reference) agree on the same problem."""
    _require_kernels()
    s = seed_of("cpu-ref")
    a = rand(s, (192, 256), BF16)
    b = rand(s + 1, (256, 136), BF16)
    bias = rand(s + 2, (136,), F32)
    f = lambda x, y, bb: jax_tmem.matmul(x, y, bias=bb, activation="silu", out_dtype=F32, path="kernel")
    gpu = np.asarray(jax.jit(f)(a, b, bias))
    cpu_dev = jax.devices("cpu")[0]
    cpu = np.asarray(jax.jit(f)(*(jax.device_put(t, cpu_dev) for t in (a, b, bias))))
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5 * np.abs(cpu).max())


@pytest.mark.parametrize("variant", ["heuristic", "cluster", "tma_store", "cluster_tma_store", "split_k"])
def test_command_buffers_on_and_off_agree(variant):
    """A jitted training step gives identical results with XLA command buffers on and off: with the
    heuristic's kernels, and with every GEMM of the step (forward and gradients) forced onto a cluster
    kernel (launched with a cluster-shape attribute) or the TMA-store epilogue."""
    arch = _require_kernels()
    config = {"heuristic": -1, "cluster": 6 if arch == "sm_90a" else 4,
              "tma_store": 8, "cluster_tma_store": 10 if arch == "sm_90a" else 9, "split_k": 14}[variant]
    _require_config(arch, config)
    import textwrap
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np, jax_tmem
        from jax_tmem.ops import gemm as gemm_op
        cfg = int(sys.argv[2])
        def mm(x, w, act=None, out=jnp.bfloat16):
            if cfg < 0:
                return jax_tmem.matmul(x, w, activation=act, out_dtype=out, path="kernel")
            return gemm_op.gemm(x, w, None, None, (((1,), (0,)), ((), ())), jnp.dtype(out),
                             gemm_op.Epilogue(activation=act), "kernel", True, cfg)
        k = jax.random.split(jax.random.key(7), 3)
        x = jax.random.normal(k[0], (256, 512), jnp.bfloat16)
        w1 = jax.random.normal(k[1], (512, 384), jnp.bfloat16) * 0.05
        w2 = jax.random.normal(k[2], (384, 128), jnp.bfloat16) * 0.05
        def loss(p, x):
            h = mm(x, p[0], act="gelu_tanh")
            return jnp.mean(mm(h, p[1], out=jnp.float32) ** 2)
        @jax.jit
        def step(p, x):
            g = jax.grad(loss)(p, x)
            return [w - 0.1 * gw.astype(w.dtype) for w, gw in zip(p, g)]
        p = [w1, w2]
        for _ in range(3):
            p = step(p, x)
        np.save(__import__("sys").argv[1], np.concatenate([np.asarray(t, np.float32).ravel() for t in p]))
    """)
    outs = command_buffer_runs(prog, str(config))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_unaligned_pitch_falls_back_with_reason():
    _require_kernels()
    a = rand(1, (64, 100), BF16)   # row pitch 200 bytes: TMA needs multiples of 16
    b = rand(2, (100, 64), BF16)
    jax_tmem.clear_decisions()
    out = jax.jit(lambda x, y: jax_tmem.matmul(x, y, out_dtype=F32))(a, b)
    d = jax_tmem.decisions()[-1]
    assert d.path == "xla" and "16" in d.reason
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    np.testing.assert_allclose(np.asarray(out), ref, atol=1e-4 * np.abs(ref).max())
    with pytest.raises(ValueError, match="not a multiple of 16"):
        jax.jit(lambda x, y: jax_tmem.matmul(x, y, path="kernel"))(a, b)


def _require_entry_bf16(config):
    """Skips unless this GPU's menu has entry `config`, this build has it, and it reads bf16 x bf16 K-major operands
    (a decode entry may not); returns the arch."""
    arch = _require_kernels()
    entry = next((e for e in _menu(arch) if e["config"] == config), None)
    if entry is None:
        pytest.skip(f"config {config} is not in the {arch} menu")
    _require_config(arch, config)
    if entry["split"] == "decode":
        why = isa.entry_reads(arch, config, BF16, BF16, a_mn_major=False, b_mn_major=False)
        if why:
            pytest.skip(why)
    return arch


def _menu(arch):
    """The arch's kernel configurations as the dispatcher knows them (cpp/include/jax_tmem/*_configs.def)."""
    try:
        return isa.kernel_menu(arch)
    except RuntimeError:  # no extension: nothing to run anyway
        return []


# Every entry of either menu (each test skips the entries its GPU's arch lacks).
ALL_CONFIGS = sorted({e["config"] for arch in ("sm_90a", "sm_100a") for e in _menu(arch)})


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda c: f"config{c}")
@pytest.mark.parametrize("dtypes,layout", [((BF16, BF16), ("K", "MN")), ((BF16, BF16), ("MN", "K")),
                                           ((F16, F16), ("MN", "MN")), ((E4M3, E5M2), ("K", "K")),
                                           ((F32, F32), ("K", "K"))], ids=lambda v: str(v))
def test_every_menu_config(config, dtypes, layout):
    """Each entry of the kernel menu (the heuristic only picks some per shape), forced through `config`,
    on shapes with tails and several tiles per CTA (so the persistent / ping-pong tile walk is exercised)."""
    arch = _require_kernels()
    entry = next((e for e in _menu(arch) if e["config"] == config), None)
    if entry is None:
        pytest.skip(f"config {config} is not in the {arch} menu")
    if not entry["built"]:
        pytest.skip(f"config {config} ({entry['name']}) is sweep-only and this build has JAX_TMEM_CONFIGS="
                    f"heuristic (the README's test command builds all)")
    if entry["swap_ab"] and layout[0] == "MN":
        pytest.skip("swap-AB reads the lhs as its narrow wgmma B operand: K-major only (the heuristic knows)")
    if entry["cluster_n"] > 1 and (entry["block_m"] // entry["cluster_n"]) % 64 and layout[1] == "MN":
        pytest.skip("the 192-row weight-multicast pair reads a K-major weight only (the launcher refuses the other)")
    if entry["split"] == "decode":  # which operands it reads: the extension's own rule (tests/test_decode_mma.py)
        why = isa.entry_reads(arch, config, *dtypes, a_mn_major=layout[0] == "MN", b_mn_major=layout[1] == "MN")
        if why:
            pytest.skip(why)
    from jax_tmem.ops import gemm as gemm_op
    for m, n, k in [(1000, 776, 1008), (264, 136, 48), (2056, 1040, 304)]:
        s = seed_of("cfg", config, dtypes, layout, m, n, k)
        a, b, dn = _layout_operands(s, dtypes[0], dtypes[1], m, n, k, *layout)
        fn = lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(F32), gemm_op.Epilogue(), "kernel", True, config)
        o1, o2 = _run_poisoned(fn, (m, n), F32, a, b)
        ref = _ref(a, b, dn)
        assert not np.isnan(o1).any(), "kernel left unwritten (NaN-poisoned) outputs"
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(dtypes[0], F32), f"config {config} {m}x{n}x{k}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda c: f"config{c}")
@pytest.mark.parametrize("out_dtype", [BF16, F16, F32], ids=lambda d: d.name)
def test_every_menu_config_accumulates_into_c(config, out_dtype):
    """Each entry of the menu, forced, with the whole epilogue (bias + gelu + alpha) accumulating into c
    of every output type (c is read by each epilogue form: the register epilogue, the TMA-store ones, the
    one-split swap-AB / split-K stores, the decode kernels'), on shapes with tails in every dim and batches:
    against the float64 reference, bitwise repeatable."""
    _require_entry_bf16(config)
    for m, n, k, batch in [(5, 264, 200, 0), (264, 136, 56, 2), (1000, 776, 328, 0)]:
        epilogue_case(config, (BF16, BF16), "K", m, n, k, batch, out_dtype, True,
                      seed_of("every-c", config, out_dtype, m, n, k))


def _require_swap_entry(config, b_major):
    """Skips unless this GPU's menu has split-K / swap-AB entry `config`, this build has it, and it reads a weight of
    that majorness."""
    arch = _require_kernels()
    if not any(e["config"] == config for e in _menu(arch)):
        pytest.skip(f"config {config} is not in the {arch} menu")
    _require_config(arch, config)
    if config == 50 and b_major == "MN":
        pytest.skip("the 192-row weight-multicast pair reads a K-major weight only (the launcher refuses the other)")


@pytest.mark.parametrize("config", [11, 12, 13, 14, 15, 16, 17, 18, 19, 35, 36, 37, 38, 39, 40, 41, 48, 49, 50],
                         ids=["swapab16", "swapab32", "swapab64", "128x128_splitk", "swap64x16", "swap64x32", "swap64x64",
                              "swapab128", "swapab256", "swapab192", "swapab192c2", "swapab192c4", "swapab96",
                              "swapab96n2", "swapab160c4", "swapab80", "swapab80n2", "swap192x80", "swap192x80n2"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("dtypes,b_major", [((BF16, BF16), "K"), ((BF16, BF16), "MN"), ((F16, F16), "MN"),
                                            ((E4M3, E5M2), "K")], ids=lambda v: str(v))
def test_split_k_and_swap_ab(config, splits, dtypes, b_major):
    """The split-K entries (11-14 on both archs, 15-17 on sm_90a: 64-row swap-AB tiles, 4 K chunks per ring
    slot; 18, 19, 35, 38 on sm_90a: 128, 256, 192 and 96 tokens wide; 36 / 37: 35 in clusters of 2 / 4 weight
    tiles sharing the token tile by multicast; 39 / 48: 38 / 41 in clusters of 2 token tiles sharing the weight; 49: 192
    weight rows x 80 tokens, three consumer warpgroups; 50: 49 in pairs): K splits
    written as f32 partials to the XLA-allocated workspace and reduced in split order with the epilogue fused into
    the reduce pass; swap-AB (out^T = B A^T, the output stored transposed). Tails in M, N and K, M and N of 1,
    batches, bias + gelu + alpha, accumulate into c, every output dtype; bitwise repeatable (the reduction order is
    fixed)."""
    _require_swap_entry(config, b_major)
    cases = [(1, 1000, 1000, 0, BF16, False), (7, 136, 4104, 2, F32, True), (64, 264, 520, 0, F16, True),
             (33, 8, 200, 3, BF16, False), (130, 1, 776, 0, F32, False)]
    for m, n, k, batch, out_dtype, with_c in cases:
        if b_major == "MN" and n == 1:
            continue  # an MN-major (K, 1) weight has 2-byte rows: TMA cannot read it (the fallback's case)
        k = -(-k * np.dtype(dtypes[0]).itemsize // 16) * 16 // np.dtype(dtypes[0]).itemsize  # 16-byte rows
        s = seed_of("splitk", config, splits, dtypes, b_major, m, n, k)
        epilogue_case((config, splits), dtypes, b_major, m, n, k, batch, out_dtype, with_c, s)


@pytest.mark.parametrize("config", [11, 12, 13, 15, 16, 17, 18, 19, 35, 36, 37, 38, 39, 40, 41, 48, 49, 50],
                         ids=lambda c: f"config{c}")
@pytest.mark.parametrize("dtypes,b_major,out_dtype", [((BF16, BF16), "K", BF16), ((F16, F16), "MN", F16),
                                                     ((E4M3, E4M3), "K", BF16)], ids=["bf16", "f16-mn", "e4m3"])
def test_swap_ab_plain_16_bit_store(config, dtypes, b_major, out_dtype):
    """A swap-AB entry's one-split plain cast to a 16-bit output (a decode layer's common case): a CTA's last unit is
    staged through its idle ring and stored as whole 16-byte pieces of output rows (sm90_epilogue.cuh
    staged_swap_store) where N % 8 == 0, element by element otherwise; persistent CTAs with several units (the earlier
    ones stored directly), batches, token tails, 1 token, N of 8. Against float64, NaN-poisoned, bitwise repeatable."""
    _require_swap_entry(config, b_major)
    from jax_tmem.ops import gemm as gemm_op
    for m, n, k, batch in [(37, 8200, 144, 3), (1, 1000, 272, 0), (33, 1004, 208, 2), (130, 8, 784, 0)]:
        if b_major == "MN" and n % 8:
            continue  # a (K, N) 16-bit weight's rows must be whole 16-byte pieces (TMA)
        s = seed_of("swap-plain", config, dtypes, b_major, m, n, k)
        a, b, dn = _layout_operands(s, dtypes[0], dtypes[1], m, n, k, "K", b_major, batch)
        out_shape = ((batch,) if batch else ()) + (m, n)
        fn = lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(out_dtype), gemm_op.Epilogue(), "kernel",  # noqa
                                       True, (config, 1))
        o1, o2 = _run_poisoned(fn, out_shape, out_dtype, a, b)
        assert not np.isnan(o1).any(), f"{m}x{n}x{k} batch {batch}: unwritten (NaN-poisoned) outputs"
        ref = _ref(a, b, dn)
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(dtypes[0], out_dtype), f"config {config} {m}x{n}x{k} batch {batch}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)


def epilogue_case(cfg, dtypes, b_major, m, n, k, batch, out_dtype, with_c, s):
    """One forced-entry case with the full epilogue (bias + gelu + alpha, accumulation into c when `with_c`),
    a K-major lhs: against the float64 reference, NaN-poisoned outputs (without c), bitwise repeatable."""
    from jax_tmem.ops import gemm as gemm_op
    a, b, dn = _layout_operands(s, dtypes[0], dtypes[1], m, n, k, "K", b_major, batch)
    out_shape = ((batch,) if batch else ()) + (m, n)
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, out_shape, out_dtype)
    epi = gemm_op.Epilogue(activation="gelu", alpha=0.5, has_bias=True, has_c=with_c)
    if with_c:
        f = jax.jit(lambda x, y, bb, cc: gemm_op.gemm(x, y, bb, cc, dn, np.dtype(out_dtype), epi, "kernel", True, cfg))
        o1, o2 = (np.asarray(f(a, b, bias, c).astype(jnp.float32)) for _ in range(2))
    else:
        fn = lambda x, y, bb: gemm_op.gemm(x, y, bb, None, dn, np.dtype(out_dtype), epi, "kernel", True, cfg)
        o1, o2 = _run_poisoned(fn, out_shape, out_dtype, a, b, bias)
    ref = _ref(a, b, dn, bias=bias, act="gelu", alpha=0.5, c=c if with_c else None)
    assert not np.isnan(o1).any(), f"{m}x{n}x{k}: unwritten (NaN-poisoned) outputs"
    err = np.abs(o1 - ref).max() / np.abs(ref).max()
    assert err < _tol(dtypes[0], out_dtype), f"config {cfg} {m}x{n}x{k} batch {batch}: rel err {err:.3e}"
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("m,width,half", [(150, 160, False), (192, 192, False), (150, 160, True)])
@pytest.mark.parametrize("dtype,w_layout", [(BF16, "NK"), (BF16, "KN"), (E4M3, "NK"), (E4M3, "KN")])
def test_wide_tokens_run_the_clustered_swap_ab_entry(dtype, w_layout, m, width, half):
    """129-192 tokens against a weight of at least as many 128-row tiles as SMs (menu.h sm90_wide_tokens): the
    heuristic's entry 40 (129-160 tokens) / 37 (161-192): swap-AB 160 / 192 tokens wide, clusters of 4 weight tiles,
    the tokens multicast, named in the log; at 129-160 tokens and K >= 8192 also over half as many tiles as SMs (the
    70B QKV; `half`), fewer CTAs than SMs; a token tail, a weight tail (the last cluster's CTAs partly past N), a K
    tail; against float64, poisoned."""
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip("sm_90a's rule")
    if half and dtype == E4M3 and w_layout == "KN":
        pytest.skip("an 8-bit (K, N) weight of fewer tiles than SMs runs on entry 19 (tests/test_isa.py)")
    sms = jax.devices()[0].core_count  # the SMs the plan counts
    # one more (part-filled) weight tile than SMs, or than half of them
    n, k = (128 * (sms // 2) + 72, 8208) if half else (128 * sms + 72, 1040)
    s = seed_of("wide-tokens", dtype, w_layout, m, half)
    x = rand(s, (m, k), dtype)
    w = rand(s + 1, (k, n) if w_layout == "KN" else (n, k), dtype)
    dn = (((1,), (0 if w_layout == "KN" else 1,)), ((), ()))
    jax_tmem.clear_decisions()
    o1, o2 = _run_poisoned(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=BF16, path="kernel"),
                           (m, n), BF16, x, w)
    target = jax_tmem.decisions()[-1].target
    assert f"128(N)x{width}(M)" in target and "4x1 cluster, tokens multicast" in target, target
    ref = _ref(x, w, dn)
    assert not np.isnan(o1).any(), "unwritten (NaN-poisoned) outputs"
    assert np.abs(o1 - ref).max() / np.abs(ref).max() < _tol(dtype, BF16)
    np.testing.assert_array_equal(o1, o2)


def test_decode_runs_swap_ab_by_default():
    """The heuristic sends a decode GEMM (M <= 64, K-major activations) to swap-AB with split-K (on sm_90a,
    16-bit weights and M <= 16: the mma.sync decode entries, tests/test_decode_mma.py), says so in the log,
    and matches the float64 reference; a vmapped decode (a batch of activation matrices against one weight,
    read with batch stride 0) too."""
    arch = _require_kernels()
    s = seed_of("decode")
    x, w = rand(s, (32, 4096), BF16), rand(s + 1, (4096, 8192), BF16)
    jax_tmem.clear_decisions()
    o1, o2 = _run_poisoned(lambda a, b: jax_tmem.matmul(a, b, out_dtype=BF16, path="kernel"), (32, 8192), BF16, x, w)
    target = jax_tmem.decisions()[-1].target
    assert ("swap-AB 64(N)x32(M)" if arch == "sm_90a" else "swap-AB 128(N)x32(M)") in target, target
    ref = _ref(x, w, (((1,), (0,)), ((), ())))
    assert np.abs(o1 - ref).max() / np.abs(ref).max() < _tol(BF16, BF16)
    np.testing.assert_array_equal(o1, o2)
    xs = rand(s + 2, (3, 5, 4096), BF16)
    out = np.asarray(jax.jit(jax.vmap(lambda a: jax_tmem.matmul(a, w, out_dtype=F32, path="kernel")))(xs))
    ref = np.stack([_ref(xs[i], w, (((1,), (0,)), ((), ()))) for i in range(3)])
    assert np.abs(out - ref).max() / np.abs(ref).max() < _tol(BF16, F32)


def test_log_names_the_kernel_menu_entry():
    """The decision log names the compiled kernel the dispatcher runs (same C++ heuristic), with the
    device's SM count; a forced config shows as forced; a config outside the arch's menu raises at
    trace time."""
    arch = _require_kernels()
    from jax_tmem.ops import gemm as gemm_op
    a, b = rand(1, (2048, 256), BF16), rand(2, (256, 2048), BF16)
    jax_tmem.clear_decisions()
    jax.jit(lambda x, y: jax_tmem.matmul(x, y, path="kernel"))(a, b)
    d = jax_tmem.decisions()[-1]
    sms = _arch.device_sms()  # the plan's count: the smallest over the local GPUs
    assert d.path == "kernel" and "(config " in d.target and "heuristic" in d.target, d
    assert f"{sms} SMs" in d.target, d
    forced = 0 if arch == "sm_90a" else 1
    jax_tmem.clear_decisions()
    dn = (((1,), (0,)), ((), ()))
    jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(F32), gemm_op.Epilogue(), "kernel", True,
                                   forced))(a, b)
    assert f"(config {forced}, forced)" in jax_tmem.decisions()[-1].target
    with pytest.raises(ValueError, match="menu entry"):
        jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(F32), gemm_op.Epilogue(), "kernel",
                                       True, 23))(a, b)


def test_heuristic_keeps_register_epilogue_for_unaligned_output_rows():
    """The heuristic takes the TMA-store epilogue only where the output rows are a multiple of 16
    bytes; an output of 2044 bf16 columns (4088-byte rows) runs the register-epilogue kernel, correctly."""
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip("the sm_90a heuristic")
    s = seed_of("unaligned_out")
    a, b = rand(s, (2048, 512), BF16), rand(s + 1, (2044, 512), BF16)  # b stored (N, K): 1024-byte rows
    dn = (((1,), (1,)), ((), ()))
    jax_tmem.clear_decisions()
    f = lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=BF16, path="kernel")
    o1, o2 = _run_poisoned(f, (2048, 2044), BF16, a, b)
    assert "TMA-store" not in jax_tmem.decisions()[-1].target, jax_tmem.decisions()[-1]
    ref = _ref(a, b, dn)
    assert not np.isnan(o1).any()
    assert np.abs(o1 - ref).max() / np.abs(ref).max() < _tol(BF16, BF16)
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("out_dtype", [BF16, F16, F32], ids=lambda d: d.name)
@pytest.mark.parametrize("m,n", [(200, 264), (130, 72), (1000, 520)])
def test_tma_store_epilogue(out_dtype, m, n):
    """Config 8 (TMA-store epilogue, both archs): batched, fused bias + gelu + alpha, with and without
    accumulating into c; tiles whose later row groups (m=130) or whole column chunks (n=72) lie outside
    the output, where the kernel commits empty bulk groups instead of stores."""
    _require_config(_require_kernels(), 8)
    from jax_tmem.ops import gemm as gemm_op
    s = seed_of("tmastore", out_dtype, m, n)
    B, k = 2, 200
    a, b = rand(s, (B, m, k), BF16), rand(s + 1, (B, k, n), BF16)
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, (B, m, n), out_dtype)
    dn = (((2,), (1,)), ((0,), (0,)))
    for with_c in (False, True):
        epi = gemm_op.Epilogue(activation="gelu", alpha=0.5, has_bias=True, has_c=with_c)
        if with_c:
            fn = lambda x, y, bb, cc: gemm_op.gemm(x, y, bb, cc, dn, np.dtype(out_dtype), epi, "kernel", True, 8)
            f = jax.jit(fn)
            o1, o2 = (np.asarray(f(a, b, bias, c).astype(jnp.float32)) for _ in range(2))
        else:
            fn = lambda x, y, bb: gemm_op.gemm(x, y, bb, None, dn, np.dtype(out_dtype), epi, "kernel", True, 8)
            o1, o2 = _run_poisoned(fn, (B, m, n), out_dtype, a, b, bias)
        ref = _ref(a, b, dn, bias=bias, act="gelu", alpha=0.5, c=c if with_c else None)
        assert not np.isnan(o1).any(), "kernel left unwritten (NaN-poisoned) outputs"
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(BF16, out_dtype), f"c={with_c}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("config", [20, 22, 24])
@pytest.mark.parametrize("out_dtype", [BF16, F16, F32], ids=lambda d: d.name)
@pytest.mark.parametrize("k", [328, 56, 72])
def test_tma_store_epilogue_under_the_next_tiles_mmas(config, out_dtype, k):
    """Configs 20 / 22 / 24 (the TMA-store epilogue of 8 / 10 whose stores of tile j run after tile j + 1's
    first k-block of MMAs is issued; the last tile's after the loop; f32 outputs store as 8 / 10 do; 22 in
    2x1 clusters, 24 128x192): several tiles per CTA (306 tiles of 128x256, 162 of 256x256 clusters, 408 of
    128x192), tails in M, N and K, batches, bias + relu + alpha + c. Bitwise equal to itself and to the
    plain TMA-store entry of the same tile where there is one (the same arithmetic, only the order of the
    stores moves). K of one and two k-blocks too: the pending tile's stores then follow units of a single
    k-block."""
    arch = _require_kernels()
    _require_config(arch, config)
    from jax_tmem.ops import gemm as gemm_op
    s = seed_of("tmastore-overlap", config, out_dtype, k)
    B, m, n = 2, 2100, 2056
    a, b = rand(s, (B, m, k), BF16), rand(s + 1, (B, k, n), BF16)
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, (B, m, n), out_dtype)
    dn = (((2,), (1,)), ((0,), (0,)))
    epi = gemm_op.Epilogue(activation="relu", alpha=0.5, has_bias=True, has_c=True)
    run = lambda cfg: _run_poisoned(
        lambda x, y, bb, cc: gemm_op.gemm(x, y, bb, cc, dn, np.dtype(out_dtype), epi, "kernel", True, cfg),
        (B, m, n), out_dtype, a, b, bias, c)
    o1, o2 = run(config)
    plain = {20: 8, 22: 10}.get(config)
    ref = _ref(a, b, dn, bias=bias, act="relu", alpha=0.5, c=c)
    assert not np.isnan(o1).any(), "kernel left unwritten (NaN-poisoned) outputs"
    err = np.abs(o1 - ref).max() / np.abs(ref).max()
    assert err < _tol(BF16, out_dtype), f"rel err {err:.3e}"
    np.testing.assert_array_equal(o1, o2)
    if plain is not None and _built(arch, plain):  # a default build has 20 / 22 but not 8 / 10
        np.testing.assert_array_equal(o1, run(plain)[0])


def test_tma_store_epilogue_rejects_unaligned_rows():
    """Forcing config 8 on an output whose row pitch TMA cannot address (100 bf16 = 200 bytes) is an
    error from the FFI handler that names the output, not a wrong result or a crash."""
    _require_config(_require_kernels(), 8)
    from jax_tmem.ops import gemm as gemm_op
    a, b = rand(1, (64, 32), BF16), rand(2, (100, 32), BF16)  # both K-major: 64-byte rows, fine for TMA
    fn = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, (((1,), (1,)), ((), ())), np.dtype(BF16),
                                        gemm_op.Epilogue(), "kernel", True, 8))
    with pytest.raises(Exception, match="output \\(TMA store epilogue\\)"):
        jax.block_until_ready(fn(a, b))


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: f"A{l[0]}_B{l[1]}")
def test_int8(layout):
    """int8 x int8: exact s32 accumulation on sm_100a (kind::i8); elsewhere XLA, with the reason."""
    arch = _require_kernels()
    m, n, k = 264, 520, 304
    rng = np.random.default_rng(seed_of("int8", layout))
    a = jnp.asarray(rng.integers(-128, 128, (m, k) if layout[0] == "K" else (k, m)), jnp.int8)
    b = jnp.asarray(rng.integers(-128, 128, (n, k) if layout[1] == "K" else (k, n)), jnp.int8)
    lc = (1,) if layout[0] == "K" else (0,)
    rc = (1,) if layout[1] == "K" else (0,)
    dn = ((lc, rc), ((), ()))
    ref = np.asarray(jax.lax.dot_general(a, b, dn, preferred_element_type=jnp.int32), np.float64)
    fn = lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.float32)
    if arch != "sm_100a":
        jax_tmem.clear_decisions()
        out = jax.jit(fn)(a, b)
        assert jax_tmem.decisions()[-1].path == "xla" and "int8" in jax_tmem.decisions()[-1].reason
        np.testing.assert_array_equal(np.asarray(out, np.float64), ref)
        return
    with jax_tmem.use_path("kernel"):
        o1, o2 = _run_poisoned(fn, (m, n), F32, a, b)
    np.testing.assert_array_equal(o1.astype(np.float64), ref)  # |sums| < 2^24: exact in f32
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("dtype,w_layout", [(BF16, "NK"), (BF16, "KN"), (E4M3, "NK"), (E4M3, "KN")])
def test_129_192_tokens_run_two_token_tiles(dtype, w_layout):
    """129-192 tokens against a weight of at most #SMs 128-row tiles (menu.h sm90_token_tiles): the heuristic's
    entry 41 (129-160 tokens) / 38 (161-192): swap-AB, two 80- / 96-token tiles, 2 K splits summed in a cluster
    where twice the tiles fit on the SMs (at 129-160 tokens and K >= 8192 entry 48: 41's tiles in weight-multicast
    pairs, a pair per split, also where the pairs' units fill the SMs twice over, as the 70B O / down; at 161-192
    tokens and K >= 8192 39, 38's tiles in pairs, where 38 would run one split), else one split;
    named in the log; token, weight and K tails; against
    float64, poisoned, twice alike."""
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip("sm_90a's rule")
    sms = jax.devices()[0].core_count  # the SMs the plan counts
    dn = (((1,), (0 if w_layout == "KN" else 1,)), ((), ()))
    # 2 x sms // 4 tiles: 2 splits; 2 x sms // 2: 1 split; more tiles than SMs: another plan
    one = None if dtype == E4M3 and w_layout == "KN" else (38, 1)  # (an 8-bit (K, N) weight: 2 splits or entry 19)
    qkv = None if dtype == E4M3 and w_layout == "KN" else (41, 1)  # 41's tiles fit once, not twice (the 8B QKV)
    # (N a multiple of 16: an 8-bit (K, N) weight's rows stay TMA-legal, read in place, not transposed first)
    for m, n, k, want in ((129, 128 * (sms // 4) - 48, 4160, (41, -2)), (192, 128 * (sms // 2) - 16, 4112, one),
                          (160, 128 * (sms // 4) - 16, 4128, (41, -2)), (176, 128 * (sms // 4), 4096, (38, -2)),
                          (150, 128 * (sms // 2 + 3), 2112, None), (144, 192 * (sms // 4) - 16, 4128, qkv),
                          (136, 128 * (sms // 4) - 16, 8256, (41, -2) if dtype == E4M3 and w_layout == "KN"
                           else (48, -2)),  # K >= 8192: weight-multicast pairs
                          (152, 128 * (sms // 2) - 16, 8208, None if dtype == E4M3 and w_layout == "KN"
                           else (48, -2)),  # pairs that fill the SMs twice over (the 70B O / down)
                          (184, 128 * (sms // 2) - 16, 8208, None if dtype == E4M3 and w_layout == "KN"
                           else (39, -2))):  # 161-192 tokens where 38 would run one split: 39's pairs
        plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype=dtype, b_mn_major=w_layout == "KN", num_sms=sms)
        assert (plan["config"], plan["splits"]) == want if want else plan["config"] not in (38, 41), (m, n, k, plan)
        s = seed_of("tokens96", dtype, w_layout, m)
        x = rand(s, (m, k), dtype)
        w = rand(s + 1, (k, n) if w_layout == "KN" else (n, k), dtype)
        jax_tmem.clear_decisions()
        o1, o2 = _run_poisoned(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=BF16, path="kernel"),
                               (m, n), BF16, x, w)
        target = jax_tmem.decisions()[-1].target
        assert ("128(N)x96(M)" in target, "128(N)x80(M)" in target) == (
            plan["config"] in (38, 39), plan["config"] in (41, 48)), (
            m, n, k, target)
        ref = _ref(x, w, dn)
        assert not np.isnan(o1).any(), f"{m}x{n}x{k}: unwritten (NaN-poisoned) outputs"
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(dtype, BF16), f"{m}x{n}x{k}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("dtype,w_layout", [(BF16, "NK"), (BF16, "KN"), (F16, "NK"), (E4M3, "NK")])
def test_65_128_tokens_run_weight_multicast_pairs(dtype, w_layout):
    """65-128 tokens, 16-bit operands, K >= 8192, at most a quarter as many 128-row weight tiles as SMs (menu.h
    sm90_pairs_128_tokens, the 8B down projection): entry 48's pairs of 80-token tiles sharing the weight by multicast,
    2 K splits (a pair each) summed through a pool workspace. Token, weight and K tails; named in the log; against
    float64, NaN-poisoned, twice alike. An fp8 weight keeps another plan (measured a loss), checked the same way. At
    65-80 tokens each pair's second tile holds no token (a wholly out-of-bounds box)."""
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip("sm_90a's rule")
    sms = jax.devices()[0].core_count
    dn = (((1,), (0 if w_layout == "KN" else 1,)), ((), ()))
    for m, n, k in ((65, 128 * (sms // 4) - 16, 8208), (80, 128 * (sms // 4), 14336),
                    (81, 128 * (sms // 4) - 16, 8208), (100, 128 * (sms // 8) + 8, 8192),
                    (128, 128 * (sms // 4) - 16, 8320)):
        plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype=dtype, b_mn_major=w_layout == "KN", num_sms=sms)
        pairs = dtype != E4M3
        assert ((plan["config"], plan["splits"]) == (48, -2)) == pairs, (m, n, k, plan)
        s = seed_of("pairs128", dtype, w_layout, m)
        x = rand(s, (m, k), dtype)
        w = rand(s + 1, (k, n) if w_layout == "KN" else (n, k), dtype)
        jax_tmem.clear_decisions()
        o1, o2 = _run_poisoned(
            lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=BF16, path="kernel"), (m, n), BF16, x, w)
        target = jax_tmem.decisions()[-1].target
        assert ("128(N)x80(M)" in target and "weight multicast" in target) == pairs, (m, n, k, target)
        ref = _ref(x, w, dn)
        assert not np.isnan(o1).any(), f"{m}x{n}x{k}: unwritten (NaN-poisoned) outputs"
        err = np.abs(o1 - ref).max() / np.abs(ref).max()
        assert err < _tol(dtype, BF16), f"{m}x{n}x{k}: rel err {err:.3e}"
        np.testing.assert_array_equal(o1, o2)
